"""The `mcp-harness` command two ways: `Cli`, the real command on one data dir whose `scripted` provider answers by
given rules, for the tests of `runs`, `log` and `chat` (`python -m mcp_harness …` subprocesses, as a user runs them);
and `run`, the command's `main` in process with its output captured."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_harness.cli import main
from mcp_harness.config import load_settings
from mcp_harness.harness import Harness


class Cli:
    """`cli(*argv)` runs the command; returns (code, stdout, stderr). `start` returns the process, still running."""

    def __init__(self, home: Path, rules: list[dict[str, Any]]) -> None:
        self.home = home
        (home / "script.json").write_text(json.dumps({"rules": rules}))
        config = home / "config.toml"
        config.write_text(f'[providers.scripted]\ntype = "scripted"\nfile = {json.dumps(str(home / "script.json"))}\n')
        self.data = home / "data"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MCP_HARNESS_")},
            "MCP_HARNESS_DATA_DIR": str(self.data),
            "MCP_HARNESS_CONFIG": str(config),
            "MCP_HARNESS_MASTER_KEY": "11" * 32,
            "XDG_CONFIG_HOME": str(home / "xdg"),
        }

    def __call__(self, *argv: str, stdin: str = "") -> tuple[int, str, str]:
        done = subprocess.run(
            [sys.executable, "-m", "mcp_harness", *argv],
            input=stdin.encode(),
            capture_output=True,
            env=self.env,
            cwd=self.home,
            timeout=120,
        )
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    def ok(self, *argv: str, stdin: str = "") -> str:
        code, out, err = self(*argv, stdin=stdin)
        assert code == 0, (code, out, err)
        return out

    def json(self, *argv: str) -> Any:
        return json.loads(self.ok(*argv, "--json"))

    def refused(self, code: int, *argv: str) -> str:
        """The one-line stderr of a command that must exit with `code` and print nothing on stdout."""
        got, out, err = self(*argv)
        assert (got, out) == (code, ""), (got, out, err)
        assert err.count("\n") == 1 and err.startswith("mcp-harness: ") and "Traceback" not in err, err
        return err

    def start(self, *argv: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "mcp_harness", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=self.home,
        )

    def harness(self) -> Harness:
        return Harness(load_settings(data_dir=self.data))

    def rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Read the data dir's database from outside, as another process would (nothing before it exists)."""
        if not (self.data / "harness.db").exists():
            return []
        conn = sqlite3.connect(f"file:{self.data / 'harness.db'}?mode=ro", uri=True, timeout=10)
        conn.row_factory = sqlite3.Row
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()


def session_of(err: str) -> str:
    """The session id `chat` announces on stderr when it starts a conversation."""
    line = next(line for line in err.splitlines() if line.startswith("Session "))
    return line.split()[1]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`mcp-harness *argv` in process: (exit code, stdout, stderr)."""
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err
