"""The cell renderer: Markdown and plain text from transcript items, and where a turn's updates go."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from kernel_helpers import KernelRunner
from notebook_helpers import block_markup

from dsh_jupyter.agent.events import (
    AgentEvent,
    AssistantMessage,
    Notice,
    ReasoningDelta,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from dsh_jupyter.conversation.items import Answer, Item, Reasoning, ToolCall, TurnEnd
from dsh_jupyter.ui.display import REFERENCE_CONTEXT_MIME
from dsh_jupyter.ui.render import TranscriptMarkdown, TurnView


class FakeHandle:
    def __init__(self, shown: Any) -> None:
        self.versions = [shown]

    def update(self, obj: Any) -> None:
        self.versions.append(obj)

    @property
    def markdown(self) -> str:
        """What the output shows, its inert blocks unwrapped and joined by blank lines."""
        return unwrap(str(self.versions[-1].html()))


_INNER_BLOCK = re.compile(r'<div class="dsh-markdown tex2jax_ignore mathjax_ignore" style="white-space:normal">')


def unwrap(html: str) -> str:
    """The markup of each top-level inert block of a turn's HTML, joined by blank lines (the one-block
    entities decoded; a notice's inner Markdown block shown as ``<md>``)."""
    assert html == "" or (html.startswith('<div class="dsh-turn">') and html.endswith("</div>")), html
    inner = html[len('<div class="dsh-turn">'):-len("</div>")] if html else ""
    blocks, depth, start = [], 0, 0
    for tag in re.finditer(r"<div\b[^>]*>|</div>", inner):
        if tag.group().startswith("</"):
            depth -= 1
            if depth == 0:
                blocks.append(block_markup(inner[start:tag.end()]))
        else:
            if depth == 0:
                start = tag.start()
            depth += 1
    return "\n\n".join(_INNER_BLOCK.sub("<md>", b).replace("</div>", "</md>") for b in blocks)


@pytest.fixture
def handles(monkeypatch: pytest.MonkeyPatch) -> list[FakeHandle]:
    import IPython.display

    made: list[FakeHandle] = []

    def display(obj: Any, display_id: bool = False) -> FakeHandle:
        assert display_id is True
        made.append(FakeHandle(obj))
        return made[-1]

    monkeypatch.setattr(IPython.display, "display", display)
    return made


def feed(view: TurnView, events: list[AgentEvent]) -> None:
    for event in events:
        view(event)


def tool(call_id: str, command: str) -> ToolStarted:
    return ToolStarted(turn=1, call_id=call_id, name="bash", arguments=f'{{"command": "{command}"}}')


# --------------------------------------------------------------------------- Markdown and plain text

def test_items_render_as_markdown_and_plain_text() -> None:
    items: list[Item] = [
        Reasoning(1, "hmm <b>", streaming=False),
        Answer(2, "**answer** <img src=x onerror=alert(1)>", streaming=False),
        ToolCall(3, "c1", "bash", "ls <dir>", "{}", "a\x1bb", "ok"),
        ToolCall(4, "c2", "bash", "false", "{}", "failed", "error"),
        ToolCall(5, "c3", "bash", "sleep 9", "{}", "", "stopped"),
        ToolCall(6, "c4", "bash", "sleep 1", "{}"),
        TurnEnd(7, "interrupted"),
    ]
    view = TranscriptMarkdown(items, show_reasoning=False)
    md = unwrap(view.html())
    assert "<details><summary>Reasoning</summary><pre>hmm &lt;b&gt;</pre></details>" in md
    assert "<p><strong>answer</strong> &lt;img src=x onerror=alert(1)&gt;</p>" in md and "<img" not in md
    assert "<summary>⚙ <code>bash · ls &lt;dir&gt;</code> ✓</summary><pre>a\\x1bb</pre>" in md
    assert "<code>bash · false</code> ✗</summary><pre>failed</pre>" in md
    assert re.search(r"<code>bash · sleep 9</code> ■ stopped</summary><pre>\(stopped: [^<]+\)</pre>", md)
    assert "<code>bash · sleep 1</code> …</summary><pre></pre>" in md
    assert "<p><sub>■ interrupted: the turn was stopped; the log is closed cleanly.</sub></p>" in md
    plain = view.plain()
    assert plain.splitlines() == [
        "**answer** <img src=x onerror=alert(1)>",
        "[tool bash: ls <dir>] ok",
        "[tool bash: false] error",
        "[tool bash: sleep 9] stopped",
        "[tool bash: sleep 1] running",
        "■ interrupted: the turn was stopped; the log is closed cleanly.",
    ]
    assert '<details open="">' in TranscriptMarkdown(items[:1], show_reasoning=True).html()
    assert TranscriptMarkdown(items[:1], show_reasoning=True).plain() == "[reasoning] hmm <b>"


