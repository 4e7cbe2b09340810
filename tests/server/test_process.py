"""`serve` tunes the collector once it has started (server/process.py): what start-up built is frozen, and young
collections come less often. Checked in a child interpreter, so the test process keeps its own settings."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json
from mcp_harness.server.process import GEN0_THRESHOLD, tune_after_startup
before = gc.get_threshold()
tune_after_startup()
tune_after_startup()
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count(),
                  "enabled": gc.isenabled(), "expected": GEN0_THRESHOLD}))
"""


def test_tuning_freezes_start_up_and_raises_the_young_threshold_only() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    seen = json.loads(out)
    assert seen["after"] == [seen["expected"], *seen["before"][1:]]
    assert seen["frozen"] > 1000 and seen["enabled"] is True
