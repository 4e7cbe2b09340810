"""Shared fixtures: a fresh data directory, a harness over it (plain, or `scripted` by the module's `rules`), an
in-memory MCP client of the server, and helpers to call verbs, serve an app on loopback and give HTTP two tokens.

Each folder's conftest.py adds what only its suites share (tests/models/: a fake provider API; tests/runs/: a bare
run store; tests/sandbox/: a working sandbox; and so on)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import pytest
from mcp import Client

from mcp_harness.config import HttpSettings, TokenSettings, load_settings, token_hash
from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.server import build_server


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="run the long form of suites that have one (the crash suite: 100+ kills instead of about 20)",
    )
    parser.addoption(
        "--crash-seed",
        type=int,
        default=None,
        help="seed of the crash suite's random workload and kill moments (printed when it fails), to replay a run",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Suites that size themselves at import (the fuzz suite's hypothesis settings) read `--long` from here.
    if config.getoption("--long"):
        os.environ["MCP_HARNESS_LONG"] = "1"


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own ~/.config/mcp-harness/config.toml (or MCP_HARNESS_CONFIG) must not leak into the suite."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    monkeypatch.delenv("MCP_HARNESS_CONFIG", raising=False)


@pytest.fixture
def long_run(request: pytest.FixtureRequest) -> bool:
    """Whether `--long` was given: a suite with a long form runs it."""
    return bool(request.config.getoption("--long"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def scripted_harness(tmp_path: Path, rules: list[dict[str, Any]], name: str = "script.json") -> Harness:
    """A harness whose `scripted` provider answers by `rules` (models/scripted.py), with its data under tmp_path."""
    import json

    script = tmp_path / name
    script.write_text(json.dumps({"rules": rules}))
    providers = {"scripted": {"type": "scripted", "file": str(script)}}
    return Harness(load_settings(data_dir=tmp_path / "data", providers=providers))


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    """The script of `scripted`: every turn answers "done". A module with its own script overrides this fixture."""
    return [{"turns": [{"text": "done"}]}]


@pytest.fixture
def scripted(tmp_path: Path, rules: list[dict[str, Any]]) -> Iterator[Harness]:
    """A harness whose `scripted` provider answers by `rules`, closed after the test."""
    harness = scripted_harness(tmp_path, rules)
    yield harness
    harness.close()


@pytest.fixture
def harness(data_dir: Path) -> Iterator[Harness]:
    h = Harness(load_settings(data_dir=data_dir))
    yield h
    h.close()


@pytest.fixture(params=["legacy", "2026-07-28"])
async def client(request: pytest.FixtureRequest, harness: Harness) -> AsyncIterator[Client]:
    """An in-memory client, once per protocol era (handshake 2025-11-25 and stateless 2026-07-28)."""
    async with Client(build_server(harness), mode=request.param) as c:
        yield c


async def call(c: Client, verb: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a verb that must succeed; return its structured result."""
    result = await c.call_tool(verb, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def refused(c: Client, verb: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a verb that must be refused; return `structuredContent.error` after checking the text matches it."""
    result = await c.call_tool(verb, arguments)
    assert result.is_error, result.structured_content
    assert isinstance(result.structured_content, dict)
    error = result.structured_content["error"]
    assert set(error) == {"code", "status", "message"}
    assert result.content[0].text == error["message"]  # pyright: ignore[reportAttributeAccessIssue]
    return error


@asynccontextmanager
async def serving(
    app: Any, *, lifespan: Literal["auto", "on", "off"] = "on", force_exit: bool = False
) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn on a free loopback port for the block; yields its base URL."""
    import anyio
    import uvicorn

    # force_exit skips waiting for open connections, but on Python 3.12+ uvicorn's shutdown still awaits the
    # listening server's `wait_closed`, which now waits for every connection, an open stream (a console tab's
    # live feed) included: bounded as `serve_http`'s own shutdown is.
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan=lifespan,
        timeout_graceful_shutdown=1 if force_exit else None,
    )
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        server.should_exit = True
        server.force_exit = force_exit


def owner_and_other(harness: Harness, **http: Any) -> HttpSettings:
    """Create agent "other" beside the default one; HTTP settings (with `http`'s other fields) holding two tokens:
    `owner-token` for the owner and `other-token` scoped to "other"."""
    harness.agents.create(
        harness.account_id, normalize_definition({**harness.default_definition().to_json(), "name": "other"})
    )
    tokens = [
        TokenSettings(hash=token_hash("owner-token"), label="owner"),
        TokenSettings(hash=token_hash("other-token"), agent="other", label="other"),
    ]
    return HttpSettings(tokens=tokens, **http)


def text_of(result: Any) -> str:
    return result.content[0].text
