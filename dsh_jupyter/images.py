"""Images a tool hands back (plots, figures): bounded for the model, described for models without eyes.

A tool attaches :class:`ToolImage` values as they come (a matplotlib PNG of any
size). :func:`prepare` turns one into a :class:`PreparedImage` of bounded size: the longest side at most
:data:`MAX_SIDE` pixels, at most :data:`MAX_BYTES` bytes; plots as 256-colour PNG (JPEG only when that is
much smaller), photos as JPEG, with no metadata (text chunks, EXIF, colour profile: any of them could hold a
secret, and the artifact is a file in the session folder). Input that could be a decompression bomb (more
than :data:`MAX_PIXELS` pixels or :data:`MAX_INPUT_BYTES` bytes) or that does not decode becomes an
:class:`ImageProblem`, a note for the model, never an exception.

The session log never holds image bytes. It holds an **image block** referring to a session artifact
(:mod:`dsh_jupyter.store.artifacts`)::

    {"type": "image", "artifact": "artifacts/<sha256>.png", "mediaType": "image/png",
     "width": 640, "height": 480, "bytes": 23456, "tool": "python"}

(``artifact`` is missing, and ``unavailable`` says why, when the store had no place for it.) Before a
request the agent loop gives models that accept images (their :class:`~dsh_jupyter.models.base.ModelInfo`
says so) a copy of the block with ``data`` (base64) loaded from the artifact, and every other model the
:func:`describe_image` text instead. Pillow is imported only when an image is prepared.

The artifact store's naming rule is imported with the first image saved: this module is on the
``%load_ext`` path, the store is not.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .session.image_blocks import content_text, image_summary, is_image_block, whole_number

if TYPE_CHECKING:
    from PIL.Image import Image as PillowImage

    from .session.messages import ImageBlock, TextBlock


@dataclass(frozen=True)
class ToolImage:
    """An image a tool hands back (a plot, a figure): mime type, decoded bytes, size in pixels when known.

    Tools attach images as they are; the agent loop stores them as session artifacts (downscaled, never
    inline in the log) and sends them to models that accept images, or describes them to the others.
    """

    mime: str
    data: bytes
    width: int | None = None
    height: int | None = None

#: Longest side, in pixels, of an image sent to a model (plots at 100 dpi fit as they are).
MAX_SIDE = 1024
#: Most bytes of one prepared image.
MAX_BYTES = 400_000
#: Images with more pixels than this are refused before decoding (decompression bombs).
MAX_PIXELS = 40_000_000
#: Encoded images larger than this are refused unread.
MAX_INPUT_BYTES = 32 * 1024 * 1024
#: JPEG is chosen over PNG when it is at most this fraction of the PNG's size.
JPEG_PREFERRED_RATIO = 0.5
JPEG_QUALITY = 85
#: An image with at most this many distinct colours is a graphic (a plot), saved as a palette PNG.
GRAPHIC_COLOURS = 16_384

#: Media types :func:`prepare` decodes (what Jupyter frontends show as bitmaps).
BITMAP_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"})

_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg"}



@dataclass(frozen=True)
class PreparedImage:
    """A bounded image ready to store and send: ``mime`` is ``image/png`` or ``image/jpeg``."""

    mime: str
    data: bytes
    width: int
    height: int
    original_width: int
    original_height: int

    @property
    def digest(self) -> str:
        """The SHA-256 of the bytes: the same picture twice is one artifact."""
        return hashlib.sha256(self.data).hexdigest()

    @property
    def extension(self) -> str:
        return _EXTENSIONS[self.mime]

    @property
    def resized(self) -> bool:
        return (self.width, self.height) != (self.original_width, self.original_height)


@dataclass(frozen=True)
class ImageProblem:
    """Why an image could not be prepared, in the user's terms (the model reads it as a note)."""

    mime: str
    size: int
    reason: str

    def note(self, tool: str | None = None) -> str:
        by = f" from `{tool}`" if tool else ""
        return f"[An image{by} ({self.mime}, {self.size:,} bytes) was not kept: {self.reason}.]"


