"""mcp-harness: an MCP server that gives any client an agent harness through five verbs."""

__version__ = "0.1.0"

__all__ = ["__version__"]
