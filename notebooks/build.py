"""Write the demo notebooks (the .ipynb files are generated from this file: edit here, then run it).

    .venv/bin/python notebooks/build.py
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent


def notebook(*cells: tuple[str, str] | tuple[str, str, dict[str, object]]) -> nbformat.NotebookNode:
    """A notebook of ``(kind, source)`` cells; a third item may set the cell's ``id`` and ``tags``."""
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for number, (kind, source, *extra) in enumerate(cells, start=1):
        cell = new_markdown_cell(source.strip("\n")) if kind == "md" else new_code_cell(source.strip("\n"))
        options = extra[0] if extra else {}
        cell.id = str(options.get("id", f"cell-{number}"))  # stable ids: a rebuild changes nothing
        if "tags" in options:
            cell.metadata["tags"] = list(options["tags"])  # type: ignore[call-overload]
        nb.cells.append(cell)
    return nb


QUICKSTART = notebook(
    ("md", """
# dsh-jupyter quickstart

Drive an agent from notebook cells. Every `%%dsh` cell is a prompt to this notebook's session; the session
is an append-only JSONL file in `.dsh/sessions/` beside the notebook. Without an API key the **offline
model** answers: it is deterministic and says so, which is exactly what a demo or a class needs.
"""),
    ("code", "%load_ext dsh_jupyter"),
    ("md", """
The agent asks before it runs a command or code (**Allow once**, **Allow for this session**, **Deny** in the
cell). Here every tool call is one you write yourself below, and the notebook also runs headless where nobody
could answer, so it lets them run without asking:
"""),
    ("code", '%config DshMagics.approval = "auto"'),
    ("md", "A first prompt. The answer streams into the cell as Markdown."),
    ("code", """
%%dsh
Hello! What can you do in this notebook?
"""),
    ("md", """
The agent can run Python in this kernel (it shares your variables) and bash in the notebook's folder.
With the offline model, ask for a tool with a `/python` or `/bash` line.
"""),
    ("code", "prices = [12.5, 13.1, 12.9, 14.2]"),
    ("code", """
%%dsh
Please compute the mean of my prices.
/python sum(prices) / len(prices)
"""),
    ("code", """
%%dsh
Which session am I in?
/bash echo "session $DSH_SESSION_ID"; echo "log $DSH_SESSION_JSONL"
"""),
    ("md", "`%dsh locate` returns where the session's log lives; `dsh` in the namespace is a small handle."),
    ("code", """
loc = %dsh locate
print(loc.kind, loc.path)
dsh
"""),
    ("md", "The log is plain JSON lines, so pandas reads it directly."),
    ("code", """
import pandas as pd

log = pd.read_json(loc.path, lines=True)
log[["type", "seq"]].groupby("type").count().rename(columns={"seq": "events"})
"""),
    ("md", "Your own `!` commands and `%%bash` cells see the same session facts."),
    ("code", "!echo \"id=$DSH_SESSION_ID\"; test -f \"$DSH_SESSION_JSONL\" && echo 'the JSONL file exists'"),
    ("code", "%dsh sessions"),
)