def prepare(mime: str, data: bytes, *, max_side: int = MAX_SIDE,
            max_bytes: int = MAX_BYTES) -> PreparedImage | ImageProblem:
    """``data`` (an encoded image of type ``mime``) bounded to ``max_side`` pixels and ``max_bytes`` bytes."""
    mime = (mime or "").split(";", 1)[0].strip().lower()
    size = len(data)
    if mime == "image/svg+xml":
        return ImageProblem(mime, size, "SVG images are not sent to models (for plots, "
                                        "`%config InlineBackend.figure_formats = ['png']` draws PNG)")
    if mime not in BITMAP_TYPES:
        return ImageProblem(mime or "unknown type", size, "only PNG, JPEG, GIF, WebP and BMP images are sent to models")
    if size == 0:
        return ImageProblem(mime, size, "it is empty")
    if size > MAX_INPUT_BYTES:
        return ImageProblem(mime, size, f"it is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB")
    try:
        return _prepare(mime, data, max_side, max_bytes)
    except _TooLarge as exc:
        return ImageProblem(mime, size, str(exc))
    except Exception as exc:  # Pillow raises many kinds for damaged input; none may end the turn
        if "DecompressionBomb" in type(exc).__name__:  # Pillow's own guard, from the header alone
            return ImageProblem(mime, size, f"it has too many pixels to decode safely (more than {MAX_PIXELS:,})")
        return ImageProblem(mime, size, f"it could not be decoded ({_first_line(exc)})")


class _TooLarge(Exception):
    pass


_OBJECT_REPR = re.compile(r"\s*<[^<>]* object at 0x[0-9a-f]+>")


def _first_line(exc: BaseException) -> str:
    text = _OBJECT_REPR.sub("", str(exc)).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__


def _prepare(mime: str, data: bytes, max_side: int, max_bytes: int) -> PreparedImage:
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        with Image.open(io.BytesIO(data)) as opened:
            width, height = opened.size  # from the header: nothing is decoded yet
            if width <= 0 or height <= 0:
                raise ValueError("it has no pixels")
            if width * height > MAX_PIXELS:
                raise _TooLarge(f"it has {width}×{height} pixels, more than {MAX_PIXELS:,}")
            if opened.format == "JPEG":
                opened.draft("RGB", (max_side, max_side))  # decode a JPEG at a reduced scale directly
            opened.seek(0)  # the first frame of an animation
            image = opened.convert("RGBA" if _has_alpha(opened) else "RGB")
    image.info.clear()  # only pixels become an artifact: text chunks, EXIF or an ICC profile may hold anything
    if image.mode == "RGBA" and image.getchannel("A").getextrema() == (255, 255):
        image = image.convert("RGB")  # matplotlib's figures: an alpha channel that is opaque everywhere
    side = max_side
    while True:
        scaled = _fit(image, side)
        encoded, kind = _encode(scaled)
        if len(encoded) <= max_bytes or side <= 64:
            if len(encoded) > max_bytes:
                raise _TooLarge(f"even at {scaled.width}×{scaled.height} pixels it takes more than {max_bytes:,} bytes")
            return PreparedImage(kind, encoded, scaled.width, scaled.height, width, height)
        side = max(64, int(max(scaled.size) * 0.7))


def _has_alpha(image: PillowImage) -> bool:
    return image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)


def _fit(image: PillowImage, side: int) -> PillowImage:
    from PIL import Image

    if max(image.size) <= side:
        return image
    ratio = side / max(image.size)
    size = (max(1, round(image.width * ratio)), max(1, round(image.height * ratio)))
    return image.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)


