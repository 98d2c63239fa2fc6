"""Display escaping cost with the hidden-character marks, beside the controls-only rule, and grant checks.

Run from the repository root::

    .venv/bin/python benchmarks/bench_escape.py

Every text a person reads goes through :func:`~dsh_jupyter.escape.escape_text` (transcripts,
``dsh-jupyter sessions show``, tool lines), so marking hidden characters must stay cheap. Goals: at most
1.5x the old controls-only rule (measured here in the same run) on ASCII text (it takes a fast path); at
least 25 MB/s on prose in other scripts (one scan with a character class that includes astral code
points, which Python's regex engine cannot test by bitmap: about 1.5-3.5x the old rule); a 13 MB
conversation in under 0.5 s; text dense with joiners (each one's neighbours are checked: Persian words,
emoji families) at most 250 µs per KB. A grant check (``command_shape``: bashlex and shlex) runs once per
bash call that a grant might cover: under 2 ms for a typical command.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._timing import best, row  # noqa: E402
from dsh_jupyter.agent.grants import command_shape  # noqa: E402
from dsh_jupyter.escape import escape_text  # noqa: E402

RATIO_GOAL = 1.5
PROSE_GOAL_MBS = 25.0
BIG_GOAL_S = 0.5
GRANT_GOAL_MS = 2.0
JOINER_GOAL_US = 250.0
_OLD_BODY = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _old_escape_text(text: str) -> str:
    """The rule before hidden characters were marked (controls only), as the baseline."""
    return _OLD_BODY.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text.replace("\r\n", "\n"))


def main() -> int:
    missed = 0
    english = ("The quarterly numbers look fine; the merge dropped 12 rows with missing ids.\n" * 80)
    prose = ("Le résumé du trimestre: 源会话的数据 sont complètes, 12 lignes sans identifiant. 🙂\n" * 80)
    joiners = ("می\u200cخواهم 👨\u200d👩\u200d👧 ok.\n" * 160)
    old = best(lambda: _old_escape_text(english), 500)
    new = best(lambda: escape_text(english), 500)
    ok = new / old <= RATIO_GOAL
    missed += not ok
    row("escape_text, ordinary text (6 KB, ASCII)", f"{new * 1e6:.0f} µs", f"<= {RATIO_GOAL:g}x baseline",
        f"{new / old:.1f}x of {old * 1e6:.0f} µs {'ok' if ok else 'MISSED'}")
    old = best(lambda: _old_escape_text(prose), 500)
    new = best(lambda: escape_text(prose), 500)
    rate = len(prose.encode()) / new / 1e6
    ok = rate >= PROSE_GOAL_MBS
    missed += not ok
    row("escape_text, French/Chinese prose with emoji (8 KB)", f"{rate:.0f} MB/s", f">= {PROSE_GOAL_MBS:g} MB/s",
        f"{new / old:.1f}x of {old * 1e6:.0f} µs {'ok' if ok else 'MISSED'}")
    took = best(lambda: escape_text(joiners), 200)
    per_kb = took / (len(joiners.encode()) / 1024)
    ok = per_kb * 1e6 <= JOINER_GOAL_US
    missed += not ok
    row("escape_text, joiner-dense Persian and emoji", f"{per_kb * 1e6:.0f} µs/KB", f"<= {JOINER_GOAL_US:g} µs/KB",
         f"baseline {best(lambda: _old_escape_text(joiners), 200) / (len(joiners.encode()) / 1024) * 1e6:.0f} µs/KB "
         + ("ok" if ok else "MISSED"))
    big = english * 2100  # about 13 MB
    old = best(lambda: _old_escape_text(big), 1, repeat=3)
    new = best(lambda: escape_text(big), 1, repeat=3)
    ok = new <= BIG_GOAL_S
    missed += not ok
    row(f"escape_text, {len(big) / 1e6:.0f} MB conversation", f"{new:.3f} s", f"<= {BIG_GOAL_S} s",
         f"baseline {old:.3f} s {'ok' if ok else 'MISSED'}")
    for command in ("git log --oneline -3", "git commit -m 'fix: a; b' && git push origin main"):
        took = best(lambda command=command: command_shape(command), 200)
        ok = took * 1e3 <= GRANT_GOAL_MS
        missed += not ok
        row(f"grant check: {command[:40]}", f"{took * 1e6:.0f} µs", f"<= {GRANT_GOAL_MS:g} ms",
             "ok" if ok else "MISSED")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
