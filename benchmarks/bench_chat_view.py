"""The chat widget's view on a long transcript: what one streaming update costs in the browser's script.

Run from the repository root (needs node and the built views, ``jlpm build`` in labextension/)::

    .venv/bin/python benchmarks/bench_chat_view.py

A streaming turn sends the chat view its whole ``items`` list up to 20 times a second. This draws a
transcript of 40 prompts and 40 finished tool calls with 10 kB of output each, plus a reasoning item that
grows, through the bundled view (``dsh_jupyter/ui/static/chat.js``) under node on the tests' stand-in DOM,
and times one update. The baseline, in the same run: the same transcript where every text changed since
the last update, so each is escaped (``escape.ts``) and written again, which is what every update cost
before the view remembered each item's escaped text. Goal: an update ≤ 5 ms, far under the 50 ms between
two updates.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from notebook_helpers import FAKE_VIEW_RUNTIME, view_bundle  # noqa: E402

from benchmarks._summary import goal  # noqa: E402

GOAL_MS = 5.0
UPDATES = 400

SCRIPT = r"""
const { default: view } = await import("./chat.mjs");
const output = ("Some tool output line with words, numbers 12345 and a path /srv/data/q3.parquet\n").repeat(125);
function transcript(changed) {
  const items = [];
  for (let i = 0; i < 40; i++) {
    items.push({ id: "u" + i, kind: "user", text: "question " + i + changed });
    items.push({ id: "t" + i, kind: "tool", name: "bash", summary: 'command="ls"', arguments: '{"command":"ls"}',
      result: output + changed, done: true, isError: false, status: "ok" });
  }
  return items;
}
function perUpdate(everyTextChanged) {
  const model = new Model({ items: [], busy: true, title: "T", details: [], status: "running", variant: "chat" });
  view.render({ model, el: new Element("div"), experimental: fakeInvoke() });
  const steady = transcript("");
  let fastest = Infinity;
  for (let run = 0; run < 3; run++) {
    const started = performance.now();
    for (let k = 0; k < UPDATES; k++) {
      const items = everyTextChanged ? transcript(" " + run + "." + k) : steady;
      model.set("items", [...items, { id: "r", kind: "reasoning", text: "thinking ".repeat(k), streaming: true }]);
    }
    fastest = Math.min(fastest, (performance.now() - started) / UPDATES);
  }
  return fastest;
}
process.stdout.write(JSON.stringify({ update: perUpdate(false), baseline: perUpdate(true) }));
"""


def main() -> int:
    node = shutil.which("node")
    if node is None:
        print("node is not installed: nothing to measure")
        return 0
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "chat.mjs").write_text(view_bundle("chat").read_text(encoding="utf-8"), encoding="utf-8")
        script = FAKE_VIEW_RUNTIME + f"\nconst UPDATES = {UPDATES};\n" + SCRIPT
        (work / "bench.mjs").write_text(script, encoding="utf-8")
        result = subprocess.run([node, str(work / "bench.mjs")], capture_output=True, text=True, cwd=work,
                                timeout=600, check=False)
    if result.returncode:
        print(result.stderr[-2000:])
        return 1
    figures = json.loads(result.stdout)
    update, baseline = figures["update"], figures["baseline"]
    print(f"a transcript of 81 items (40 tool outputs of 10 kB); best of 3 runs of {UPDATES} updates")
    ok = goal("bench_chat_view", "one streaming update of an 81-item transcript", f"{update:.2f} ms",
              f"<= {GOAL_MS:.0f} ms", f"every text changed {baseline:.2f} ms (ratio {update / baseline:.2f})",
              update <= GOAL_MS)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
