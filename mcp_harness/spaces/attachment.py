"""The `attachment:<id>` space (HARNESS §11.2) and the image side of memory reads (issue 18).

`read attachment:<id>` finds the file in the calling conversation, else in the conversations it was delegated from
(a child reads what its parent was given, as far up as the caller may see), and answers by type: an image (PNG,
JPEG, GIF, WebP, at most 4,500,000 bytes) as an image the client's model sees, text (`text/*`, JSON, XML, YAML,
JavaScript, at most 256 KiB) inline, anything else as metadata with the way to work on it.
`write ~/memory/<path> {fromAttachment: "<id>"}` copies one into memory (spaces/memory.py calls `save_to_memory`).

For a call the harness's own run makes, "shown as an image" depends on the agent's model (`models/vision.py`); the
image itself travels when the run's next request is built from the log (`runs/images.py`), so nothing is loaded
here for it. For an MCP client the bytes ride on the result (`VerbResult.images`), and the server sends them as
image content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_harness.addresses import Address
from mcp_harness.errors import BadRequest, HarnessError, NotFound
from mcp_harness.memory.entries import MemoryEntry
from mcp_harness.memory.paths import normalize_memory_path
from mcp_harness.models.vision import MAX_IMAGE_BYTES, model_accepts_images, shown_as_image
from mcp_harness.spaces.space import Space
from mcp_harness.store.attachments import AttachmentRecord, AttachmentStore, check_id, sniff_mime
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options

if TYPE_CHECKING:
    from mcp_harness.models.wire import ImagePart
    from mcp_harness.scope import Scope
    from mcp_harness.services import Models, Stores
    from mcp_harness.store.agents import AgentRecord

MAX_INLINE_TEXT_BYTES = 256 * 1024
MAX_CHAIN = 32
"""Sessions walked up from a child (delegation is far shallower; this only bounds a corrupt cycle)."""
_TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/x-yaml", "application/yaml", "application/javascript"}
)


def is_text_type(mime: str) -> bool:
    return mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml"))


def find_attachment(stores: Stores, scope: Scope, session_id: str | None, attachment_id: str) -> AttachmentRecord:
    """The attachment in this session or the nearest session up its delegation chain that the caller sees.

    Raises:
        NotFound: no such attachment there (the same for one held by a conversation the caller may not see).
    """
    current = session_id
    for _ in range(MAX_CHAIN):
        if current is None:
            break
        session = stores.sessions.find(current)
        if session is None or not scope.sees(session):
            break
        record = stores.attachments.get(current, attachment_id)
        if record is not None:
            return record
        current = session.parent_session_id
    raise NotFound(
        f"No attachment {attachment_id} in this conversation. Attachments are added with `mcp-harness attach "
        "SESSION FILE` or POST /mcp/sessions/<id>/attachments, each to one conversation (and the children it "
        "delegates to)."
    )


def images_allowed(services: Models, agent: AgentRecord, run_id: str | None) -> tuple[bool, str]:
    """Whether a result's image reaches the caller's model, and why not. An MCP client's model is its own business
    (the image is sent); a run's is the agent's, per the catalog."""
    return (True, "") if run_id is None else model_takes_images(services, agent)


def model_takes_images(services: Models, agent: AgentRecord) -> tuple[bool, str]:
    """Whether the agent's model accepts images (`models/vision.py`), and if not, the reason to show instead."""
    definition = agent.definition
    try:
        provider_type = services.providers.require(definition.model_provider).type
    except HarnessError:
        provider_type = ""
    if model_accepts_images(provider_type, definition.model):
        return True, ""
    return False, f"the model {definition.model} does not accept images."


