"""Run a reference JavaScript script from tests/js as an oracle: JSON in on stdin, JSON out on stdout.

The scripts use the official packages (`@ipld/dag-cbor`, `@seed-hypermedia/client`) that `make test` installs with
`npm ci --prefix tests/js`. Without Node.js or those packages the calling test fails, saying what to run: a skipped
comparison against the reference would be a silent promise broken.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

JS_DIR = Path(__file__).parent / "js"
INSTALL_HINT = "run `make test`, which installs them (`npm ci --prefix tests/js`)"


def run_js(script: str, payload: Any, *, package: str = "@seed-hypermedia/client", timeout: float = 120) -> Any:
    """`node tests/js/<script>` with `payload` as JSON on stdin; its stdout parsed as JSON."""
    node = shutil.which("node")
    if node is None:
        pytest.fail(
            "Node.js is not on PATH; these tests check against the official JS implementations. Install Node.js "
            f"(>= 18, e.g. `apt-get install nodejs npm`); for the packages, {INSTALL_HINT}"
        )
    if not (JS_DIR / "node_modules" / package).is_dir():
        pytest.fail(f"{package} is not installed in {JS_DIR / 'node_modules'}; {INSTALL_HINT}")
    completed = subprocess.run(
        [node, str(JS_DIR / script)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        check=False,
    )
    if completed.returncode != 0:
        pytest.fail(f"the JS reference {script} failed ({INSTALL_HINT}):\n{completed.stderr}")
    return json.loads(completed.stdout)


def run_seed_oracle(commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """tests/js/seed_oracle.mjs: one answer per command, in order."""
    answers = run_js("seed_oracle.mjs", commands)
    assert len(answers) == len(commands)
    return answers


def verify_all_blobs(harness: Any) -> set[str]:
    """Every blob a harness's node holds decodes and verifies in the official client under the CID we stored it by.
    Returns the blob types seen."""
    with harness.db.reading() as conn:
        rows = conn.execute("SELECT cid, type, data FROM hm_blobs").fetchall()
    assert rows, "the node holds no blobs"
    answers = run_seed_oracle([{"op": "verify", "hex": bytes(r["data"]).hex(), "cid": r["cid"]} for r in rows])
    for row, answer in zip(rows, answers, strict=True):
        assert answer.get("ok") is True, (row["type"], row["cid"], answer)
        assert answer["cid"] == row["cid"], (row["type"], answer)
        assert answer["type"] == row["type"]
    return {r["type"] for r in rows}
