"""The fast validity test in front of jsonschema never calls an instance valid that jsonschema refuses, and does call
the inputs real calls send valid (else it saves nothing)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from mcp_harness.schema_check import compile_check
from mcp_harness.verbs.contracts import VERBS, input_errors

SCHEMAS: list[dict[str, Any]] = [spec.input_schema for spec in VERBS.values()] + [
    {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}, "required": ["n"]},
    {"type": "object", "properties": {"kind": {"enum": ["a", "b", None, True]}}, "additionalProperties": False},
    {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 3}, "minItems": 1, "maxItems": 2},
    {"type": "object", "additionalProperties": {"type": "boolean"}, "properties": {"s": {"type": "string"}}},
    {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]},
    {"type": ["string", "null"], "enum": [1, "one"]},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": False},
    {"not": {"type": "string"}},
]

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False), st.sampled_from([1.0, 0.0]),
    st.text(max_size=4),
)  # fmt: skip
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


TYPED: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text(max_size=5),
    "integer": st.integers(-5, 5),
    "number": st.floats(-5, 5, allow_nan=False) | st.integers(-5, 5),
    "boolean": st.booleans(),
    "array": st.lists(SCALARS, max_size=3),
    "object": st.dictionaries(st.text(max_size=3), SCALARS, max_size=2),
}


def shaped(schema: Any) -> st.SearchStrategy[Any]:
    """Values near the schema's shape (its property names, its types), mixed with arbitrary JSON."""
    if not isinstance(schema, dict):
        return JSON
    options: list[st.SearchStrategy[Any]] = [JSON]
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind in TYPED:
            options.append(TYPED[kind])
    props = schema.get("properties")
    if isinstance(props, dict) and props:
        keys = st.sampled_from([*props, "other"])
        values = st.one_of(JSON, *(shaped(sub) for sub in props.values()))
        options.append(st.dictionaries(keys, values, max_size=len(props) + 1))
        required = [k for k in schema.get("required", []) if k in props]
        optional = {k: shaped(sub) for k, sub in props.items() if k not in required}
        options.append(st.fixed_dictionaries({k: shaped(props[k]) for k in required}, optional=optional))
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"] + [1, 1.0, False]))
    if "items" in schema:
        options.append(st.lists(shaped(schema["items"]), max_size=3))
    for branch in schema.get("anyOf", []):
        options.append(shaped(branch))
    return st.one_of(*options)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_certainly_valid_never_contradicts_jsonschema(data: st.DataObject) -> None:
    for schema in SCHEMAS:
        value = data.draw(shaped(schema))
        if compile_check(schema)(value):
            errors = [e.message for e in Draft202012Validator(schema).iter_errors(value)]
            assert errors == [], (json.dumps(schema), value, errors)


def test_the_inputs_real_calls_send_take_the_fast_path() -> None:
    valid = {
        "read": {"address": "~/memory/notes.md"},
        "write": {"address": "~/memory/notes.md", "content": "hello"},
        "call": {"tool": "mcp__memory__read_graph", "input": {}},
        "delegate": {"brief": "Summarize the notes"},
    }
    for verb, arguments in valid.items():
        assert compile_check(VERBS[verb].input_schema)(arguments), verb
        assert input_errors(verb, arguments) == []


def test_what_it_cannot_decide_goes_to_jsonschema_and_keeps_its_message() -> None:
    assert not compile_check({"not": {"type": "string"}})(3)  # an unknown keyword: never "certainly"
    assert not compile_check({"type": "integer"})(1.0)  # JSON Schema's integer, Python's float
    assert not compile_check({"enum": [1]})(True)
    assert input_errors("call", {"tool": ""}) == ["$.tool: '' should be non-empty"]
    assert input_errors("call", {"tool": "x", "extra": 1}) == [
        "$: Additional properties are not allowed ('extra' was unexpected)"
    ]


def test_the_reference_servers_schemas_check_as_jsonschema_does() -> None:
    """The upstream schemas `call` checks in front of every relayed call: their documented examples pass fast."""
    schema = {"type": "object", "properties": {}, "additionalProperties": False}  # server-memory's read_graph
    assert compile_check(schema)({})
    assert not compile_check(schema)({"x": 1})
