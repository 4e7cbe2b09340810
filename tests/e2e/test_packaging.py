"""The wheel a newcomer installs: built from this tree, installed with `uv tool install` into an empty tool
directory, its `mcp-harness serve` answering a real MCP client over stdio, and its packaged example config.

Needs the package index (CI has PyPI); the indexes pip is configured with here are passed on to uv, so a machine
with a local mirror resolves the same versions pip would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import anyio
import pytest
import uv
from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.anyio


def _pip_indexes() -> dict[str, str]:
    """uv's environment for the indexes and find-links pip is configured with (uv does not read pip's config)."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    values: dict[str, list[str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        option = key.rpartition(".")[2]
        if option in ("index-url", "extra-index-url", "find-links"):
            items = values.setdefault(option, [])
            items += [i for i in value.strip().strip("'\"").split() if i not in items]
    env: dict[str, str] = {}
    if "index-url" in values:
        env["UV_DEFAULT_INDEX"] = values["index-url"][0]
    if "extra-index-url" in values:
        env["UV_INDEX"] = " ".join(values["extra-index-url"])
    if "find-links" in values:
        env["UV_FIND_LINKS"] = ",".join(values["find-links"])
    return env


def _build_wheel(out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        timeout=120,
    )
    (wheel,) = out.glob("seed_harness-*.whl")
    return wheel


async def test_the_wheel_installs_with_uv_and_serves_stdio(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        packaged = z.read("mcp_harness/config.example.toml")
        entry_points = next(z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert packaged == (ROOT / "config.example.toml").read_bytes(), "the wheel carries the documented example"
    assert "mcp-harness = mcp_harness.cli:main" in entry_points
    assert all(n.startswith(("mcp_harness/", "seed_harness-")) for n in names)
    assert {"mcp_harness/console/static/console.js", "mcp_harness/console/static/index.html"} <= set(names)

    tools, bin_dir = tmp_path / "tools", tmp_path / "bin"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("UV_", "MCP_HARNESS_", "VIRTUAL_ENV"))},
        **_pip_indexes(),
        "UV_TOOL_DIR": str(tools),
        "UV_TOOL_BIN_DIR": str(bin_dir),
        "UV_PYTHON": sys.executable,
        "UV_NO_PROGRESS": "1",
    }
    installed = subprocess.run(
        [uv.find_uv_bin(), "tool", "install", str(wheel)], env=env, capture_output=True, text=True, timeout=180
    )
    assert installed.returncode == 0, installed.stderr
    command = bin_dir / "mcp-harness"
    assert command.is_file()

    # Run the installed command with nothing of this checkout on its path, as a client would launch it.
    serve_env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "MCP_HARNESS_DATA_DIR": str(tmp_path / "data"),
    }
    params = StdioServerParameters(command=str(command), args=["serve"], env=serve_env, cwd=str(tmp_path))
    with anyio.fail_after(30):
        async with Client(params, mode="legacy") as c:
            assert c.protocol_version
            names = [t.name for t in (await c.list_tools()).tools]
    assert names == ["read", "write", "call", "delegate", "plan"]

    # The installed copy writes its packaged example, so `config init` works away from a checkout.
    config_home = tmp_path / "xdg"
    done = subprocess.run(
        [str(command), "config", "init"],
        env={**serve_env, "XDG_CONFIG_HOME": str(config_home)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert (config_home / "mcp-harness" / "config.toml").read_bytes() == packaged
