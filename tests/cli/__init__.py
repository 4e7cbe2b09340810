"""The `mcp-harness` command, in process and as a subprocess."""
