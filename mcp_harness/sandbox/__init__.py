"""The code sandbox: bubblewrap, one fresh sandbox per call, for the `execute` callable and authored lambdas.

- `bwrap`: `Sandbox` (availability, runtimes, `run`) and `ExecOutcome`.
- `probe`: the one-time check of the host that `available`, `runtimes` and `mcp-harness doctor` report.
- `command`: the bwrap command line, i.e. what of the host the sandbox sees, and how each runtime starts.
- `limits`: how the number of processes is bounded, for a root server and a normal user alike.
- `capture`: bounded reading of output; `changes`: lstat snapshots of the workspace, compared.
"""

from mcp_harness.sandbox.bwrap import RUNTIMES, ExecOutcome, Sandbox
from mcp_harness.sandbox.changes import FileChange
from mcp_harness.sandbox.probe import Probe

__all__ = ["RUNTIMES", "ExecOutcome", "FileChange", "Probe", "Sandbox"]