def read_attachment(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    refuse_unknown_options("read attachment:<id>", options, ())
    attachment_id = check_id(address.rest.strip())
    record = find_attachment(ctx.services, ctx.scope, ctx.session_id, attachment_id)
    store = ctx.services.attachments
    what = f'Attachment "{record.name}" ({record.mime_type}, {record.size} bytes)'
    data: dict[str, Any] = {
        "id": record.id,
        "name": record.name,
        "mimeType": record.mime_type,
        "size": record.size,
    }
    reason = _not_text_reason(record)
    if record.mime_type.startswith("image/"):
        allowed, why = images_allowed(ctx.services, ctx.agent, ctx.run_id)
        if image_type(store, record) is not None and allowed:
            images = () if ctx.run_id is not None else (_part(store.read_bytes(record), record),)
            data = {"summary": f"{what} is shown as an image.", **data, "shownAsImage": True}
            return VerbResult(data, data["summary"], images)
        reason = why or _image_reason(record.mime_type, record.size)
    elif reason is None:
        raw = store.read_bytes(record)
        try:
            content = raw.decode("utf-8")
        except UnicodeDecodeError:
            reason = "it is not valid UTF-8 text."
        else:
            data = {"summary": f"Read {what[0].lower()}{what[1:]}.", **data, "shownAsImage": False, "content": content}
            return VerbResult.of(data, content, fmt=fmt)
    hint = (
        f'Save it to memory with write ~/memory/<path> {{fromAttachment: "{record.id}"}} (or ~/memory/ for '
        f"attachments/{record.name}) and work on it with call execute."
    )
    data = {"summary": f"{what} is not shown: {reason} {hint}", **data, "shownAsImage": False, "reason": reason}
    return VerbResult.of(data, fmt=fmt)


def image_type(store: AttachmentStore, record: AttachmentRecord) -> str | None:
    """The image type an attachment can be shown as: small enough, and its bytes (not only its declared type) a
    PNG, JPEG, GIF or WebP, so that no provider is sent a picture it cannot decode."""
    if not shown_as_image(record.mime_type, record.size):
        return None
    with store.path(record).open("rb") as fh:
        sniffed = sniff_mime(fh.read(16))
    return sniffed if sniffed is not None and shown_as_image(sniffed, record.size) else None


def _not_text_reason(record: AttachmentRecord) -> str | None:
    if not is_text_type(record.mime_type):
        return "only images and text are shown, and this is neither."
    if record.size > MAX_INLINE_TEXT_BYTES:
        return f"text over {MAX_INLINE_TEXT_BYTES // 1024} KiB is not shown inline."
    return None


def _image_reason(mime: str, size: int) -> str:
    if size > MAX_IMAGE_BYTES:
        return f"images over {MAX_IMAGE_BYTES} bytes are not shown inline."
    return f"its bytes are not a PNG, JPEG, GIF or WebP image (declared {mime}), the types models take."


def _part(data: bytes, record: AttachmentRecord) -> ImagePart:
    from mcp_harness.models.wire import ImagePart  # the model wire types load with the first image shown

    return ImagePart(record.mime_type, data, label=f"attachment {record.name}")


def save_to_memory(ctx: VerbContext, rest: str, content: object, options: dict[str, Any]) -> VerbResult:
    """`write ~/memory/<path> {fromAttachment}`: the attachment's bytes at the path; an address naming a directory
    (the root, or a path ending in `/`) stores it there by its name, the root under `attachments/`."""
    if content is not None or len(options) > 1:
        raise BadRequest("write ~/memory with fromAttachment takes no content and no other option.")
    attachment_id = check_id(options["fromAttachment"])
    record = find_attachment(ctx.services, ctx.scope, ctx.session_id, attachment_id)
    if rest == "" or rest.endswith("/"):
        base = normalize_memory_path(rest, allow_root=True) or "attachments"
        path = normalize_memory_path(f"{base}/{record.name}")
    else:
        path = normalize_memory_path(rest)
    entry = ctx.services.memory(ctx.agent).write_file(path, ctx.services.attachments.read_bytes(record))
    data = {
        "summary": f'Saved attachment "{record.name}" to {path} ({entry.size} bytes, {record.mime_type}).',
        "id": record.id,
        "path": path,
        "size": entry.size,
        "mimeType": record.mime_type,
    }
    return VerbResult.of(data)


def memory_image(ctx: VerbContext, entry: MemoryEntry, raw: bytes, data: dict[str, Any]) -> VerbResult | None:
    """A memory file that is a small image, as an image result (beyond the reference, which gives metadata); None
    when it is not one, or the caller's model takes no images (the binary-file answer then stands)."""
    mime = sniff_mime(raw[:16])  # by its bytes: a name ending .png says nothing about what a provider can decode
    if (
        mime is None
        or not shown_as_image(mime, entry.size)
        or not images_allowed(ctx.services, ctx.agent, ctx.run_id)[0]
    ):
        return None
    summary = f"{entry.path} is an image ({entry.size} bytes, {mime}), shown as an image."
    shown = {"summary": summary, **data, "mimeType": mime, "encoding": "binary", "shownAsImage": True}
    from mcp_harness.models.wire import ImagePart

    images = () if ctx.run_id is not None else (ImagePart(mime, raw, label=f"~/memory/{entry.path}"),)
    return VerbResult(shown, summary, images)


SPACE = Space(
    name="attachment",
    kinds=("attachment",),
    read=read_attachment,
    read_options=(),
    read_form="attachment:<id>",
    read_line="""- `attachment:<id>`: a file given to this conversation (64-hex id): an image is shown as an image, text inline, anything else as metadata.""",  # noqa: E501
    read_details=f"""## `attachment:<id>`
- A file the user gave this conversation (`mcp-harness attach SESSION FILE`, POST /mcp/sessions/<id>/attachments), found here or in the conversations this one was delegated from; the id is the SHA-256 of its bytes, 64 lowercase hex characters. At most 100 MiB a file and 200 files a conversation.
- An image (PNG, JPEG, GIF, WebP) of at most {MAX_IMAGE_BYTES} bytes, when your model accepts images: {{id, name, mimeType, size, shownAsImage: true}}, and the image itself beside the text.
- Text (`text/*`, JSON, XML, YAML, JavaScript) of at most 256 KiB: {{id, name, mimeType, size, shownAsImage: false, content}}.
- Anything else: the metadata and a `reason`; `write ~/memory/<path> {{fromAttachment: "<id>"}}` copies it into memory, where `call execute` can work on it.
- It takes no options; an unknown id (or one another conversation holds) is not found.""",  # noqa: E501
)