@pytest.mark.parametrize(
    ("reason", "error", "expected"),
    [
        ("error", "model failed", "<blockquote><p>The turn ended with an error: model failed</p></blockquote>"),
        ("max-steps", "stopped after 3 steps", "<blockquote><p>stopped after 3 steps</p></blockquote>"),
        ("max-steps", None, "<blockquote><p>stopped at the step limit</p></blockquote>"),
        ("blocked", "no", "<p><sub>⊘ blocked by a hook; nothing was recorded</sub></p>"),
    ],
)
def test_end_reasons(reason: str, error: str | None, expected: str) -> None:
    assert unwrap(TranscriptMarkdown([TurnEnd(1, reason, error)], False).html()) == expected


def test_nothing_yet_shows_a_waiting_mark_only_while_the_turn_runs() -> None:
    assert unwrap(TranscriptMarkdown([], False).html()) == "<p><sub>…</sub></p>"
    assert TranscriptMarkdown([], False).plain() == "…"
    assert TranscriptMarkdown([], False, waiting=False).html() == ""


# --------------------------------------------------------------------------- the turn view

def test_a_foreground_turn_freezes_each_finished_tool_into_its_own_output(handles: list[FakeHandle]) -> None:
    view = TurnView(rate=1000.0)
    view.start()
    feed(view, [
        TurnStarted(turn=1),
        TextDelta(turn=1, text="Two calls."),
        AssistantMessage(turn=1, text="Two calls.", seq=2),
        tool("a", "echo one"),
        tool("b", "echo one"),  # same tool, same arguments: matched by call id
        ToolFinished(turn=1, call_id="b", name="bash", text="second result", is_error=False),
        ToolFinished(turn=1, call_id="a", name="bash", text="first result", is_error=True),
        TextDelta(turn=1, text="All done."),
        Notice(turn=1, text="a hook said hi"),
        TurnEnded(turn=1, reason="completed"),
    ])
    # "b" finished while "a" still ran: the first output keeps what came before "a"; both calls
    # move to the second output, which is finished when "a" is; the rest goes to a third.
    assert len(handles) == 3
    assert handles[0].markdown == "<p>Two calls.</p>"
    second = handles[1].markdown
    assert re.fullmatch(r"<details><summary>⚙ <code>bash · echo one</code> ✗</summary><pre>first result</pre>"
                        r"</details>\n\n<details><summary>⚙ <code>bash · echo one</code> ✓</summary>"
                        r"<pre>second result</pre></details>", second), second
    assert handles[2].markdown == "<p>All done.</p>\n\n<blockquote><md><p>a hook said hi</p></md></blockquote>"
    shown = "".join(handle.markdown for handle in handles)
    assert shown.count("first result") == 1 and shown.count("second result") == 1
    assert view.finished and view.reason == "completed"


def test_an_interrupted_tool_shows_a_stopped_mark_never_a_waiting_one(handles: list[FakeHandle]) -> None:
    view = TurnView()
    view.start()
    feed(view, [TurnStarted(turn=1), TextDelta(turn=1, text="Waiting."), tool("s", "sleep 20"),
                TurnEnded(turn=1, reason="interrupted")])
    md = handles[-1].markdown
    assert "<code>bash · sleep 20</code> ■ stopped" in md and "…" not in md
    assert md.endswith("<p><sub>■ interrupted: the turn was stopped; the log is closed cleanly.</sub></p>")


def test_finish_ends_a_turn_that_could_not_report_its_end(handles: list[FakeHandle]) -> None:
    view = TurnView()
    view.start()
    feed(view, [TurnStarted(turn=1), tool("s", "sleep 20")])
    view.finish("error", "the kernel lost the agent thread")
    view.finish("error", "twice")  # ignored: the turn has ended
    md = handles[-1].markdown
    assert "■ stopped" in md and md.count("The turn ended with an error") == 1
    assert "the kernel lost the agent thread" in md and "twice" not in md


