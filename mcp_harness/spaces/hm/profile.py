"""`write hm://<account> {action: "profile.update"}`: republish an account's Profile blob (HYPERMEDIA §1.5)."""

from __future__ import annotations

from typing import Any

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.node import Node
from mcp_harness.identity.identities import MAX_LABEL_BYTES
from mcp_harness.spaces.hm.common import Target
from mcp_harness.verbs.base import VerbContext

PROFILE_FIELDS = ("name", "avatar", "description")
MAX_PROFILE_DESCRIPTION_BYTES = 512


def profile_update(node: Node, target: Target, body: str | None, options: dict[str, Any], skip: bool):
    """Republish the signer's Profile (HYPERMEDIA §1.5): fields given replace, fields left out are kept, null
    removes avatar or description; the name stays required."""
    if target.path:
        raise BadRequest(
            f"profile.update publishes an account's profile: address the account, hm://{target.space}, not a path "
            "in it."
        )
    fields: dict[str, Any] = {}
    raw_input = options.get("input")
    for source, where in ((raw_input, "options.input"), (options.get("metadata"), "options.metadata")):
        if source is None:
            continue
        if not isinstance(source, dict):
            raise BadRequest(f"{where} must be an object: {{{', '.join(PROFILE_FIELDS)}}}.")
        unknown = [k for k in source if k not in PROFILE_FIELDS]  # pyright: ignore[reportUnknownVariableType]
        if unknown:
            raise BadRequest(
                f"A profile has no field {', '.join(repr(k) for k in unknown)}. "  # pyright: ignore[reportUnknownArgumentType]
                f"Profile fields: {', '.join(PROFILE_FIELDS)} (the picture is avatar, an ipfs:// URI)."
            )
        fields.update(source)  # pyright: ignore[reportUnknownArgumentType]
    if "name" in options:
        fields["name"] = options["name"]
    if not fields:
        raise BadRequest(f"profile.update needs options.name or options.metadata with {', '.join(PROFILE_FIELDS)}.")
    current = node.profile(target.space) or {}
    profile = {k: current[k] for k in PROFILE_FIELDS if current.get(k)}
    for key, value in fields.items():
        if value is None and key != "name":
            profile.pop(key, None)
            continue
        if not isinstance(value, str) or (key == "name" and not value.strip()):
            raise BadRequest(f"Profile {key} must be a {'non-empty ' if key == 'name' else ''}string, not {value!r}.")
        profile[key] = value.strip() if key == "name" else value
    name = profile.get("name")
    if not name:
        raise BadRequest("A profile needs a name: pass options.name.")
    if len(name.encode("utf-8")) > MAX_LABEL_BYTES:
        raise BadRequest(f"A profile name holds at most {MAX_LABEL_BYTES} bytes.")
    avatar = profile.get("avatar")
    if avatar is not None:
        scheme, _, rest = avatar.partition("://")
        try:
            if scheme != "ipfs":
                raise ValueError(scheme)
            CID.parse(rest.split("/", 1)[0])
        except ValueError:
            raise BadRequest(
                f"Profile avatar {avatar!r} is not an ipfs://<cid> URI: publish the picture with write ipfs:// first "
                "and pass the address it returns."
            ) from None
    description = profile.get("description")
    if description is not None and len(description.encode("utf-8")) >= MAX_PROFILE_DESCRIPTION_BYTES:
        raise BadRequest(
            f"Profile description is {len(description.encode('utf-8'))} bytes; it must be under "
            f"{MAX_PROFILE_DESCRIPTION_BYTES} bytes of UTF-8."
        )
    blob = node.profile_blob(target.signer, name, avatar, description)
    data: dict[str, Any] = {
        "summary": f"Published the profile of hm://{target.space}: {name}.",
        "action": "profile.update",
        "id": f"hm://{target.space}",
        **profile,
    }
    return [blob], data


def relabel_identity(ctx: VerbContext, account: str, name: str) -> None:
    """Keep the identity's label (its profile name, HARNESS §14) in step with the profile just published."""
    from mcp_harness.identity.identities import IDENTITY_KIND, secret_name_for

    secrets = ctx.services.secrets
    record = secrets.find(ctx.services.account_id, secret_name_for(account))
    if record is None or record.kind != IDENTITY_KIND or record.metadata.get("label") == name:
        return
    secrets.update_metadata(ctx.services.account_id, record.name, {**record.metadata, "label": name})
