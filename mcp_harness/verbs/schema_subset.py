"""The JSON Schema subset that authored tools may declare, and the validator `call` applies (HARNESS §4).

Authored schemas are checked for shape before they are stored, so a tool can never carry a schema that `call`
would misread; values are then checked by this same small validator rather than by full JSON Schema, because the
touch-expand contract promises exactly these rules and these `$.path: message` errors.
"""

from __future__ import annotations

from typing import Any

KEYWORDS = frozenset(
    {
        "type",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "items",
        "minItems",
        "maxItems",
    }
)
TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")


def shape_errors(schema: object, *, path: str = "$", root: bool = True) -> list[str]:
    """Why `schema` is outside the supported subset (empty when it is inside)."""
    if not isinstance(schema, dict):
        return [f"{path}: a schema must be an object"]
    errors: list[str] = []
    schema_dict: dict[str, Any] = schema  # pyright: ignore[reportUnknownVariableType]
    for key in schema_dict:
        if key not in KEYWORDS:
            errors.append(f"{path}: unsupported schema keyword {key!r} (supported: {', '.join(sorted(KEYWORDS))})")
    declared = schema_dict.get("type")
    names = declared if isinstance(declared, list) else [declared] if declared is not None else []
    for name in names:  # pyright: ignore[reportUnknownVariableType]
        if name not in TYPES:
            errors.append(f"{path}: unknown type {name!r} (types: {', '.join(TYPES)})")
    if root and declared is not None and declared != "object":
        errors.append(f'{path}: the root must be type "object" (a tool takes one JSON object)')
    props = schema_dict.get("properties")
    if props is not None:
        if not isinstance(props, dict):
            errors.append(f"{path}.properties: must be an object of schemas")
        else:
            for name, sub in props.items():  # pyright: ignore[reportUnknownVariableType]
                errors += shape_errors(sub, path=f"{path}.properties.{name}", root=False)
    required = schema_dict.get("required")
    if required is not None and not (isinstance(required, list) and all(isinstance(r, str) for r in required)):  # pyright: ignore[reportUnknownVariableType]
        errors.append(f"{path}.required: must be an array of property names")
    additional = schema_dict.get("additionalProperties")
    if isinstance(additional, dict):
        errors += shape_errors(additional, path=f"{path}.additionalProperties", root=False)
    elif additional is not None and not isinstance(additional, bool):
        errors.append(f"{path}.additionalProperties: must be a boolean or a schema")
    if "items" in schema_dict:
        errors += shape_errors(schema_dict["items"], path=f"{path}.items", root=False)
    enum = schema_dict.get("enum")
    if enum is not None and not isinstance(enum, list):
        errors.append(f"{path}.enum: must be an array")
    for key in ("minLength", "maxLength", "minItems", "maxItems"):
        value = schema_dict.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            errors.append(f"{path}.{key}: must be a non-negative integer")
    for key in ("minimum", "maximum"):
        value = schema_dict.get(key)
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            errors.append(f"{path}.{key}: must be a number")
    if "description" in schema_dict and not isinstance(schema_dict["description"], str):
        errors.append(f"{path}.description: must be a string")
    return errors


def _type_of(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _matches(kind: str, declared: str) -> bool:
    return kind == declared or (declared == "number" and kind == "integer")


def value_errors(schema: dict[str, Any], value: object, path: str = "$") -> list[str]:
    """`$.path: message` lines for each way `value` breaks `schema` (empty when it conforms)."""
    declared = schema.get("type")
    if declared is not None:
        allowed = declared if isinstance(declared, list) else [declared]
        kind = _type_of(value)
        if not any(_matches(kind, d) for d in allowed):
            return [f"{path}: expected {' or '.join(allowed)}, got {kind}"]
    errors: list[str] = []
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        errors.append(f"{path}: must be one of {', '.join(map(repr, enum))}")  # pyright: ignore[reportUnknownArgumentType]
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: must be at least {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: must be at most {schema['maxLength']} characters")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: must be <= {schema['maximum']}")
    if isinstance(value, list):
        items: list[Any] = value  # pyright: ignore[reportUnknownVariableType]
        if "minItems" in schema and len(items) < schema["minItems"]:
            errors.append(f"{path}: must have at least {schema['minItems']} items")
        if "maxItems" in schema and len(items) > schema["maxItems"]:
            errors.append(f"{path}: must have at most {schema['maxItems']} items")
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(items):
                errors += value_errors(schema["items"], item, f"{path}[{i}]")
    if isinstance(value, dict):
        obj: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
        props: dict[str, Any] = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in obj:
                errors.append(f"{path}.{name}: is required")
        additional = schema.get("additionalProperties")
        for key, item in obj.items():
            if key in props:
                errors += value_errors(props[key], item, f"{path}.{key}")
            elif additional is False:
                errors.append(f"{path}.{key}: is not allowed (known fields: {', '.join(props) or 'none'})")
            elif isinstance(additional, dict):
                errors += value_errors(additional, item, f"{path}.{key}")  # pyright: ignore[reportUnknownArgumentType]
    return errors
