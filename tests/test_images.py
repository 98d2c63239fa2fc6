"""Images from tools: bounded preparation, the log's image block, and what each model gets."""

from __future__ import annotations

import base64
import io
import random
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from dsh_jupyter.images import (
    MAX_BYTES,
    MAX_REQUEST_IMAGES,
    MAX_SIDE,
    ImageProblem,
    PreparedImage,
    ToolImage,
    content_text,
    describe_image,
    image_tokens,
    prepare,
    request_images,
    result_blocks,
)


def png(width: int, height: int, *, noise: bool = False, mode: str = "RGB") -> bytes:
    image = Image.new(mode, (width, height), "white")
    if noise:
        rng = random.Random(7)
        image.putdata([tuple(rng.randrange(256) for _ in mode) for _ in range(width * height)])  # type: ignore[misc]
    else:  # a plot-like picture: a few flat colours
        for x in range(0, width, max(1, width // 10)):
            for y in range(height):
                image.putpixel((x, y), (0, 0, 255, 255)[: len(mode)] if mode != "L" else 0)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_a_small_plot_stays_a_png_of_its_own_size() -> None:
    data = png(640, 480)
    prepared = prepare("image/png", data)
    assert isinstance(prepared, PreparedImage)
    assert (prepared.mime, prepared.width, prepared.height, prepared.resized) == ("image/png", 640, 480, False)
    with Image.open(io.BytesIO(prepared.data)) as back:
        assert back.format == "PNG" and back.size == (640, 480)


def test_a_large_image_is_downscaled_to_the_longest_side() -> None:
    prepared = prepare("image/png", png(3000, 1500))
    assert isinstance(prepared, PreparedImage)
    assert max(prepared.width, prepared.height) == MAX_SIDE and prepared.width == 2 * prepared.height
    assert (prepared.original_width, prepared.original_height) == (3000, 1500) and prepared.resized
    assert len(prepared.data) <= MAX_BYTES


def test_a_photo_becomes_a_jpeg_within_the_byte_bound() -> None:
    prepared = prepare("image/png", png(900, 900, noise=True), max_bytes=150_000)
    assert isinstance(prepared, PreparedImage)
    assert prepared.mime == "image/jpeg" and prepared.extension == "jpg"
    assert len(prepared.data) <= 150_000
    with Image.open(io.BytesIO(prepared.data)) as back:
        assert back.format == "JPEG" and back.size == (prepared.width, prepared.height)


def test_transparency_is_kept_in_png_and_flattened_in_jpeg() -> None:
    image = Image.new("RGBA", (200, 100), (0, 0, 0, 0))
    for x in range(50, 150):
        image.putpixel((x, 50), (200, 0, 0, 255))
    out = io.BytesIO()
    image.save(out, format="PNG")
    prepared = prepare("image/png", out.getvalue())
    assert isinstance(prepared, PreparedImage) and prepared.mime == "image/png"
    with Image.open(io.BytesIO(prepared.data)) as back:
        rgba = back.convert("RGBA")
        assert rgba.getpixel((0, 0))[3] == 0 and rgba.getpixel((100, 50)) == (200, 0, 0, 255)


def test_corrupt_empty_and_foreign_input_become_notes() -> None:
    data = png(100, 100)
    for mime, raw, words in [
        ("image/png", b"\x89PNG\r\n\x1a\nnot really", "could not be decoded"),
        ("image/png", data[: len(data) // 2], "could not be decoded"),
        ("image/png", b"", "empty"),
        ("image/svg+xml", b"<svg/>", "InlineBackend.figure_formats = ['png']"),
        ("application/pdf", b"%PDF", "only PNG, JPEG"),
        ("image/jpeg", b"\xff\xd8\xff garbage", "could not be decoded"),
    ]:
        problem = prepare(mime, raw)
        assert isinstance(problem, ImageProblem), mime
        assert words in problem.reason
        assert problem.note("python").startswith(f"[An image from `python` ({mime}, {len(raw):,} bytes) was not kept")


def _bomb_png(width: int, height: int) -> bytes:
    """A valid PNG header claiming ``width`` × ``height`` pixels, with almost no data behind it."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + \
        chunk(b"IEND", b"")


def test_a_decompression_bomb_is_refused_before_decoding() -> None:
    problem = prepare("image/png", _bomb_png(8_000, 8_000))
    assert isinstance(problem, ImageProblem)
    assert problem.reason == "it has 8000×8000 pixels, more than 40,000,000"
    huge = prepare("image/png", _bomb_png(100_000, 100_000))
    assert isinstance(huge, ImageProblem) and huge.reason.startswith("it has too many pixels to decode safely")


def test_an_image_that_cannot_fit_the_byte_bound_is_refused() -> None:
    problem = prepare("image/png", png(300, 300, noise=True), max_bytes=200)
    assert isinstance(problem, ImageProblem) and "more than 200 bytes" in problem.reason


def test_result_blocks_are_content_addressed_and_hold_no_bytes(tmp_path: Path) -> None:
    saved: dict[str, bytes] = {}

    def save(name: str, data: bytes) -> None:
        saved.setdefault(name, data)

    plot = ToolImage("image/png", png(640, 480))
    blocks = result_blocks([plot, plot, ToolImage("image/png", b"broken")], save, "python")
    assert len(saved) == 1  # the same plot twice is one artifact
    first, second, note = blocks
    assert first == second
    name = next(iter(saved))
    assert first == {"type": "image", "artifact": name, "mediaType": "image/png", "width": 640, "height": 480,
                     "bytes": len(saved[name]), "tool": "python"}
    assert name.startswith("artifacts/") and name.endswith(".png") and len(name) == len("artifacts/") + 64 + 4
    assert note["type"] == "text" and "was not kept" in note["text"]


def test_an_artifact_that_cannot_be_saved_is_described_with_why() -> None:
    def refuse(name: str, data: bytes) -> None:
        raise OSError("No space left on device")

    block, = result_blocks([ToolImage("image/png", png(64, 32))], refuse, "python")
    assert "artifact" not in block and block["unavailable"].endswith("No space left on device")
    assert "not saved (it could not be saved: No space left on device)" in describe_image(block)
    nowhere, = result_blocks([ToolImage("image/png", png(64, 32))], None, "python")
    assert nowhere["unavailable"] == "this session has no store to keep it in"


def _tool_result(call_id: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool-result", "toolCallId": call_id, "content": blocks,
                                         "isError": False}]}


def test_requests_load_images_for_models_that_take_them_and_describe_them_to_the_others() -> None:
    data = png(64, 32)
    store = {"artifacts/" + "a" * 64 + ".png": data}
    block = {"type": "image", "artifact": "artifacts/" + "a" * 64 + ".png", "mediaType": "image/png",
             "width": 64, "height": 32, "bytes": len(data), "tool": "python"}
    prompt = {"role": "user", "content": [{"type": "text", "text": "plot it"}]}
    messages = [prompt, _tool_result("c1", [{"type": "text", "text": "done"}, block])]
    seeing = request_images(messages, accepts_images=True, load=store.get)
    assert seeing[0] is prompt  # untouched messages are passed through
    sent = seeing[1]["content"][0]["content"]
    assert base64.b64decode(sent[1]["data"]) == data and sent[1]["artifact"] == block["artifact"]
    assert "data" not in block  # the log's own dict is never changed
    blind = request_images(messages, accepts_images=False, load=store.get)
    text = blind[1]["content"][0]["content"][1]
    assert text == {"type": "text", "text": describe_image(block)}
    assert "PNG image, 64×32 pixels" in text["text"] and "from the `python` tool" in text["text"]
    assert "artifacts/aaaa" in text["text"]
    missing = request_images([_tool_result("c2", [{**block, "artifact": "artifacts/" + "b" * 64 + ".png"}])],
                             accepts_images=True, load=store.get)
    assert missing[0]["content"][0]["content"][0]["type"] == "text"  # a lost artifact: described


def test_only_the_newest_images_of_a_request_are_sent() -> None:
    data = png(16, 16)
    block = {"type": "image", "artifact": "artifacts/" + "c" * 64 + ".png", "mediaType": "image/png",
             "width": 16, "height": 16, "bytes": len(data)}
    messages = [_tool_result(f"c{i}", [block]) for i in range(MAX_REQUEST_IMAGES + 3)]
    out = request_images(messages, accepts_images=True, load=lambda name: data)
    kinds = [m["content"][0]["content"][0]["type"] for m in out]
    assert kinds == ["text"] * 3 + ["image"] * MAX_REQUEST_IMAGES


@pytest.mark.parametrize(("width", "height", "tokens"), [
    (100, 100, 85 + 170),  # one tile (OpenAI's rule is the larger one for a small image)
    (3000, 100, 85 + 170 * 4),  # fitted into 2048 wide: four tiles in a row
    (1024, 683, 933),  # a plot as it is sent: 1024 × 683 / 750 (Anthropic's rule) beats 4 tiles (765)
    (1000, 1000, 1334),  # Anthropic's published example: about 1,334 tokens
    (4000, 3000, 2459),  # the longer side fitted into 1568 first (OpenAI: 2048, then 768, 4 tiles)
])
def test_an_image_costs_what_the_dearer_provider_rule_says(width: int, height: int, tokens: int) -> None:
    assert image_tokens({"type": "image", "width": width, "height": height}) == tokens


def test_an_image_of_unknown_size_counts_as_the_largest_sent() -> None:
    largest = image_tokens({"width": MAX_SIDE, "height": MAX_SIDE})
    assert image_tokens({"type": "image"}) == image_tokens({"width": "wide", "height": -3}) == largest


def test_content_text_mentions_images() -> None:
    block = {"type": "image", "artifact": "artifacts/x.png", "mediaType": "image/jpeg", "width": 10, "height": 5,
             "bytes": 99}
    assert content_text([{"type": "text", "text": "hi"}, block]) == \
        "hi\n[image: JPEG image, 10×5 pixels, 99 bytes (artifacts/x.png)]"


@pytest.mark.parametrize("mime", ["image/gif", "image/webp", "image/bmp", "image/jpeg"])
def test_other_bitmap_types_are_converted(mime: str) -> None:
    out = io.BytesIO()
    Image.new("RGB", (50, 40), "red").save(out, format=mime.split("/")[1].upper().replace("JPG", "JPEG"))
    prepared = prepare(mime, out.getvalue())
    assert isinstance(prepared, PreparedImage) and (prepared.width, prepared.height) == (50, 40)
    assert prepared.mime in ("image/png", "image/jpeg")


def test_oversized_input_and_animations() -> None:
    huge = prepare("image/png", b"\0" * (32 * 1024 * 1024 + 1))
    assert isinstance(huge, ImageProblem) and huge.reason == "it is larger than 32 MiB"
    frames = [Image.new("RGB", (40, 30), colour) for colour in ("red", "green", "blue")]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:])
    first = prepare("image/gif", out.getvalue())
    assert isinstance(first, PreparedImage) and (first.width, first.height) == (40, 30)
    with Image.open(io.BytesIO(first.data)) as back:
        red, green, blue = back.convert("RGB").getpixel((5, 5))
        assert red > 200 and green < 60 and blue < 60  # the first frame
