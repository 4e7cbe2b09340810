"""The code sandbox: bubblewrap, one fresh sandbox per call, for the `execute` callable and authored lambdas.

- `bwrap`: `Sandbox` (availability, runtimes, `run`) and `ExecOutcome`.
- `probe`: the one-time check of the host that `available`, `runtimes` and `mcp-harness doctor` report.
- `command`: the bwrap command line, i.e. what of the host the sandbox sees, and how each runtime starts.
- `limits`: how the number of processes is bounded, for a root server and a normal user alike.
- `capture`: bounded reading of output; `changes`: lstat snapshots of the workspace, compared.
- `monty`: the other sandbox, Monty, for script children (lint, the ctx prelude, limits).

The names below load on first use, so importing `sandbox.monty` at server start does not pay for bubblewrap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_harness.sandbox.bwrap import RUNTIMES, ExecOutcome, Sandbox
    from mcp_harness.sandbox.changes import FileChange
    from mcp_harness.sandbox.probe import Probe

_LAZY = {
    "RUNTIMES": "bwrap",
    "ExecOutcome": "bwrap",
    "Sandbox": "bwrap",
    "FileChange": "changes",
    "Probe": "probe",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = ["RUNTIMES", "ExecOutcome", "FileChange", "Probe", "Sandbox"]
