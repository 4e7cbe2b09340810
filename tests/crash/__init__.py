"""Crash recovery for real: `kill -9` a running server and check what it promised after restart."""
