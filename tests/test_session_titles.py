"""Titles that tell sessions apart: made from the request's prose, unique within a folder, stable once made."""

from __future__ import annotations

from pathlib import Path

from agent_helpers import ScriptedModel, say

from dsh_jupyter.agent import Agent, AgentConfig
from dsh_jupyter.agent import events as ev
from dsh_jupyter.models.offline import OfflineModel
from dsh_jupyter.session.titles import cut_at_word, request_title, unique_title
from dsh_jupyter.store import JsonlStore


def test_a_short_first_sentence_is_the_whole_title() -> None:
    assert request_title("What is in my notebook so far? Then list the frames.") == "What is in my notebook so far"


def test_command_lines_are_left_out() -> None:
    assert request_title("Show the date.\n/bash date") == "Show the date"
    assert request_title("!ls -la\nWhat changed in the data folder\n%timeit f()") == "What changed in the data folder"
    assert request_title("Run this:\n```python\nprint(1)\n```\n/python print(2)") == "Run this"


def test_mention_markup_reads_as_its_label() -> None:
    title = request_title("@[List files](dsh-session:IjU0YWIi) what was in the folder")
    assert title == "List files what was in the folder"
    assert "dsh-session" not in title and "@[" not in title


def test_a_request_of_commands_only_is_titled_by_its_command() -> None:
    assert request_title("/bash ls -l") == "Ls -l"
    assert request_title("!pip list") == "Pip list"


def test_a_long_request_is_cut_at_a_word_boundary() -> None:
    prompt = "Please compare the quarterly revenue figures across every region and explain the outliers in detail"
    title = request_title(prompt)
    assert title.endswith("…") and len(title) <= 60
    assert prompt.startswith(title[:-1])  # whole words only
    assert prompt[len(title) - 1] == " "
    assert cut_at_word("abcdefghij", 5) == "abcd…"  # one long word: cut inside it rather than show nothing


def test_a_title_another_session_of_the_folder_has_gets_the_notebook_name() -> None:
    assert unique_title("Load the data", "work/b.ipynb", ["Other"]) == "Load the data"
    assert unique_title("Load the data", "work/b.ipynb", ["load the data"]) == "Load the data — b.ipynb"
    taken = ["Load the data", "Load the data — b.ipynb"]
    assert unique_title("Load the data", "work/b.ipynb", taken) == "Load the data — b.ipynb (2)"
    assert unique_title("Load the data", None, ["Load the data"]) == "Load the data (2)"


async def test_five_notebooks_in_one_folder_get_five_titles(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    titles = []
    for name in ["a", "b", "c", "d", "e"]:
        agent = Agent.create(store, OfflineModel(), cwd=str(tmp_path),
                             config=AgentConfig(notebook=f"{name}.ipynb"))
        await agent.send("What is in my notebook so far?")
        titles.append(agent.title())
    assert titles[0] == "What is in my notebook so far"
    assert titles[1] == "What is in my notebook so far — b.ipynb"
    assert len(set(titles)) == 5
    other = Agent.create(store, OfflineModel(), cwd=str(tmp_path / "elsewhere"), config=AgentConfig(notebook="a.ipynb"))
    await other.send("What is in my notebook so far?")
    assert other.title() == "What is in my notebook so far"  # another folder: no clash


async def test_the_title_is_final_when_the_first_turn_ends(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    model = ScriptedModel(say("one"), say("two"))
    agent = Agent.create(store, model, cwd=str(tmp_path))
    seen: list[tuple[str, str | None]] = []
    agent.subscribe(lambda e: seen.append(("end", agent.title())) if isinstance(e, ev.TurnEnded) else None)
    await agent.send("Load the sales data and describe it")
    await agent.send("And now the costs")
    assert seen[0] == seen[1] == ("end", "Scripted title")


async def test_the_offline_model_writes_one_title_only(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "sessions")
    agent = Agent.create(store, OfflineModel(), cwd=str(tmp_path))
    await agent.send("Show the date.\n/bash date")
    titles = [e.data["title"] for e in agent.session.events if e.type == "session/title"]
    assert titles == ["Show the date"]


def test_candidates_and_the_cli_line_name_the_notebook(tmp_path: Path) -> None:
    from dsh_jupyter.catalog import Catalog
    from dsh_jupyter.cli.sessions import entry_line
    from dsh_jupyter.session import SessionHeader, SessionLog

    store = JsonlStore(tmp_path / "sessions")
    header = SessionHeader.new(tmp_path)
    writer = store.create(header)
    log = SessionLog(header)
    writer.attach(log)
    log.append("session/title", {"title": "Load the data", "messageSeqs": [], "source": {"kind": "fallback"}})
    writer.flush()
    catalog = Catalog(tmp_path / "catalog.sqlite", background=False)
    catalog.register_session(store.root, header.id, notebook="reports/q3.ipynb")
    found = catalog.candidates(None, str(tmp_path))
    assert [e.notebook for e in found] == ["reports/q3.ipynb"]
    assert "Load the data  (q3.ipynb)  [" in entry_line(found[0])
