"""The published summary: what ``run_all.py --write`` keeps in ``benchmarks/latest.json`` and shows in the docs.

Each benchmark's figures are kept with the day they were measured; a run replaces the rows of the benchmarks
it ran and keeps the others, so a partial run never drops a table row and never passes off an old figure as
new (every row says its day). From that file two tables are generated, never hand-copied: the full one in
``docs/benchmarks.md`` and a one-line-per-benchmark one in the README, each between its two marker comments.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from benchmarks._summary import Figure

REPO = Path(__file__).resolve().parents[1]
LATEST = REPO / "benchmarks" / "latest.json"
DOCS = REPO / "docs" / "benchmarks.md"
README = REPO / "README.md"
START = "<!-- benchmark summary: written by benchmarks/run_all.py --write -->"
END = "<!-- end of benchmark summary -->"

Saved = dict[str, dict[str, object]]  # benchmark -> {"date": "YYYY-MM-DD", "figures": [Figure as a dict]}


def load(path: Path = LATEST) -> Saved:
    if not path.is_file():
        return {}
    saved: Saved = json.loads(path.read_text(encoding="utf-8"))
    return saved


def merge(saved: Saved, figures: list[Figure], date: str) -> Saved:
    """``saved`` with the benchmarks in ``figures`` replaced by these figures of ``date``."""
    merged = dict(saved)
    for name in dict.fromkeys(f.benchmark for f in figures):
        merged[name] = {"date": date, "figures": [asdict(f) for f in figures if f.benchmark == name]}
    return dict(sorted(merged.items()))


def figures_of(saved: Saved) -> list[tuple[str, Figure]]:
    """Every saved figure with the day it was measured, in benchmark order."""
    rows: list[tuple[str, Figure]] = []
    for entry in saved.values():
        raw = entry["figures"]
        assert isinstance(raw, list)
        rows.extend((str(entry["date"]), Figure(**f)) for f in raw)
    return rows


def row(cells: list[str]) -> str:
    """One Markdown table row."""
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def verdict(f: Figure) -> str:
    """The ok cell: yes or MISSED, with why a goal was argued wrong."""
    return ("yes" if f.ok else "**MISSED**") + (f" ({f.why})" if f.why else "")


def full_table(saved: Saved) -> str:
    """Every figure: benchmark, figure, measured, goal, baseline, ok (with why a goal was argued), day."""
    lines = ["| benchmark | figure | measured | goal | baseline | ok | measured on |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for date, f in figures_of(saved):
        lines.append(row([f.benchmark, f.name, f.figure, f.goal, f.baseline, verdict(f), date]))
    return "\n".join(lines)


def short_table(saved: Saved) -> str:
    """One row a benchmark: how many of its goals were met (a goal argued wrong counts, its reason is in the full
    table), which were missed, and the day."""
    lines = ["| benchmark | goals met | missed | measured on |", "| --- | --- | --- | --- |"]
    for name, entry in saved.items():
        figures = [f for _, f in figures_of({name: entry})]
        missed = [f.name for f in figures if not f.ok]
        met = len(figures) - len(missed)
        lines.append(row([name, f"{met} of {len(figures)}", "; ".join(missed) or "-", str(entry["date"])]))
    return "\n".join(lines)


def write_between(path: Path, text: str) -> None:
    """Replace what stands between the two markers in ``path`` with ``text``."""
    content = path.read_text(encoding="utf-8")
    head, start, rest = content.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{path} has no {START!r} ... {END!r} markers to write the summary between")
    path.write_text(f"{head}{START}\n{text}\n{END}{tail}", encoding="utf-8")


def publish(figures: list[Figure], date: str) -> None:
    """Merge a run's figures into ``latest.json`` and write both tables."""
    saved = merge(load(), figures, date)
    LATEST.write_text(json.dumps(saved, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    write_between(DOCS, full_table(saved))
    write_between(README, short_table(saved))
