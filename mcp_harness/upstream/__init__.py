"""MCP servers mounted behind `call` (issue 20): the MCP *client* edge, the one place besides server/ and resources/
that imports the MCP SDK. The domain reaches it only through the Protocol it declares; the harness wires it."""
