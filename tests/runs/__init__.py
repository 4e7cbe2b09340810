"""Runs: the durable run store, the engine that executes them, and script children."""
