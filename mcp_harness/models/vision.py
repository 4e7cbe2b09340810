"""Which models take images (HARNESS §2, "image input per model-capabilities"), and images in each wire format.

The catalog is by provider type and model id, as `reasoning.py` is for reasoning levels: the hosted families that
accept image input (GPT-4o and later, the o-series but its minis, Claude 3 and later, every Gemini), and the
open-weight vision families an Ollama or OpenAI-compatible server runs (LLaVA, Llama 3.2 Vision, Qwen-VL, Gemma 3,
Pixtral, …). A model it does not know is taken not to accept images: a vision model missing here gets a text note
in place of each image, which says what was not shown, rather than a request its server might refuse.

Only the types every provider takes travel as images: PNG, JPEG, GIF and WebP, each at most 4,500,000 bytes (the
reference's bound, under Anthropic's 5 MB per image).
"""

from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_harness.models.wire import ImagePart

IMAGE_MIME_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGE_BYTES = 4_500_000

_OPENAI_VISION = re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-4-turbo|gpt-4-vision|gpt-[5-9]|o[134])")
_OPENAI_BLIND = re.compile(r"^(o1-mini|o1-preview|o3-mini|gpt-4o-(mini-)?(audio|realtime|search|transcribe|tts))")
_OPEN_VISION = re.compile(
    r"(llava|bakllava|vision|-vl\b|-vl-|vl:|qwen2\.5vl|qwen3-vl|minicpm-v|moondream|pixtral|gemma3(?!:1b)|gemma-3"
    r"|llama4|llama-4|mistral-small3\.[12]|internvl|cogvlm|molmo|phi-?[34].*vision)"
)


def model_accepts_images(provider_type: str, model: str) -> bool:
    """Whether `model` on a provider of `provider_type` takes image input (see the module docstring)."""
    if provider_type == "scripted":
        return True  # canned replies: whatever it is sent, it reads nothing
    if provider_type == "sampling":
        return False  # the client's model is unknown here; its turns are sent as text (server/sampling.py)
    name = model.strip().lower()
    bare = name.rsplit("/", 1)[-1]  # OpenRouter's `vendor/model`
    if bare.startswith("claude-"):
        return not re.match(r"^claude-(instant|1|2)", bare)
    if bare.startswith(("gemini-", "gemma-3")):
        return True
    if _OPENAI_VISION.match(bare):
        return not _OPENAI_BLIND.match(bare)
    return _OPEN_VISION.search(name) is not None


def shown_as_image(mime_type: str | None, size: int) -> bool:
    """Whether a file of this type and size can travel to a model as an image."""
    return mime_type in IMAGE_MIME_TYPES and 0 < size <= MAX_IMAGE_BYTES


def data_url(image: ImagePart) -> str:
    return f"data:{image.mime_type};base64,{base64.b64encode(image.data).decode('ascii')}"


def openai_image_parts(images: tuple[ImagePart, ...], intro: str | None = None) -> list[dict[str, Any]]:
    """Chat-completions content parts: an optional text part naming them, then one `image_url` part (a data URL)
    per image."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": intro}] if intro else []
    parts += [{"type": "image_url", "image_url": {"url": data_url(i)}} for i in images]
    return parts


def anthropic_image_blocks(images: tuple[ImagePart, ...]) -> list[dict[str, Any]]:
    """Messages API `image` blocks with a base64 source."""
    return [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": i.mime_type, "data": base64.b64encode(i.data).decode("ascii")},
        }
        for i in images
    ]


def images_intro(images: tuple[ImagePart, ...], call_id: str | None) -> str:
    """The text that introduces a tool result's images in the user message that carries them (OpenAI's wire has
    no images in tool messages)."""
    what = ", ".join(i.label for i in images if i.label) or f"{len(images)} image(s)"
    return f"The image(s) your tool call {call_id or ''} returned: {what}.".replace("call  ", "call ")


__all__ = [
    "IMAGE_MIME_TYPES",
    "MAX_IMAGE_BYTES",
    "anthropic_image_blocks",
    "data_url",
    "images_intro",
    "model_accepts_images",
    "openai_image_parts",
    "shown_as_image",
]