def _encode(image: PillowImage) -> tuple[bytes, str]:
    """PNG for a graphic, JPEG for a photo; transparency is flattened onto white for JPEG.

    A graphic (a plot: at most :data:`GRAPHIC_COLOURS` distinct colours, antialiasing included) is saved as
    a 256-colour PNG, which keeps its lines sharp at a third of the size of a full-colour one, unless JPEG
    is much smaller still. An image of more colours (a photo, a rendering) is saved as JPEG: a full-colour
    PNG of it is always several times larger (and slow to compress)."""
    from PIL import Image

    flat = image
    if image.mode == "RGBA":
        flat = Image.new("RGB", image.size, (255, 255, 255))
        flat.paste(image, mask=image.getchannel("A"))
    jpeg = io.BytesIO()
    flat.save(jpeg, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    if image.getcolors(GRAPHIC_COLOURS) is None and image.mode == "RGB":
        return jpeg.getvalue(), "image/jpeg"
    png = io.BytesIO()
    image.quantize(256, method=Image.Quantize.FASTOCTREE).save(png, format="PNG")
    if jpeg.tell() <= png.tell() * JPEG_PREFERRED_RATIO:
        return jpeg.getvalue(), "image/jpeg"
    return png.getvalue(), "image/png"


# -- the block in the log ---------------------------------------------------------------------------------


def image_block(image: PreparedImage, *, artifact: str | None, tool: str | None = None,
                unavailable: str | None = None) -> ImageBlock:
    """The log's image block for ``image`` (see the module docstring); never the bytes."""
    size = len(image.data)
    block: ImageBlock = (
        {"type": "image", "artifact": artifact, "mediaType": image.mime, "width": image.width,
         "height": image.height, "bytes": size} if artifact is not None else
        {"type": "image", "mediaType": image.mime, "width": image.width, "height": image.height, "bytes": size})
    if image.resized:
        block["originalWidth"], block["originalHeight"] = image.original_width, image.original_height
    if tool:
        block["tool"] = tool
    if unavailable:
        block["unavailable"] = unavailable
    return block


def image_blocks(blocks: Iterable[object]) -> list[Mapping[str, Any]]:
    return [b for b in blocks if is_image_block(b)]  # type: ignore[misc]


#: What one image costs a model, by the providers' published rules: OpenAI's (the image fitted into 2048×2048,
#: then its shorter side to 768, in 512-pixel tiles of 170 tokens each plus 85) and Anthropic's (width × height
#: / 750, the longer side first fitted into 1568). :func:`image_tokens` takes the larger of the two.
_TILE, _TILE_TOKENS, _IMAGE_BASE_TOKENS = 512, 170, 85
_PIXELS_PER_TOKEN = 750
_FIT_SIDE, _SHORT_SIDE, _LONG_SIDE = 2048, 768, 1568


def image_tokens(block: Mapping[str, Any]) -> int:
    """About how many input tokens a model that takes images spends on the image of ``block`` (by its size in
    pixels; a side missing or not a positive whole number counts as :data:`MAX_SIDE`). It errs high: a window estimate
    that counts too little overflows the window."""
    width, height = (max(0, whole_number(block.get(side)) or 0) or MAX_SIDE for side in ("width", "height"))

    def scaled(w: float, h: float, side: float, by_longer: bool) -> tuple[float, float]:
        ratio = side / (max(w, h) if by_longer else min(w, h))
        return (w * ratio, h * ratio) if ratio < 1 else (w, h)

    w, h = scaled(*scaled(width, height, _FIT_SIDE, True), _SHORT_SIDE, False)
    tiles = math.ceil(w / _TILE) * math.ceil(h / _TILE)
    w, h = scaled(width, height, _LONG_SIDE, True)
    return max(_IMAGE_BASE_TOKENS + _TILE_TOKENS * tiles, math.ceil(w * h / _PIXELS_PER_TOKEN))


def describe_image(block: Mapping[str, Any]) -> str:
    """The text a model without image input gets for an image block: type, size, artifact, producer."""
    tool = block.get("tool")
    by = f" from the `{tool}` tool" if isinstance(tool, str) and tool else ""
    text = f"[Image{by}: {image_summary(block)}"
    ow, oh = whole_number(block.get("originalWidth")), whole_number(block.get("originalHeight"))
    if ow and oh:
        text += f" (downscaled from {ow}×{oh})"
    artifact = block.get("artifact")
    if isinstance(artifact, str) and artifact:
        text += f"; saved as session artifact {artifact}"
    elif isinstance(block.get("unavailable"), str):
        text += f"; not saved ({block['unavailable']})"
    return text + ". This model does not take images, so only this description was sent.]"


# -- from tool output to the log, from the log to a request ---------------------------------------------

#: Saves an artifact: ``(name, data)``; raises with the reason when it cannot.
SaveArtifact = Callable[[str, bytes], None]
#: Loads an artifact by name: its bytes, or ``None``.
LoadArtifact = Callable[[str], "bytes | None"]

#: Images sent as images in one request; older ones are described (a long session stays bounded).
MAX_REQUEST_IMAGES = 8


def result_blocks(images: Iterable[ToolImage], save: SaveArtifact | None,
                  tool: str | None) -> list[TextBlock | ImageBlock]:
    """The blocks recording a tool's ``images`` in the log: one image block each (the prepared image saved
    as an artifact through ``save``), or a text note when an image cannot be used. Never raises."""
    from .store.artifacts import artifact_name

    blocks: list[TextBlock | ImageBlock] = []
    for image in images:
        prepared = prepare(image.mime, image.data)
        if isinstance(prepared, ImageProblem):
            blocks.append({"type": "text", "text": prepared.note(tool)})
            continue
        name = artifact_name(prepared.digest, prepared.extension)
        if save is None:
            blocks.append(image_block(prepared, artifact=None, tool=tool,
                                      unavailable="this session has no store to keep it in"))
            continue
        try:
            save(name, prepared.data)
        except Exception as exc:  # a full disk or a refusing database must not end the turn
            blocks.append(image_block(prepared, artifact=None, tool=tool,
                                      unavailable=f"it could not be saved: {_first_line(exc)}"))
            continue
        blocks.append(image_block(prepared, artifact=name, tool=tool))
    return blocks


def request_images(messages: Sequence[dict[str, Any]], *, accepts_images: bool, load: LoadArtifact | None,
                   limit: int = MAX_REQUEST_IMAGES) -> list[dict[str, Any]]:
    """``messages`` as a model should get them: for a model that accepts images the newest ``limit`` image
    blocks carry ``data`` (base64 of the artifact); every other image block becomes its
    :func:`describe_image` text. Messages without images are passed through as they are (never copied or
    changed: they are the log's own dicts)."""
    budget = limit if accepts_images and load is not None else 0
    out: list[dict[str, Any]] = []
    for message in reversed(messages):
        if not _holds_image(message):
            out.append(message)
            continue
        content: list[Any] = []
        for block in reversed(list(message.get("content") or ())):
            if isinstance(block, Mapping) and block.get("type") == "tool-result":
                inner: list[Any] = []
                for item in reversed(list(block.get("content") or ())):
                    if is_image_block(item):
                        data = _load(item, load) if budget > 0 else None
                        if data is not None:
                            budget -= 1
                            inner.append({**item, "data": base64.b64encode(data).decode("ascii")})
                        else:
                            inner.append({"type": "text", "text": describe_image(item)})
                    else:
                        inner.append(item)
                content.append({**block, "content": inner[::-1]})
            elif is_image_block(block):
                content.append({"type": "text", "text": describe_image(block)})
            else:
                content.append(block)
        out.append({**message, "content": content[::-1]})
    return out[::-1]


def message_images(message: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The image blocks of a session message, those inside its tool results included."""
    for block in message.get("content") or ():
        if is_image_block(block):
            yield block
        elif isinstance(block, Mapping) and block.get("type") == "tool-result":
            yield from image_blocks(block.get("content") or ())


def message_artifacts(message: Mapping[str, Any]) -> list[str]:
    """The artifact names a session message's image blocks refer to (what a copy of the session must carry)."""
    return [name for block in message_images(message) if isinstance(name := block.get("artifact"), str)]


def _holds_image(message: Mapping[str, Any]) -> bool:
    return next(message_images(message), None) is not None


def _load(block: Mapping[str, Any], load: LoadArtifact | None) -> bytes | None:
    name = block.get("artifact")
    if load is None or not isinstance(name, str):
        return None
    try:
        return load(name)
    except Exception:  # a bad name in the log, a database that went away: the model gets the description
        return None


__all__ = [
    "MAX_BYTES",
    "MAX_PIXELS",
    "MAX_SIDE",
    "ImageProblem",
    "PreparedImage",
    "content_text",
    "describe_image",
    "image_block",
    "image_blocks",
    "image_summary",
    "is_image_block",
    "prepare",
    "request_images",
    "result_blocks",
]
