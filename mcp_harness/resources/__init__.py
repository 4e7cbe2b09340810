"""MCP resources: every address `read` serves has a resource URI or template here."""

from mcp_harness.resources.catalog import RESOURCE_TEMPLATES, list_resources, read_resource

__all__ = ["RESOURCE_TEMPLATES", "list_resources", "read_resource"]
