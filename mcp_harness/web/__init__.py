"""Outbound HTTP: one guarded client (`egress`) for every fetch, the page reader and the search backend."""
