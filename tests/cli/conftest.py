"""The command's suites share `cli`: the real command on a fresh home whose `scripted` provider answers by the
module's `rules` fixture (tests/conftest.py's, unless the module has its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.clikit import Cli


@pytest.fixture
def cli(tmp_path: Path, rules: list[dict[str, Any]]) -> Cli:
    return Cli(tmp_path, rules)
