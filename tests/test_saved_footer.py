"""A footer saved while its turn ran (ui/saved_footer.py, the server's pre-save hook): the saved file says
what is known (the end the session log records, or "unfinished when saved"), never "● running"."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dsh_jupyter.conversation.usage import TokenUsage
from dsh_jupyter.server.boundary import Boundary
from dsh_jupyter.server.saving import settle_footers_hook
from dsh_jupyter.session.events import TURN_END, TURN_START, Event
from dsh_jupyter.ui.render import TURN_MIME, TranscriptMarkdown, TurnFooter
from dsh_jupyter.ui.saved_footer import SAVED_MID_TURN, settle_saved_footers, turn_outcome

STARTED = 1_787_000_000.0
SESSION = "0123456789abcdef"


def footer(status: str = "running", **changes: Any) -> TurnFooter:
    return TurnFooter(SESSION, "Quarterly report", "offline", "offline", status, STARTED,
                      None if status == "running" else STARTED + 4, **changes)


def notebook(*footers: TurnFooter) -> dict[str, Any]:
    outputs = []
    for made in footers:
        data, metadata = TranscriptMarkdown([], False, footer=made)._repr_mimebundle_()
        outputs.append({"output_type": "display_data", "data": data, "metadata": metadata})
    return {"cells": [{"cell_type": "code", "source": "%%dsh\nhi", "outputs": outputs}]}


def shown(nb: dict[str, Any], index: int = 0) -> tuple[str, str, dict[str, Any]]:
    output = nb["cells"][0]["outputs"][index]
    return output["data"]["text/html"], output["data"]["text/plain"], output["metadata"][TURN_MIME]


def test_a_running_footer_the_log_knows_nothing_of_says_unfinished_when_saved() -> None:
    nb = notebook(footer(usage=TokenUsage(1448, 24)))  # the tokens so far: not the turn's, so not said
    assert settle_saved_footers(nb, lambda _session, _started: None) == 1
    html, plain, facts = shown(nb)
    assert "● running" not in html + plain and "since" not in html + plain and "tokens" not in html + plain
    assert '<span class="dsh-turn-status dsh-turn-unfinished">○ unfinished when saved</span>' in html
    assert plain.startswith("○ unfinished when saved · Quarterly report (01234567) · offline · started ")
    assert facts["status"] == "unfinished" and facts["sessionId"] == SESSION


def test_a_running_footer_whose_end_is_logged_says_how_it_ended() -> None:
    nb = notebook(footer())
    asked: list[tuple[str, float]] = []

    def outcome(session: str, started: float) -> tuple[str, float]:
        asked.append((session, started))
        return "interrupted", STARTED + 12.5

    settle_saved_footers(nb, outcome)
    html, plain, facts = shown(nb)
    assert asked == [(SESSION, STARTED)]
    assert plain == f"■ interrupted · Quarterly report (01234567) · offline · 12.5 s · {SAVED_MID_TURN}"
    assert "■ interrupted" in html and "● running" not in html
    assert facts["status"] == "interrupted" and facts["durationSeconds"] == 12.5 and facts["note"] == SAVED_MID_TURN


def test_finished_and_malformed_footers_are_left_as_they_are_and_a_failing_log_counts_as_unknown() -> None:
    done = notebook(footer("completed"))
    before = copy.deepcopy(done)
    assert settle_saved_footers(done, lambda _s, _t: ("completed", 0.0)) == 0 and done == before
    odd = {"cells": [{"outputs": [{"metadata": {TURN_MIME: {"status": "running"}}, "data": {}}, "text"]}, "x"]}
    assert settle_saved_footers(odd, lambda _s, _t: None) == 0
    assert settle_saved_footers({"cells": None}, lambda _s, _t: None) == 0

    def broken(_session: str, _started: float) -> tuple[str, float]:
        raise OSError("the log is unreadable")

    nb = notebook(footer(), footer())
    assert settle_saved_footers(nb, broken) == 2
    assert shown(nb, 1)[2]["status"] == "unfinished"


def test_the_turn_outcome_is_the_end_of_the_first_turn_logged_from_its_start() -> None:
    ms = int(STARTED * 1000)
    events = [
        Event(TURN_START, 1, ms - 60_000, {}), Event(TURN_END, 2, ms - 50_000, {"reason": "completed"}),
        Event(TURN_START, 3, ms + 300, {}), Event(TURN_END, 4, ms + 9_000, {"reason": {"kind": "error"}}),
    ]
    assert turn_outcome(events, STARTED) == ("error", STARTED + 9)
    assert turn_outcome(events[:3], STARTED) is None  # still running when the log was read
    assert turn_outcome(events[:2], STARTED) is None  # an earlier turn is not this one


@pytest.mark.parametrize("path", ["work/report.ipynb", "missing/folder/report.ipynb"])
def test_the_pre_save_hook_settles_a_notebook_and_leaves_other_files(tmp_path: Path, path: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DSH_SESSIONS_DIR", raising=False)
    (tmp_path / "work").mkdir()
    hook = settle_footers_hook(str(tmp_path), Boundary.of(tmp_path))
    nb = notebook(footer())
    hook(model={"type": "notebook", "content": nb}, path=path, contents_manager=None)
    assert shown(nb)[2]["status"] == "unfinished"  # no session store there: nothing is known of the turn
    text = {"type": "file", "content": "● running"}
    hook(model=text, path="notes.txt")
    assert text["content"] == "● running"


def test_the_pre_save_hook_reads_the_turns_end_from_the_folders_session_log(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.session import SessionHeader, SessionLog
    from dsh_jupyter.store import JsonlStore

    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DSH_SESSIONS_DIR", raising=False)
    folder = tmp_path / "work"
    store = JsonlStore(folder / ".dsh" / "sessions")
    log = SessionLog(SessionHeader(SESSION, int(STARTED * 1000) - 5_000, str(folder)))
    writer = store.create(log.header)
    writer.attach(log)
    try:
        log.append(TURN_START, {"turn": 1}, time=int(STARTED * 1000) + 200)
        log.append(TURN_END, {"turn": 1, "reason": {"kind": "completed"}}, time=int(STARTED * 1000) + 7_000)
    finally:
        writer.close()
    nb = notebook(footer())
    settle_footers_hook(str(tmp_path), Boundary.of(tmp_path))(model={"type": "notebook", "content": nb},
                                                               path="work/report.ipynb")
    _html, plain, facts = shown(nb)
    assert plain == f"✓ done · Quarterly report (01234567) · offline · 7.0 s · {SAVED_MID_TURN}"
    assert facts["status"] == "completed"
