"""Secret masking cost: per log line, per tool result, on one very long line, and streamed to a file.

Run from the repository root::

    .venv/bin/python benchmarks/bench_secrets.py

Every log line is checked for secrets before it is written (``mask_encoded``: search the encoded bytes,
re-encode only on a hit), so its cost adds to every append; the goal keeps the store's append goal
(50,000 events/s, about 3 µs per event without masking) within reach: at most 10 µs added per
typical event with a handful of secrets set.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._summary import goal  # noqa: E402
from benchmarks._timing import best, row  # noqa: E402
from dsh_jupyter._json import dumpb  # noqa: E402
from dsh_jupyter.secrets import SecretMasker  # noqa: E402

NAME = "bench_secrets"
LINE_GOAL_US = 10.0
TOOL_GOAL_MS = 1.0
LONG_LINE_GOAL_S = 1.0
#: A tool's full output file is masked as it streams: at least this many MB/s (a command rarely prints faster).
STREAM_GOAL_MB_S = 100.0


def _env(count: int) -> dict[str, str]:
    env = {f"SERVICE_{i}_TOKEN": f"tok-{i:04d}-abcdefghijklmnop" for i in range(max(0, count - 1))}
    if count:
        env["DATABASE_URL"] = "postgres://admin:s3cret-pw@db/x"
    env.update({"HOME": "/home/someone", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    return env


def _process_masker(count: int) -> SecretMasker:
    """A masker over ``os.environ`` (the real, cheap change check) holding ``count`` bench secrets."""
    for name in [n for n in os.environ if n.startswith("SERVICE_") or n == "DATABASE_URL"]:
        del os.environ[name]
    os.environ.update(_env(count))
    return SecretMasker()


def main() -> int:
    event = {"type": "assistant/message", "seq": 12, "ts": 1_700_000_000_000,
             "data": {"turn": 3, "step": 1, "message": {"role": "assistant", "id": "m1",
                      "content": [{"type": "text", "text": "hello world " * 20}],
                      "source": {"kind": "model", "provider": "offline", "model": "offline"}}}}
    missed = 0
    print("per log line (a 400-byte assistant message), best of 5")
    plain = best(lambda: dumpb(event), 20_000)
    row("baseline: encode only", f"{plain * 1e6:.2f} µs")
    for count in (0, 4, 20):
        masker = _process_masker(count)
        cost = best(lambda m=masker: m.mask_encoded(event, dumpb), 20_000) - plain  # type: ignore[misc]
        if count > 4:
            row(f"masking added, {count} secrets set", f"{cost * 1e6:.2f} µs", "(no goal)")
            continue
        missed += not goal(NAME, f"masking added per log line, {count} secrets set", f"{cost * 1e6:.2f} µs",
                           f"<= {LINE_GOAL_US:g} µs", f"encode only {plain * 1e6:.2f} µs", cost * 1e6 <= LINE_GOAL_US)

    print("per tool result (20 KB of `env`-like output, 4 secrets, one of them present)")
    masker = SecretMasker(_env(4))
    output = ("NAME=value-" + "x" * 30 + "\n") * 450 + "SERVICE_1_TOKEN=tok-0001-abcdefghijklmnop\n"
    cost = best(lambda: masker.mask_text(output), 500)
    missed += not goal(NAME, "mask_text of a 20 KB tool result", f"{cost * 1e3:.3f} ms", f"<= {TOOL_GOAL_MS:g} ms",
                       "-", cost * 1e3 <= TOOL_GOAL_MS)

    print("one 50 MB line with URLs in it (4 secrets)")
    long_text = ("see https://example.com/docs and " + "a" * 1000 + " ") * 48_000
    long_event = {"type": "user/message", "data": {"text": long_text}}
    cost = best(lambda: masker.mask_encoded(long_event, dumpb), 1, repeat=2)
    missed += not goal(NAME, "mask_encoded of a 50 MB line, nothing to mask", f"{cost:.3f} s",
                       f"<= {LONG_LINE_GOAL_S:g} s", "-", cost <= LONG_LINE_GOAL_S)
    dirty = {"type": "user/message", "data": {"text": long_text + " postgres://admin:s3cret-pw@db/x"}}
    cost = best(lambda: masker.mask_encoded(dirty, dumpb), 1, repeat=2)
    row("mask_encoded, one secret at the end", f"{cost:.3f} s", "(no goal)")
    missed += _stream_section()
    return 1 if missed else 0


def _stream_section() -> int:
    """A command's output streamed to its full-output file in 64 KiB reads: plain writes against the masked file."""
    import tempfile

    from dsh_jupyter.tools.output import OutputFile

    _process_masker(4)
    line = b"2026-12-01 12:00:00 INFO worker 17 handled request /api/items?page=3 in 12 ms\n"
    lines = line * (64 * 1024 // len(line))
    chunks = [lines] * 800 + [b"x" * 65_536] * 400  # 50 MB of log lines, then 25 MB of one unbroken line
    total = sum(len(c) for c in chunks) / 1e6
    print(f"a tool's full output file: {total:.0f} MB in 64 KiB reads, 4 secrets set, best of 3")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "out.txt"

        def plain() -> None:
            with open(path, "wb") as fh:
                for chunk in chunks:
                    fh.write(chunk)

        def masked() -> None:
            out = OutputFile(path)
            for chunk in chunks:
                out.write(chunk)
            out.close()

        base = best(plain, 1, repeat=3)
        cost = best(masked, 1, repeat=3)
    rate = total / cost
    ok = goal(NAME, "masked OutputFile, streamed", f"{rate:.0f} MB/s", f">= {STREAM_GOAL_MB_S:g} MB/s",
              f"plain file writes {total / base:.0f} MB/s ({cost / base:.1f}x)", rate >= STREAM_GOAL_MB_S)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