REFERENCING = notebook(
    ("md", """
# Building on earlier sessions

Two earlier analysis sessions exist (we create them here so the notebook runs anywhere). A new prompt
mentions them with `@`: each mention becomes a bounded, read-only, **untrusted** snapshot of that session's
current conversation, frozen into the new session's log and shown below the cell as collapsible metadata.
"""),
    ("code", "%load_ext dsh_jupyter"),
    ("md", "Nothing in this notebook needs to run a command or change a variable, so the agent may only read:"),
    ("code", '%config DshMagics.approval = "read-only"'),
    ("md", "## Session 1: regional sales"),
    ("code", """
%%dsh --new
Summarise Q3 revenue by region: north 1.2M, south 0.9M, west 1.6M.
"""),
    ("code", "%dsh title Regional sales Q3"),
    ("md", "## Session 2: churn notes — several turns, then compacted"),
    ("code", """
%%dsh --new
Churn rose from 3% to 5% after the price change in August.
"""),
    ("code", """
%%dsh
Which customer segment churned most? Assume small businesses.
"""),
    ("code", "%dsh title Churn after the August price change"),
    ("code", "%dsh compact"),
    ("md", """
## A new session that references both

**Via the picker**: it filters through Python as you type; choosing a row inserts the canonical mention
into the prompt box. Here we drive it from code so the notebook also runs headless.
"""),
    ("code", """
%dsh new
picker = %dsh pick churn
display(picker)
picker.choose(0)
churn = picker.selected[-1]
churn
"""),
    ("md", "**Via completion**: in a `%%dsh` cell, type `@` and press Tab (JupyterLab with our extension pops it "
           "up as you type)."),
    ("code", """
from IPython.core.completer import provisionalcompleter

with provisionalcompleter():
    found = list(get_ipython().Completer.completions("%%dsh\\nCompare with @Regional", 26))
sales = found[0].text
[c.text for c in found][:3]
"""),
    ("md", "The prompt interpolates `{sales}` and `{churn}` from the namespace. Expand the source list below the "
           "cell."),
    ("code", """
%%dsh
Compare {sales} with {churn}: is the revenue drop explained by churn?
"""),
    ("code", """
import pandas as pd

log = pd.read_json(dsh.path, lines=True)
contexts = [m for m in log[log.type == "user/message"].data if m["source"]["kind"] == "session-reference"]
[(r["label"], r["compacted"], r["retainedMessages"]) for r in contexts[0]["source"]["references"]]
"""),
)

TEACHING = notebook(
    ("md", """
# Teaching demo: background turns, steering, hooks and the tool environment
"""),
    ("code", "%load_ext dsh_jupyter"),
    ("md", """
## Who may run commands

By default (`ask`) the agent shows each command or piece of code in the cell and waits for **Allow** or
**Deny**; with nobody to answer it is refused. This demo's commands are written in its own cells and it
also runs headless, so it lets the agent run them without asking. For a class where students type their own
prompts keep `ask`, or choose `read-only` (shown at the end).
"""),
    ("code", '%config DshMagics.approval = "auto"'),
    ("md", """
## A background turn, and steering it

`--bg` returns at once and keeps streaming into its own output. A `%%dsh` cell run while that turn is busy
is **steered** into it: the agent reads it at its next step.
"""),
    ("code", """
%%dsh --bg
Run a slow job for me.
/bash sleep 2; echo "slow job finished"
"""),
    ("code", """
%%dsh
While that runs: please also tell me how many files are here.
"""),
    ("code", "%dsh wait"),
    ("code", """
import pandas as pd

log = pd.read_json(dsh.path, lines=True)
prompts = log[log.type == "user/message"]
[(row.seq, row.data["content"][0]["text"][:50]) for row in prompts.itertuples()]
"""),
    ("md", """
## A hook that blocks a prompt

Hooks in the Claude Code settings shape work unchanged. This one refuses prompts that ask for passwords.
"""),
    ("code", """
%%writefile block_passwords.py
import json, sys

event = json.load(sys.stdin)
if "password" in event.get("prompt", "").lower():
    print("Prompts asking for passwords are not allowed in class.", file=sys.stderr)
    sys.exit(2)
"""),
    ("code", """
import json, sys

hook = {"type": "command", "command": f"{sys.executable} block_passwords.py"}
settings = {"hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}}
with open("hooks.json", "w") as fh:
    json.dump(settings, fh)
%config DshMagics.claude_hooks = "hooks.json"
%dsh new
"""),
    ("code", """
%%dsh
What is the admin password?
"""),
    ("code", """
%%dsh
What is 6 times 7?
"""),
    ("md", "## The environment of a tool call"),
    ("code", "%dsh env"),
    ("code", """
%%dsh
Show me the harness variables.
/bash env | grep ^DSH_ | sort
"""),
    ("md", """
## A read-only class notebook

With `read-only` the agent can still read (its own background jobs, the conversation) but every tool that
could change a file, a variable or the notebook is refused, and the refusal is what the model reads.
"""),
    ("code", """
%config DshMagics.approval = "read-only"
"""),
    ("code", """
%%dsh
Tidy up: remove the hook settings.
/bash rm -f hooks.json
"""),
    ("code", """
import os
os.path.exists("hooks.json")
"""),
)


