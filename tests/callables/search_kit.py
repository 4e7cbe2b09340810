"""What the `search` suites share: identities that publish, a `search` call through the SDK client, and a loopback
server speaking the OpenAI embeddings wire format with vectors that encode a few topics (so meaning, not spelling,
decides what is similar)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from mcp import Client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.conftest import call, serving

TOPICS = (
    {"bird", "birds", "heron", "herons", "kingfisher", "egret", "feathers", "wading"},
    {"boat", "boats", "ship", "ships", "sail", "harbour", "vessel"},
    {"bread", "flour", "yeast", "bakery", "loaf", "dough"},
)


def topic_vector(text: str) -> list[float]:
    """One dimension per topic (how many of its words the text has), plus a small constant so no vector is zero."""
    words = re.findall(r"[a-z]+", text.lower())
    return [float(sum(w in topic for w in words)) for topic in TOPICS] + [0.05]


@dataclass
class Embeddings:
    """A loopback `/v1/embeddings`: records each request's body; answers `fail` statuses first, when set."""

    base: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    fail: list[int] = field(default_factory=list[int])

    @property
    def inputs(self) -> list[str]:
        return [text for body in self.requests for text in body["input"]]


@asynccontextmanager
async def embeddings_server() -> AsyncIterator[Embeddings]:
    api = Embeddings()

    async def embed(request: Request) -> Response:
        body = await request.json()
        api.requests.append(body)
        if api.fail:
            return JSONResponse({"error": {"message": "embedding backend down"}}, status_code=api.fail.pop(0))
        # Answered in reverse order: the client must place vectors by `index`, not by position.
        data = [{"object": "embedding", "index": i, "embedding": topic_vector(t)} for i, t in enumerate(body["input"])]
        usage = {"prompt_tokens": len(body["input"]), "total_tokens": len(body["input"])}
        return JSONResponse({"object": "list", "data": data[::-1], "model": body["model"], "usage": usage})

    app = Starlette(routes=[Route("/v1/embeddings", embed, methods=["POST"])])
    async with serving(app, lifespan="off") as base:
        api.base = base
        yield api


async def search(client: Client, **tool_input: Any) -> dict[str, Any]:
    """`call search` that must succeed (a contract miss succeeds too: check `results` or `validationErrors`)."""
    return await call(client, "call", {"tool": "search", "input": tool_input})


def urls(result: dict[str, Any]) -> list[str]:
    return [r["url"] for r in result["results"]]


def snippets(result: dict[str, Any]) -> list[str]:
    return [r["snippet"] for r in result["results"]]
