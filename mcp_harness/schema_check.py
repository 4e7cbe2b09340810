"""A fast "certainly valid" test for the JSON Schema subset our contracts use, in front of jsonschema.

Why: jsonschema's `iter_errors` walks a schema through generic keyword dispatch, and checking a verb's input was a
twentieth of what a relayed `call` cost the harness (issue 20). Most inputs are valid; for those a predicate compiled
once per schema answers in microseconds. It answers only "certainly valid" (True) or "let jsonschema decide"
(False): a keyword it does not know, a number that JSON Schema and Python compare differently, anything subtle
compiles to False, so the messages an invalid input gets are always jsonschema's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated", "readOnly",
                          "writeOnly", "format", "$schema", "$id"})  # fmt: skip
"""Keywords that never make an instance invalid (`format` is an annotation in Draft 2020-12 by default)."""

_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # Integers only: JSON Schema also calls 1.0 an integer, and such a value goes to jsonschema.
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def _never(_: Any) -> bool:
    return False


def _always(_: Any) -> bool:
    return True


def compile_check(schema: Any) -> Check:
    """A predicate that is True only for instances `schema` certainly accepts."""
    if schema is True or schema == {}:
        return _always
    if not isinstance(schema, dict):
        return _never
    checks: list[Check] = []
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS:
            continue
        check = _keyword(keyword, value, schema)
        if check is None:
            return _never
        checks.append(check)
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(check(v) for check in checks)


def _keyword(keyword: str, value: Any, schema: dict[str, Any]) -> Check | None:  # noqa: PLR0911 - one per keyword
    if keyword == "type":
        names = value if isinstance(value, list) else [value]
        tests = [_TYPES.get(name) for name in names]
        if any(test is None for test in tests):
            return None
        return lambda v: any(test(v) for test in tests)  # pyright: ignore[reportOptionalCall]
    if keyword == "properties" and isinstance(value, dict):
        props = {key: compile_check(sub) for key, sub in value.items()}
        return lambda v: not isinstance(v, dict) or all(props[k](v[k]) for k in props.keys() & v.keys())
    if keyword == "required" and isinstance(value, list):
        names = tuple(value)
        return lambda v: not isinstance(v, dict) or all(name in v for name in names)
    if keyword == "additionalProperties":
        return _additional(value, schema)
    if keyword == "items" and isinstance(value, dict | bool):
        item = compile_check(value)
        return lambda v: not isinstance(v, list) or all(item(x) for x in v)
    if keyword in ("maxItems", "minItems", "maxLength", "minLength") and isinstance(value, int):
        return _bound(keyword, value)
    if keyword == "enum" and isinstance(value, list):
        return _enum(value)
    if keyword == "anyOf" and isinstance(value, list) and value:
        branches = [compile_check(sub) for sub in value]
        return lambda v: any(branch(v) for branch in branches)
    return None


def _additional(value: Any, schema: dict[str, Any]) -> Check | None:
    if "patternProperties" in schema:
        return None
    known = frozenset(schema.get("properties") or {})
    if value is True:
        return _always
    if value is False:
        return lambda v: not isinstance(v, dict) or v.keys() <= known
    if isinstance(value, dict):
        extra = compile_check(value)
        return lambda v: not isinstance(v, dict) or all(extra(v[k]) for k in v.keys() - known)
    return None


def _bound(keyword: str, limit: int) -> Check:
    kind = list if keyword.endswith("Items") else str
    if keyword.startswith("max"):
        return lambda v: not isinstance(v, kind) or len(v) <= limit
    return lambda v: not isinstance(v, kind) or len(v) >= limit


def _enum(members: list[Any]) -> Check | None:
    # Python's == says True == 1 == 1.0; JSON Schema's enum does not: only plain strings, null and booleans, by type.
    if not all(m is None or isinstance(m, str | bool) for m in members):
        return None
    allowed = {(type(m), m) for m in members}
    return lambda v: (type(v), v) in allowed if v is None or isinstance(v, str | bool) else False
