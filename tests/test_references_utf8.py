"""UTF-8 counting as JavaScript does it, sizes measured on bytes, and cuts of texts known by their ends."""

from __future__ import annotations

import random

import pytest

from dsh_jupyter.references.framing import tag_safe_string_size
from dsh_jupyter.references.retention import cut_ends, truncate_with_notice
from dsh_jupyter.references.utf8 import head_end, js_utf8, tag_safe_size_of_utf8, tail_start

_ALPHABET = [chr(c) for c in range(0x00, 0x80)] + ["\x7f", "é", "界", "😀", "\u2028", "\ufffd"]


def test_sizes_measured_on_bytes_equal_the_escaped_json_sizes() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 40)))
        assert tag_safe_size_of_utf8(text.encode()) == tag_safe_string_size(text), repr(text)


def test_boundaries_look_only_near_the_cut() -> None:
    data = "a界😀b".encode()
    assert [head_end(data, end) for end in range(len(data) + 1)] == [0, 1, 1, 1, 4, 4, 4, 4, 8, 9]
    assert [tail_start(data, start) for start in range(len(data) + 1)] == [0, 1, 4, 4, 4, 8, 8, 8, 8, 9]
    assert head_end(data[:6], 6) == 4  # a prefix of the text is enough


@pytest.mark.parametrize("seed", range(30))
def test_a_cut_from_the_ends_equals_the_cut_of_the_whole_text(seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(200, 2000)))
    data = js_utf8(text)
    max_bytes = rng.randint(0, len(data) - 1)
    keep = max_bytes // 2 + 8
    assert cut_ends(data[:keep], data[-keep:], len(data), max_bytes) == truncate_with_notice(text, max_bytes)
