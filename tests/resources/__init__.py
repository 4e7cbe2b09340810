"""MCP resources."""
