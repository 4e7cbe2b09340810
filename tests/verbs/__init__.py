"""The five verbs through the MCP client: call, delegate (also as an MCP task and against HTTP model servers) and the
contracts."""
