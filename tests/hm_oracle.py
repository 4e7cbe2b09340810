"""Run the official Seed client over every blob a harness's embedded node holds (tests/js/seed_oracle.mjs)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from mcp_harness.harness import Harness

ORACLE = Path(__file__).parent / "js" / "seed_oracle.mjs"
INSTALL_HINT = "run `make test` (it runs `npm ci --prefix tests/js`)"


def run_oracle(commands: list[dict[str, object]]) -> list[dict[str, object]]:
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"Node.js is needed for the Seed client oracle (e.g. `apt-get install nodejs npm`); {INSTALL_HINT}")
    if not (ORACLE.parent / "node_modules" / "@seed-hypermedia" / "client").is_dir():
        pytest.fail(f"@seed-hypermedia/client is not installed in tests/js/node_modules; {INSTALL_HINT}")
    completed = subprocess.run(
        [node, str(ORACLE)], input=json.dumps(commands), capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def verify_all_blobs(harness: Harness) -> set[str]:
    """Every stored blob decodes and verifies in the official client, under the CID we stored it by. Returns the
    blob types seen."""
    with harness.db.reading() as conn:
        rows = conn.execute("SELECT cid, type, data FROM hm_blobs").fetchall()
    assert rows, "the node holds no blobs"
    answers = run_oracle([{"op": "verify", "hex": bytes(r["data"]).hex(), "cid": r["cid"]} for r in rows])
    for row, answer in zip(rows, answers, strict=True):
        assert answer.get("ok") is True, (row["type"], row["cid"], answer)
        assert answer["cid"] == row["cid"], (row["type"], answer)
        assert answer["type"] == row["type"]
    return {r["type"] for r in rows}