def test_a_background_view_keeps_one_output_and_refreshes_it(handles: list[FakeHandle]) -> None:
    view = TurnView(background=True)
    view.start()
    feed(view, [TurnStarted(turn=1), tool("a", "ls"),
                ToolFinished(turn=1, call_id="a", name="bash", text="files", is_error=False),
                TextDelta(turn=1, text="Listed."), TurnEnded(turn=1, reason="completed")])
    assert len(handles) == 1
    sent = len(handles[0].versions)
    view.refresh()
    assert len(handles[0].versions) == sent + 1
    assert handles[0].markdown.endswith("<p>Listed.</p>") and "✓" in handles[0].markdown


def test_notes_and_reasoning(handles: list[FakeHandle]) -> None:
    view = TurnView(show_reasoning=True)
    view.start()
    view.note("retrying", "warning")
    feed(view, [ReasoningDelta(turn=1, text="think"), TurnEnded(turn=1, reason="completed")])
    assert handles[-1].markdown == ("<blockquote><md><p>retrying</p></md></blockquote>\n\n"
                                    '<details open=""><summary>Reasoning</summary><pre>think</pre></details>')


def test_streaming_updates_are_coalesced(handles: list[FakeHandle]) -> None:
    view = TurnView(rate=20.0)
    view.start()

    def stream() -> None:
        view(TurnStarted(turn=1))
        for n in range(3000):
            view(TextDelta(turn=1, text=f"w{n} "))
        view(TurnEnded(turn=1, reason="completed"))

    agent = threading.Thread(target=stream)
    agent.start()
    agent.join()
    assert view.updates < 200 and len(handles[0].versions) - 1 == view.updates
    assert handles[0].markdown == "<p>" + "".join(f"w{n} " for n in range(3000)).strip() + "</p>"


def test_a_zero_rate_updates_on_every_event(handles: list[FakeHandle]) -> None:
    view = TurnView(rate=0)
    view.start()
    feed(view, [TextDelta(turn=1, text="a"), TextDelta(turn=1, text="b"), TextDelta(turn=1, text="c")])
    assert view.updates == 3


# --------------------------------------------------------------------------- the turn footer

class FakeModel:
    def __init__(self, provider: str, model: str) -> None:
        from dsh_jupyter.models.base import ModelInfo

        self.info = ModelInfo(provider, model, None)


class FakeSession:
    def __init__(self, title: str | None = "Regional sales", provider: str = "offline", model: str = "offline") -> None:
        self.id = "3f2a9c1b-0000-4000-8000-000000000001"
        self.model = FakeModel(provider, model)
        self._title = title

    def title(self) -> str | None:
        return self._title


