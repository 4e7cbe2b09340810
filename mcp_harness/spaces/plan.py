"""The `harness://plan` space: this conversation's checklist, as the plan verb (verbs/plan.py) keeps it."""

from __future__ import annotations

from typing import Any

from mcp_harness.addresses import PLAN_URI, Address
from mcp_harness.spaces.space import ResourceForm, Space, markdown_resource
from mcp_harness.verbs.base import VerbContext, VerbResult
from mcp_harness.verbs.plan import plan_markdown


def read_plan(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    plan = ctx.services.sessions.get_plan(ctx.session_id) if ctx.session_id else None
    steps: list[dict[str, Any]] = list(plan.get("steps", [])) if plan else []
    if not steps:
        data: dict[str, Any] = {"summary": "This conversation has no plan.", "steps": []}
        return VerbResult.of(data, fmt=fmt)
    settled = sum(1 for s in steps if s["status"] in ("done", "failed", "skipped"))
    data = {"summary": f"Plan: {settled} of {len(steps)} steps settled.", **(plan or {})}
    return VerbResult.of(data, plan_markdown(plan or {}), fmt=fmt)


SPACE = Space(
    name="plan",
    kinds=("plan",),
    read=read_plan,
    read_form="harness://plan",
    read_line="""- `harness://plan`: this conversation's checklist.""",
    read_details="""## `harness://plan`
This conversation's checklist as set with the plan verb: {title?, steps: [{id, label, status, resolvedBy?}], ownerRunId?, settledAt?}; `steps: []` when there is none.""",  # noqa: E501
    resources=(
        ResourceForm(
            "plan",
            "This session's plan",
            PLAN_URI,
            "The checklist kept with the plan verb.",
            "text/markdown",
            template=False,
        ),
    ),
    resource_read=markdown_resource(read_plan),
)
