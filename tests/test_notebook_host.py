"""The notebook host: sessions through the agent's constructors, hooks once, nothing unsaved dropped."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_jupyter.notebook.config import DshSettings
from dsh_jupyter.notebook.host import HostError, NotebookHost
from dsh_jupyter.store.errors import SessionWriteError

HOOKS = Path(__file__).parent / "hook_scripts"


def make_host(tmp_path: Path, **settings: Any) -> NotebookHost:
    config = DshSettings(model="offline", model_titles=False, catalog=False, **settings)
    return NotebookHost(config, shell=None, cwd=str(tmp_path))


def ask(host: NotebookHost, text: str) -> Any:
    return host.submit_async(text).result(30)


def session_start_sources(out: Path) -> list[str]:
    def order(path: Path) -> int:  # record.py writes stdin.bin, then stdin-1.bin, stdin-2.bin ...
        return int(path.stem.partition("-")[2] or 0)

    payloads = [json.loads(p.read_bytes()) for p in sorted(out.glob("stdin*.bin"), key=order)]
    return [p["source"] for p in payloads if p.get("hook_event_name") == "SessionStart"]


def test_session_start_fires_once_per_session_with_its_source(tmp_path: Path) -> None:
    out = tmp_path / "hook-out"
    settings = tmp_path / "settings.json"
    command = f"{sys.executable} {HOOKS / 'record.py'} {out}"
    settings.write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": command}]}]}}))
    host = make_host(tmp_path, claude_hooks=str(settings))
    try:
        first, _ = host.new_session()
        ask(host, "one")
        ask(host, "two")
        assert session_start_sources(out) == ["startup"]
        host.new_session()
        host.resume(first.id)
        ask(host, "three")
        ask(host, "four")
        assert session_start_sources(out) == ["startup", "resume"]
    finally:
        host.close()


def test_resuming_the_current_session_keeps_it(tmp_path: Path) -> None:
    host = make_host(tmp_path)
    try:
        agent, _ = host.new_session()
        ask(host, "hello")
        assert host.resume(agent.id)[0] is agent
    finally:
        host.close()


def test_an_unsaved_turn_is_never_dropped_by_switching(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = make_host(tmp_path)
    try:
        agent, _ = host.new_session()
        ask(host, "saved turn")
        writer = agent.writer
        assert writer is not None
        real_flush = writer.flush

        def disk_full() -> None:
            raise SessionWriteError("No space left on device")

        monkeypatch.setattr(writer, "flush", disk_full)
        with pytest.raises(SessionWriteError):  # the turn ends in error; its events stay buffered
            ask(host, "unsaved turn")
        assert writer.pending > 0  # type: ignore[attr-defined]
        with pytest.raises(HostError, match=r"could not be saved.*--discard"):
            host.new_session()
        assert host.agent is agent  # still current, nothing lost
        monkeypatch.setattr(writer, "flush", real_flush)
        host.new_session()  # now it saves, then switches
        log = host.store.load(agent.id)
        texts = [e.data["content"][0]["text"] for e in log.events if e.type == "user/message"]
        assert texts == ["saved turn", "unsaved turn"]
    finally:
        host.close()


def test_discard_drops_only_the_unsaved_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = make_host(tmp_path)
    try:
        agent, _ = host.new_session()
        ask(host, "saved turn")
        path = Path(host.locate().path)  # type: ignore[union-attr]
        before = path.read_bytes()
        writer = agent.writer
        assert writer is not None

        def disk_full() -> None:
            raise SessionWriteError("No space left on device")

        monkeypatch.setattr(writer, "flush", disk_full)
        with pytest.raises(SessionWriteError):
            ask(host, "unsaved turn")
        host.new_session(discard=True)
        assert path.read_bytes() == before
        assert host.agent is not agent
    finally:
        host.close()


def test_no_current_session_is_said_one_way(tmp_path: Path) -> None:
    host = make_host(tmp_path)
    try:
        assert host.target().session_id is None
        agent, _ = host.new_session()
        assert host.target().session_id == agent.id
        assert host.target(include_current=True).session_id is None
    finally:
        host.close()


def test_budget_errors_name_what_the_user_typed(tmp_path: Path) -> None:
    host = make_host(tmp_path)
    try:
        with pytest.raises(HostError) as raised:
            host.make_resolver(-5, option="--budget")
        assert "--budget" in str(raised.value) and "max_reference_bytes" not in str(raised.value)
    finally:
        host.close()


def test_a_small_model_gets_a_reference_budget_fitted_to_its_window(tmp_path: Path) -> None:
    from dsh_jupyter.models.base import ModelInfo

    host = make_host(tmp_path)
    try:
        agent, _ = host.new_session()
        assert host.resolver_for(agent).max_reference_bytes is None  # a large window: the automatic budget
        agent.model.info = ModelInfo("local", "smollm2", 2048)
        assert host.resolver_for(agent).max_reference_bytes == 1638
        assert host.resolver_for(agent, 4000).max_reference_bytes == 4000  # --budget wins
        with pytest.raises(HostError, match="--budget takes a positive number of bytes, got -5"):
            host.resolver_for(agent, -5)
    finally:
        host.close()


def test_model_images_setting_decides_what_a_custom_endpoint_is_sent(tmp_path: Path) -> None:
    host = make_host(tmp_path, base_url="http://127.0.0.1:9/v1")
    provider, _ = host.model_for("my-vision-model")
    assert provider.info.accepts_images is False  # a name the catalog does not know gets descriptions
    host.settings.model_images = "yes"
    host.settings_changed("model_images")
    provider, _ = host.model_for("my-vision-model")
    assert provider.info.accepts_images is True