class Clock:
    def __init__(self, start: float = 1_787_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def bundle(handle: FakeHandle) -> tuple[dict[str, str], dict[str, Any]]:
    data, metadata = handle.versions[-1]._repr_mimebundle_()
    return data, metadata


def test_the_footer_says_running_then_done_with_duration_and_tokens(handles: list[FakeHandle]) -> None:
    from dsh_jupyter.ui.render import TURN_MIME

    clock = Clock()
    view = TurnView(rate=1000.0, session=FakeSession(), clock=clock)
    view.start()
    data, metadata = bundle(handles[0])
    assert "● running" in data["text/html"] and "Regional sales" in data["text/html"]
    assert data["text/plain"].startswith("● running · Regional sales (3f2a9c1b) · offline · since ")
    assert metadata[TURN_MIME]["status"] == "running" and metadata[TURN_MIME]["sessionId"] == FakeSession().id
    feed(view, [TurnStarted(turn=1), TextDelta(turn=1, text="Hi."),
                AssistantMessage(turn=1, text="Hi.", seq=2, usage={"inputTokens": 1200, "outputTokens": 30}),
                tool("a", "ls")])
    clock.now += 2.5
    feed(view, [ToolFinished(turn=1, call_id="a", name="bash", text="files", is_error=False),
                AssistantMessage(turn=1, text="Done.", seq=4,
                                 usage={"inputTokens": 1300, "outputTokens": 5, "cacheReadTokens": 1000}),
                TurnEnded(turn=1, reason="completed")])
    # Only the last output carries the footer; the frozen one lost it with its last update.
    assert len(handles) == 2
    first, first_meta = bundle(handles[0])
    assert "dsh-turn-footer" not in first["text/html"] and first_meta == {}
    data, metadata = bundle(handles[1])
    assert data["text/plain"].splitlines()[-1] == (
        "✓ done · Regional sales (3f2a9c1b) · offline · 2.5 s · tokens 2,500 in, 35 out, 1,000 cached")
    md = unwrap(data["text/html"])
    assert md.endswith(
        '<p><sub class="dsh-turn-footer"><span class="dsh-turn-status dsh-turn-completed">✓ done</span> · '
        '<span class="dsh-turn-session">Regional sales</span> (<code>3f2a9c1b</code>) · offline · 2.5 s · '
        "tokens 2,500 in, 35 out, 1,000 cached</sub></p>")
    facts = metadata[TURN_MIME]
    assert (facts["status"], facts["durationSeconds"], facts["title"]) == ("completed", 2.5, "Regional sales")
    assert facts["usage"] == {"inputTokens": 2500, "outputTokens": 35, "cacheReadTokens": 1000}


def test_the_footer_adds_the_cost_a_provider_reported(handles: list[FakeHandle]) -> None:
    from dsh_jupyter.ui.render import TURN_MIME

    view = TurnView(rate=1000.0, session=FakeSession(), clock=Clock())
    view.start()
    feed(view, [TurnStarted(turn=1),
                AssistantMessage(turn=1, text="a", seq=2, usage={"inputTokens": 10, "outputTokens": 2, "cost": 0.0011}),
                AssistantMessage(turn=1, text="b", seq=3, usage={"inputTokens": 10, "outputTokens": 2, "cost": 0.0002}),
                AssistantMessage(turn=1, text="c", seq=4, usage={"inputTokens": 1, "outputTokens": 1, "cost": "free"}),
                TurnEnded(turn=1, reason="completed")])
    data, metadata = bundle(handles[-1])
    assert data["text/plain"].splitlines()[-1].endswith("tokens 21 in, 5 out · cost $0.0013")
    assert metadata[TURN_MIME]["usage"]["cost"] == pytest.approx(0.0013)


@pytest.mark.parametrize(("usage", "ending"), [
    ({"inputTokens": 10, "outputTokens": 2, "cost": 0.0}, "tokens 10 in, 2 out · free"),
    ({"inputTokens": 10, "outputTokens": 2}, "tokens 10 in, 2 out"),
    ({"inputTokens": 10, "outputTokens": 2, "cost": 12.5}, "tokens 10 in, 2 out · cost $12.50"),
])
def test_a_free_model_says_free_and_an_unpriced_one_shows_no_cost(handles: list[FakeHandle], usage: dict[str, Any],
                                                                   ending: str) -> None:
    view = TurnView(rate=1000.0, session=FakeSession(), clock=Clock())
    view.start()
    feed(view, [TurnStarted(turn=1), AssistantMessage(turn=1, text="a", seq=2, usage=usage),
                TurnEnded(turn=1, reason="completed")])
    assert bundle(handles[-1])[0]["text/plain"].splitlines()[-1].endswith(ending)


@pytest.mark.parametrize(
    ("reason", "word"),
    [("interrupted", "■ interrupted"), ("error", "✗ error"), ("blocked", "⊘ blocked"),
     ("max-steps", "‖ stopped at the step limit")],
)
def test_the_footer_names_how_the_turn_ended(handles: list[FakeHandle], reason: str, word: str) -> None:
    view = TurnView(session=FakeSession(), background=True)
    view.start()
    feed(view, [TurnStarted(turn=1), TurnEnded(turn=1, reason=reason, error="boom")])
    assert bundle(handles[0])[0]["text/plain"].splitlines()[-1].startswith(f"{word} · Regional sales (3f2a9c1b)")


def test_the_footer_escapes_the_title_and_names_the_provider(handles: list[FakeHandle]) -> None:
    session = FakeSession("<img src=x onerror=alert(1)>\x1b[31m " + "long " * 30, "deepseek", "deepseek-chat")
    view = TurnView(session=session)
    view.start()
    data, _ = bundle(handles[0])
    assert "<img" not in data["text/html"] and "&lt;img" in data["text/html"]
    assert "\x1b" not in data["text/plain"] and "\\x1b" in data["text/plain"]
    assert "deepseek:deepseek-chat" in data["text/plain"] and "…" in data["text/plain"]
    untitled = TurnView(session=FakeSession(None))
    untitled.start()
    assert "untitled session (3f2a9c1b)" in bundle(handles[1])[0]["text/plain"]


def test_a_view_without_a_session_has_no_footer(handles: list[FakeHandle]) -> None:
    view = TurnView()
    view.start()
    data, metadata = bundle(handles[0])
    assert unwrap(data["text/html"]) == "<p><sub>…</sub></p>" and metadata == {}


@pytest.mark.parametrize(("seconds", "text"), [(0.04, "under 0.1 s"), (0.06, "0.1 s"), (12.46, "12.5 s"),
                                               (125, "2 min 5 s"), (3780, "1 h 3 min"), (-1, "under 0.1 s")])
def test_durations(seconds: float, text: str) -> None:
    from dsh_jupyter.ui.render import format_duration

    assert format_duration(seconds) == text


# --------------------------------------------------------------------------- in a real kernel (nbclient)

KERNEL_CELLS = (
    "%load_ext dsh_jupyter",
    "%%dsh\nHello from the footer test",
    "%dsh title Footer check\nFIRST_ID = dsh.session_id",
    "%%dsh --bg\n/bash sleep 1; echo bg-done",
    "import time; time.sleep(4)",
    "%dsh wait",
    "%%dsh --new\nA second session",
    "from dsh_jupyter.references import format_session_reference_mention as mention\n"
    "get_ipython().run_cell_magic('dsh', '', 'Build on ' + mention(FIRST_ID, 'Footer check'))",
)
TURN_MIME_KEY = "application/vnd.dsh.turn+json"
FOOTER = re.compile(r"^(?P<status>[●✓■✗⊘‖] [a-z ]+) · (?P<title>.+) \((?P<short>[0-9a-f]{8})\) · offline · "
                    r"(?P<timing>since \d\d:\d\d:\d\d|(?:under )?\d+\.\d s)"
                    r"(?: · tokens (?P<tokens>[\d,]+ in, [\d,]+ out))?"
                    r"(?: · context (?P<context>\d+% of [\d.,]+[KM]? \(compacts at \d+%\)))?$")


@pytest.fixture(scope="module")
def executed(kernel_runner: KernelRunner,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[int, list[dict[str, Any]]], Any]:
    """The notebook run in one real kernel, saved and read back; and each cell's outputs as it finished."""
    import copy

    import nbformat

    work = tmp_path_factory.mktemp("footer-notebook")
    at_finish: dict[int, list[dict[str, Any]]] = {}

    def keep(cell: Any, cell_index: int, execute_reply: dict[str, Any]) -> None:
        at_finish[cell_index] = copy.deepcopy(cell.outputs)

    nb = kernel_runner.run(KERNEL_CELLS, work, env={"DSH_HOME": str(tmp_path_factory.mktemp("footer-home"))},
                           on_cell_executed=keep)
    path = work / "footer.ipynb"
    nbformat.write(nb, path)
    return nbformat.read(path, as_version=4), at_finish, work


def footers(outputs: list[dict[str, Any]]) -> list[tuple[re.Match[str], dict[str, Any]]]:
    """Each output's footer line (plain text) matched against :data:`FOOTER`, with the output's turn facts."""
    from dsh_jupyter.ui.render import TURN_MIME

    found = []
    for output in outputs:
        facts = output.get("metadata", {}).get(TURN_MIME)
        if facts is None:
            continue
        last = output["data"]["text/plain"].splitlines()[-1]
        match = FOOTER.match(last)
        assert match is not None, last
        assert 'class="dsh-turn-footer"' in output["data"]["text/html"]
        found.append((match, facts))
    return found


@pytest.mark.slow
def test_kernel_foreground_footer_names_the_session_and_stays_in_the_saved_notebook(executed: Any) -> None:
    nb, _, work = executed
    ((footer, facts),) = footers(nb.cells[1].outputs)
    assert footer["status"] == "✓ done" and footer["title"] == "Hello from the footer test"
    assert footer["timing"].endswith(" s") and footer["tokens"]
    session_id = facts["sessionId"]
    assert footer["short"] == session_id[:8]
    assert (facts["status"], facts["provider"], facts["model"]) == ("completed", "offline", "offline")
    assert facts["durationSeconds"] >= 0 and facts["usage"]["inputTokens"] > 0
    assert list((work / ".dsh" / "sessions").glob("*/session.jsonl")), "the session log exists"
    # The first-use notice: rendered Markdown in a quote, once per kernel (not again for the later turns).
    notices = [o for cell in nb.cells for o in cell.outputs
               if "offline model" in o.get("data", {}).get("text/html", "").lower()
               and "text/plain" in o["data"] and TURN_MIME_KEY not in o.get("metadata", {})
               and REFERENCE_CONTEXT_MIME not in o["data"]]
    assert len(notices) == 1
    quoted = block_markup(notices[0]["data"]["text/html"])
    assert quoted.startswith('<blockquote class="dsh-notice">') and "Using the offline model" in quoted
    assert "<code>%dsh models</code>" in quoted


@pytest.mark.slow
def test_kernel_background_footer_says_running_then_done(executed: Any) -> None:
    nb, at_finish, _ = executed
    ((running, running_facts),) = footers(at_finish[3])
    assert running["status"] == "● running" and running["timing"].startswith("since ")
    assert running["title"] == "Footer check" and running_facts["status"] == "running"
    ((done, facts),) = footers(nb.cells[3].outputs)
    assert done["status"] == "✓ done" and done["title"] == "Footer check"
    assert done["timing"].endswith(" s") and facts["durationSeconds"] >= 1.0
    assert facts["sessionId"] == running_facts["sessionId"]
    shown = [output.get("data", {}).get("text/plain", "") for output in nb.cells[3].outputs]
    assert "bg-done" in shown[0]
    assert "".join(shown).count("needs approval") == 1  # the decision once: on the tool line, not again below
    # A new session's footer names the new session.
    ((other, other_facts),) = footers(nb.cells[6].outputs)
    assert other_facts["sessionId"] != facts["sessionId"] and other["short"] == other_facts["sessionId"][:8]
    # Nothing of the background turn landed in the cells that ran meanwhile.
    assert nb.cells[4].outputs == [] and nb.cells[5].outputs == []


@pytest.mark.slow
def test_kernel_nbconvert_html_shows_the_footer_and_the_reference_view(executed: Any) -> None:
    from nbconvert import HTMLExporter

    nb, _, _ = executed
    body, _ = HTMLExporter().from_notebook_node(nb)
    assert body.count('class="dsh-turn-footer"') == 4  # one per turn, in its last output
    assert "✓ done</span> · <span class=\"dsh-turn-session\">Footer check</span>" in body
    assert "Referenced: Footer check · " in body and "What the agent received (" in body
    assert "object at 0x" not in body


def test_a_notice_renders_its_code_spans_and_nothing_live() -> None:
    from dsh_jupyter.conversation.items import Notice

    shown = unwrap(TranscriptMarkdown([Notice(1, "`{t}` was kept as written <img src=x onerror=alert(1)>")],
                                      False, waiting=False).html())
    assert shown == "<blockquote><md><p><code>{t}</code> was kept as written &lt;img src=x onerror=alert(1)&gt;</p>" \
                    "</md></blockquote>"


def test_the_footer_shows_the_context_meter_once_the_turn_ends(handles: list[FakeHandle]) -> None:
    from dsh_jupyter.conversation.usage import ContextMeter
    from dsh_jupyter.ui.render import TURN_MIME

    class MeteredSession(FakeSession):
        calls = 0

        def context_meter(self) -> ContextMeter:
            MeteredSession.calls += 1
            return ContextMeter(24_000, 200_000, 160_000)

    view = TurnView(rate=1000.0, session=MeteredSession(), clock=Clock())
    view.start()
    feed(view, [TurnStarted(turn=1), AssistantMessage(turn=1, text="a", seq=2, usage={"inputTokens": 10,
                                                                                        "outputTokens": 2})])
    assert "context" not in bundle(handles[-1])[0]["text/plain"].splitlines()[-1], "not measured while running"
    feed(view, [TurnEnded(turn=1, reason="completed")])
    data, metadata = bundle(handles[-1])
    assert data["text/plain"].splitlines()[-1].endswith("tokens 10 in, 2 out · context 12% of 200K (compacts at 80%)")
    assert metadata[TURN_MIME]["context"] == {"usedTokens": 24_000, "windowTokens": 200_000,
                                              "compactsAtTokens": 160_000}
    view.footer()
    assert MeteredSession.calls == 1, "measured once per turn"
