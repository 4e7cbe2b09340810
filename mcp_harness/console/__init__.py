"""The web console's domain side: plain functions that build what its pages show from the stores, for a `Scope`.

Nothing here knows HTTP or MCP: `server/console.py` routes requests to these builders, and it is imported only by
`serve --http`, so the console costs the stdio server nothing at start. Every builder asks `scope.py` about each
session, run and agent it shows; someone else's thing reads as not found.
"""
