"""The MCP front: tools/list and refusals, transports, the wire, the HTTP edge."""
