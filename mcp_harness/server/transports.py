"""The transports, one module each: `stdio.py` (threadless on pipes) and `http.py` (Streamable HTTP behind its
guard, with `edge.py` for addresses and `events.py` for resumable streams); `wire.py` answers what neither parser
would. This module keeps the names importable from one place."""

from __future__ import annotations

from mcp_harness.server.http import (
    TOKEN_SCOPE_KEY,
    HttpListener,
    SessionCheck,
    http_app,
    listen_http,
    serve_http,
    session_visibility,
)
from mcp_harness.server.stdio import EOF_GRACE_S, serve_stdio

__all__ = [
    "EOF_GRACE_S",
    "TOKEN_SCOPE_KEY",
    "HttpListener",
    "SessionCheck",
    "http_app",
    "listen_http",
    "serve_http",
    "serve_stdio",
    "session_visibility",
]
