"""The house rules `make test` holds the code to: the layering contracts (import-linter, configured in
pyproject.toml) pass here and fail on a copy that breaks them, no test file grows past 600 lines, and every docstring
compiles on newer Pythons."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    # The tree at `cwd` is the one analysed, not the installed package.
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    shutil.copytree(ROOT / "mcp_harness", tree / "mcp_harness", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_layering_contracts_hold() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # Even a type-only import of the composition root from the domain breaks the first contract.
        (
            "mcp_harness/grants.py",
            "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from mcp_harness.harness import Harness\n",
            "The domain does not import the composition root",
        ),
        ("mcp_harness/runs/policy.py", "import mcp_types\n", "Only server/ and resources/ import the MCP"),
    ],
)
def test_a_domain_module_reaching_up_breaks_a_contract(tmp_path: Path, module: str, line: str, broken: str) -> None:
    tree = _copy(tmp_path)
    target = tree / module
    text = target.read_text()
    target.write_text(text + "\n" + line)
    result = _lint(tree)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout and broken in result.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_module_imports_itself_back_at_run_time() -> None:
    """No import cycle among the package's modules, counting imports inside functions; annotation-only imports
    (under TYPE_CHECKING) may point back, as `services.py` and `verbs/base.py` do."""
    graph = grimp.build_graph("mcp_harness", exclude_type_checking_imports=True, cache_dir=None)
    assert _cycles(graph) == []


def test_no_test_file_is_past_600_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "tests").rglob("*.py")
        if "node_modules" not in p.parts and (n := len(p.read_text().splitlines())) > 600
    }
    assert long == {}


def test_every_docstring_is_text_newer_pythons_can_compile() -> None:
    """Python 3.13 cleans docstrings at compile time and cannot when one holds a lone surrogate (a `\\ud800` escape
    written unescaped): the package then fails to import there, though 3.11 and 3.12 take it."""
    bad = []
    for path in [*(ROOT / "mcp_harness").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                try:
                    (doc or "").encode("utf-8")
                except UnicodeEncodeError:
                    bad.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}")
    assert bad == []