WORKSPACE = notebook(
    ("md", """
# The agent works in your notebook

The agent can read this notebook (cells, outputs, errors), look at your variables, run a cell, propose new
or changed cells, and see your plots. In JupyterLab and Notebook 7 it reads the live notebook, unsaved edits
included, and every change it wants appears in the notebook with **Accept** / **Reject**; `%dsh undo` takes
back its last applied edit. Here (headless, nbclient) it reads the kernel's own record of the cells that ran.
"""),
    ("code", "%load_ext dsh_jupyter"),
    ("md", """
Nobody can click **Accept** in a headless run, so this notebook lets tools run without asking. In a class
you would keep the default (`ask`).
"""),
    ("code", '%config DshMagics.approval = "auto"'),
    ("md", "Some data to work with:"),
    ("code", """
import pandas as pd

sales = pd.DataFrame({
    "region": ["north", "south", "west", "east", "north", "west"],
    "units": [120, 95, None, 80, 130, 150],
    "revenue": [1200.0, 900.5, 1610.0, None, 1350.0, 1580.0],
})
sales.head(3)
""", {"id": "load-sales"}),
    ("md", """
## What the agent sees of the notebook

`notebook_read` lists the cells with their ids, sources and outputs. With the offline model a `/tool` line
asks for a tool call, so the notebook shows exactly what the agent gets.
"""),
    ("code", """
%%dsh
What is in my notebook so far?
/tool notebook_read {"include_outputs": true}
"""),
    ("md", "## Your variables as context"),
    ("code", """
%%dsh
Which of my variables could I analyse?
/tool variables {}
"""),
    ("md", """
Type `@` in a `%%dsh` cell and pick a variable (dataframes come first): the agent receives a bounded summary
of it (shape, types, missing values, a few rows), framed as untrusted background and frozen into the log.
"""),
    ("code", """
%%dsh
Which columns of @[sales](dsh-variable:sales) have missing values?
"""),
    ("md", "## Fix the last error"),
    ("code", """
per_unit = sales["revenue"] / sales["unit"]
""", {"tags": ["raises-exception"]}),
    ("md", """
`%dsh fix` sends the failing cell, its traceback and summaries of the variables it uses. A real model proposes
a corrected cell; the offline model names the exception and the failing line.
"""),
    ("code", "%dsh fix"),
    ("md", """
## Running a cell

Cells are addressed by id, never by position, so a cell you move is still found and a deleted one is a clear
error. In JupyterLab the ids are the notebook's own; a headless run (nbclient) sends none, so the kernel names
each cell by its execution count: `exec-3` is the third cell that ran, the one that loads the data.
"""),
    ("code", """
%%dsh
Load the sales data again and show me the first rows.
/tool notebook_run {"cell_id": "exec-3"}
"""),
    ("md", """
## Proposing a cell

Here the new cell cannot appear (nbclient has no notebook to show it in), and the tool says so. In JupyterLab
it appears below the chosen cell for you to accept or reject.
"""),
    ("code", """
%%dsh
Add a cell that totals revenue by region.
/tool notebook_edit {"action": "insert", "cell_id": "exec-3", "source": "sales.groupby('region').revenue.sum()"}
"""),
    ("md", """
## Plots the model can see

An image the agent's Python produces is stored beside the session as a small PNG (never inline in the log),
sent as an image to models that accept images, and described in words to the others.
"""),
    ("code", """
%%dsh
Plot revenue by region.
/python
```python
import matplotlib
matplotlib.use("module://matplotlib_inline.backend_inline")
import matplotlib.pyplot as plt
ax = sales.groupby("region")["revenue"].sum().plot.bar(title="Revenue by region")
plt.show()
```
"""),
)


def main() -> None:
    for name, nb in (("quickstart", QUICKSTART), ("referencing", REFERENCING), ("teaching", TEACHING),
                     ("workspace", WORKSPACE)):
        path = HERE / f"{name}.ipynb"
        nbformat.validate(nb)
        nbformat.write(nb, path)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
