"""No secret on disk: everything written under a store folder, the dsh home or an export folder is masked.

One real kernel (nbclient) runs the offline model with a fake DeepSeek key, a GitHub token and a PostgreSQL
password in a DSN set in its environment. Its ``/bash`` prints them in an output of more than 30,000 bytes
(the full-output file) and in a background job (the job's output file), a prompt holds them as typed (the
kernel's session in memory keeps them whole), it @-mentions a Claude Code
transcript holding them with a small budget (the saved full snapshot), and ``%dsh export`` writes the
session as md, html and ipynb; then the command line exports the same session. Every file under those
folders is read as bytes (SQLite databases cell by cell, compressed bodies unpacked) and searched for each
secret as written, JSON-escaped, URL-quoted and base64-encoded at every alignment.
"""

from __future__ import annotations

import base64
import io
import json
import secrets
import sqlite3
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from kernel_helpers import KernelRunner, output_text

from dsh_jupyter.references.mentions import format_session_reference_mention
from dsh_jupyter.secrets import MASK, MaskedStream, SecretMasker

TOKEN = secrets.token_hex(8)
API_KEY = f"sk-test-{TOKEN}-deepseek"
GITHUB_TOKEN = f"ghp_{TOKEN}watchedtoken"
PG_PASSWORD = f"pg-Secret-{TOKEN}"
DSN = f"postgresql://analyst:{PG_PASSWORD}@127.0.0.1:5999/warehouse"
SECRETS = (API_KEY, GITHUB_TOKEN, PG_PASSWORD)
CLAUDE_UUID = "5d6e7f80-1a2b-4c3d-8e9f-a0b1c2d3e4f5"
CLAUDE_ID = f"claude-code:{CLAUDE_UUID}"


def forms(secret: str) -> set[bytes]:
    """The ways a writer could have spelled ``secret``: as is, JSON-escaped, URL-quoted, base64 (any offset)."""
    raw = secret.encode()
    found = {raw, json.dumps(secret)[1:-1].encode(), quote(secret, safe="").encode()}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw)
        found.add(encoded[4 if offset else 0:-4])  # the groups made of the secret's bytes alone
    return found


def contents(path: Path) -> Iterator[bytes]:
    """The bytes of ``path`` and, for an SQLite database, every value of every table (unpacked when zlib)."""
    data = path.read_bytes()
    yield data
    if not data.startswith(b"SQLite format 3"):
        return
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, str):
                        yield value.encode("utf-8", "surrogatepass")
                    elif isinstance(value, bytes):
                        yield value
                        try:
                            unpacked = zlib.decompress(value)
                        except zlib.error:
                            continue
                        yield unpacked


def leaks(*roots: Path) -> list[str]:
    """``file: form`` for every spelling of a secret found under ``roots``."""
    found = []
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            for data in contents(path):
                for secret in SECRETS:
                    for form in forms(secret):
                        if form in data:
                            found.append(f"{path}: {form!r}")
    return found


def claude_transcript(config: Path, cwd: Path) -> Path:
    """A Claude Code transcript whose prompts and answers hold the secrets, long enough to be cut to 4 KiB."""
    folder = config / "projects" / str(cwd).replace("/", "-")
    folder.mkdir(parents=True)
    lines = []
    parent = None
    for number in range(12):
        role = "user" if number % 2 == 0 else "assistant"
        uuid = f"m{number}"
        text = (f"Step {number}: connect with {DSN} using key {API_KEY} and token {GITHUB_TOKEN}. "
                + "Some filler words about the regional sales figures. " * 12)
        content: object = text if role == "user" else [{"type": "text", "text": text}]
        lines.append(json.dumps({
            "parentUuid": parent, "isSidechain": False, "sessionId": CLAUDE_UUID, "cwd": str(cwd), "uuid": uuid,
            "timestamp": f"2026-11-30T09:00:{number:02d}.000Z", "type": role,
            "message": {"role": role, "content": content}}))
        parent = uuid
    path = folder / f"{CLAUDE_UUID}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Ran:
    work: Path
    home: Path
    exports: Path
    cli_exports: Path
    session_id: str
    reference_session_id: str
    cells: list[str]


@pytest.fixture(scope="module")
def ran(kernel_runner: KernelRunner, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    from dsh_jupyter.cli import main

    root = tmp_path_factory.mktemp("secrets-disk")
    work, home, exports, cli_exports, keys = (root / name for name in ("work", "home", "exports", "cli", "keys"))
    for folder in (work, home, exports, keys):
        folder.mkdir()
    key_file = keys / "key.txt"
    key_file.write_text(f"deepseek={API_KEY}\ngithub={GITHUB_TOKEN}\ndsn={DSN}\n")
    claude_transcript(keys / "claude", work)  # the other tool's own file, outside every folder searched
    mention = format_session_reference_mention(CLAUDE_ID, "warehouse notes")
    big = f"for i in $(seq 1 600); do echo \"row $i $(tr '\\n' ' ' < {key_file})\"; done"
    cells = [
        "%load_ext dsh_jupyter",
        '%config DshMagics.model = "offline"\n%config DshMagics.approval = "auto"',
        f"%%dsh\n/bash {big}",
        "import os\nkey, dsn = os.environ['DEEPSEEK_API_KEY'], os.environ['DATABASE_URL']",
        "%%dsh\nKeep {key} and {dsn} in mind.",  # typed secrets: whole in the kernel's memory, masked in the log
        f'%%dsh\n/tool bash {{"command": "cat {key_file}; echo done", "run_in_background": true}}',
        '%%dsh\n/tool bash_output {"job_id": "job-1", "wait_seconds": 5}\n'
        f"/python print(open({str(key_file)!r}).read())",
        # Exported from the kernel's memory: the current session, not read back from its log.
        f"%dsh export --to md -o {exports}/kernel.md\n%dsh export --to html -o {exports}/kernel.html\n"
        f"%dsh export --to ipynb -o {exports}/kernel.ipynb",
        "print('env', os.environ.get('DSH_SESSION_ID'))",
        f"%%dsh -n -b 4096\nWhat do the warehouse notes say? {mention}",
    ]
    env = {"DSH_HOME": str(home), "CLAUDE_CONFIG_DIR": str(keys / "claude"), "DEEPSEEK_API_KEY": API_KEY,
           "GITHUB_TOKEN": GITHUB_TOKEN, "DATABASE_URL": DSN}
    with pytest.MonkeyPatch.context() as patch:  # the command line below reads the same environment
        for name, value in env.items():
            patch.setenv(name, value)
        nb = kernel_runner.run(cells, work, env=env, allow_errors=True)
        texts = [output_text(cell.outputs) for cell in nb.cells]
        logs = sorted((work / ".dsh" / "sessions").glob("*/session.jsonl"), key=lambda p: p.stat().st_mtime)
        first = texts[-2].split("env ", 1)[1].split()[0]
        others = [p.parent.name for p in logs if p.parent.name != first]
        out = io.StringIO()
        code = main(["sessions", "export", first, str(cli_exports), "--to", "md", "--store",
                     str(work / ".dsh" / "sessions")], out=out)
        assert code == 0, out.getvalue()
        for fmt in ("html", "ipynb"):
            assert main(["sessions", "export", first, str(cli_exports), "--to", fmt, "--store",
                         str(work / ".dsh" / "sessions")], out=io.StringIO()) == 0
    assert len(others) == 1, (logs, texts)
    yield Ran(work, home, exports, cli_exports, first, others[0], texts)


@pytest.mark.slow
def test_no_file_written_holds_a_secret(ran: Ran) -> None:
    assert leaks(ran.work, ran.home, ran.exports, ran.cli_exports) == []


@pytest.mark.slow
def test_the_full_output_file_masks_the_key_where_it_was(ran: Ran) -> None:
    folder = ran.work / ".dsh" / "sessions" / ran.session_id / "tool-output"
    files = sorted(folder.glob("*.txt"), key=lambda p: p.stat().st_size)
    assert len(files) == 2, ran.cells  # the long command's full output and the background job's output
    job, full = (p.read_text() for p in files)
    assert files[1].stat().st_size > 30_000
    lines = full.splitlines()
    dsn = f"postgresql://analyst:{MASK}@127.0.0.1:5999/warehouse"
    assert len(lines) == 600 and lines[0] == f"row 1 deepseek={MASK} github={MASK} dsn={dsn} "
    assert job == f"deepseek={MASK}\ngithub={MASK}\ndsn={dsn}\ndone\n"
    log = (folder.parent / "session.jsonl").read_text()
    assert f"full output saved to {files[1]}" in log and API_KEY not in log


@pytest.mark.slow
def test_the_saved_full_snapshot_of_another_tools_transcript_is_masked(ran: Ran) -> None:
    folder = ran.work / ".dsh" / "sessions" / ran.reference_session_id
    spill = (folder / "session-reference-1.txt").read_text()
    assert "### Message 12: assistant" in spill
    assert spill.count(MASK) >= 36  # three secrets in each of the twelve messages
    assert "using key [masked] and token [masked]" in "".join(
        json.loads(line) for line in spill.splitlines() if line.startswith('"'))
    log = (folder / "session.jsonl").read_text()
    assert f"full snapshot saved at {folder / 'session-reference-1.txt'}" in log
    index = json.loads((ran.home / "foreign-sessions.json").read_text())
    assert any(MASK in json.dumps(record) for record in index["files"].values())


@pytest.mark.slow
def test_the_kernel_and_the_command_line_export_the_same_masked_file(ran: Ran) -> None:
    for fmt in ("md", "html", "ipynb"):
        kernel = (ran.exports / f"kernel.{fmt}").read_text()
        cli = next(ran.cli_exports.glob(f"*.{fmt}")).read_text()
        assert MASK in kernel, fmt
        if fmt == "ipynb":  # every export gets new random cell ids; the cells themselves are the same
            kernel, cli = (json.dumps([{k: v for k, v in cell.items() if k != "id"}
                                       for cell in json.loads(text)["cells"]]) for text in (kernel, cli))
        assert kernel == cli, fmt


# --------------------------------------------------------------------------- the seams, one at a time

ENV = {"DEEPSEEK_API_KEY": API_KEY, "DATABASE_URL": DSN}


def test_a_stream_cut_anywhere_is_masked_as_a_whole() -> None:
    import random

    masker = SecretMasker(ENV)
    rng = random.Random(7)
    for _ in range(100):
        pieces = [rng.choice([API_KEY, "\n", f"postgresql://bob:{PG_PASSWORD}@db/x ", "x" * rng.randint(1, 3000)])
                  for _ in range(rng.randint(1, 120))]
        data = "".join(pieces).encode()
        stream = MaskedStream(masker, long_line=rng.choice([200, 2000, 9000]))
        out = bytearray()
        at = 0
        while at < len(data):
            size = rng.randint(1, 5000)
            out += stream.feed(data[at:at + size])
            at += size
        out += stream.finish()
        assert bytes(out) == masker.mask_text(data.decode()).encode()
        assert API_KEY.encode() not in out and PG_PASSWORD.encode() not in out


def test_a_stream_holds_only_what_a_secret_could_still_span() -> None:
    masker = SecretMasker(ENV)
    stream = MaskedStream(masker, long_line=1000)
    assert stream.feed(b"first line\nsecond ") == b"first line\n"  # a whole line goes out at once
    assert stream.feed(API_KEY[:10].encode()) == b""
    long = stream.feed(API_KEY[10:].encode() + b"y" * 5000)
    assert long.startswith(f"second {MASK}".encode()) and len(long) < 5000 + 20
    rest = stream.finish()
    assert (long + rest).endswith(b"y" * 5000) and API_KEY.encode() not in long + rest


def test_bytes_that_are_not_utf8_pass_through() -> None:
    masker = SecretMasker(ENV)
    data = b"\xff\xfe binary " + API_KEY.encode() + b" \xc3"
    assert masker.mask_bytes(data) == b"\xff\xfe binary " + MASK.encode() + b" \xc3"
    stream = MaskedStream(masker)
    assert stream.feed(data + b"\n") + stream.finish() == masker.mask_bytes(data) + b"\n"


def test_safe_cut_never_splits_a_url_password_from_its_scheme_or_at_sign() -> None:
    masker = SecretMasker({})
    text = "see postgresql://bob:hunter2-long@db/x now"
    start, at = text.index("postgresql"), text.index("@")
    for cut in range(len(text) + 1):
        safe = masker.safe_cut(text, cut)
        assert safe <= cut
        if start < cut <= at:
            assert safe <= start
        pieces = masker.mask_text(text[:safe]) + masker.mask_text(text[safe:])
        assert "hunter2-long" not in pieces


def test_tool_output_files_are_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.tools.output import OutputCapture

    monkeypatch.setenv("DEEPSEEK_API_KEY", API_KEY)
    capture = OutputCapture(100, tmp_path / "out.txt")
    data = (f"key {API_KEY}\n" * 50).encode()
    for at in range(0, len(data), 7):  # every cut of the key between two reads
        capture.feed(data[at:at + 7])
    result = capture.finish()
    assert result.spill_path is not None
    assert result.spill_path.read_text() == f"key {MASK}\n" * 50


def test_reference_spills_mask_before_cutting_into_fragments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.references.spill import render_transcript, save_transcript

    monkeypatch.setenv("DEEPSEEK_API_KEY", API_KEY)
    text = "x" * 60 + API_KEY  # the key would straddle the first two 64-code-point fragments
    content = render_transcript({"sessionId": "s", "label": f"label {API_KEY}", "cwd": None,
                                 "capturedThroughSeq": 3, "conversation": [{"role": "user", "text": text}]}, 1)
    result = save_transcript(tmp_path, 0, content)
    assert result.path is not None
    saved = result.path.read_text()
    assert API_KEY[:20] not in saved and API_KEY[-20:] not in saved
    assert MASK in "".join(json.loads(line) for line in saved.splitlines() if line.startswith('"'))
    assert f'"label": "label {MASK}"' in saved


def test_foreign_texts_are_masked_as_they_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.sources.claude import ClaudeCodeSource
    from dsh_jupyter.sources.registry import ForeignSessions

    monkeypatch.setenv("DEEPSEEK_API_KEY", API_KEY)
    claude_transcript(tmp_path / "claude", tmp_path)
    index = tmp_path / "home" / "foreign-sessions.json"
    sessions = ForeignSessions([ClaudeCodeSource(tmp_path / "claude")], index_path=index)
    (header,) = sessions.headers()
    assert header.title is not None and MASK in header.title and API_KEY not in header.title
    assert API_KEY not in index.read_text() and MASK in index.read_text()
    surface = sessions.read_surface(CLAUDE_ID)
    assert API_KEY not in json.dumps([event.data for event in surface.events])
    # An index an older version wrote unmasked is masked as it is read back.
    index.write_text(index.read_text().replace(MASK, API_KEY))
    again = ForeignSessions([ClaudeCodeSource(tmp_path / "claude")], index_path=index)
    assert all(API_KEY not in (h.title or "") for h in again.headers())


def test_image_artifacts_keep_pixels_only() -> None:
    from PIL import Image, ImageCms, PngImagePlugin

    from dsh_jupyter.images import PreparedImage, prepare

    picture = Image.new("RGB", (120, 80), (250, 250, 250))
    for x in range(120):
        picture.putpixel((x, 40), (x, 0, 200))
    info = PngImagePlugin.PngInfo()
    info.add_text("Title", API_KEY)
    info.add_itxt("Comment", API_KEY)
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes() + API_KEY.encode()
    data = io.BytesIO()
    picture.save(data, format="PNG", pnginfo=info, icc_profile=icc)
    prepared = prepare("image/png", data.getvalue())
    assert isinstance(prepared, PreparedImage)
    with Image.open(io.BytesIO(prepared.data)) as reopened:
        assert not {"Title", "Comment", "icc_profile"} & set(reopened.info)
        reopened.load()
        assert all(API_KEY not in str(value) for value in reopened.info.values())


def test_the_catalog_masks_what_an_older_log_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from catalog_helpers import make_session

    from dsh_jupyter.catalog import Catalog
    from dsh_jupyter.store import JsonlStore

    store = JsonlStore(tmp_path / "store")
    make_session(store, "old", prompt="connect with PLACEHOLDER please", title="key PLACEHOLDER")
    log = store.log_path("old")
    log.write_text(log.read_text().replace("PLACEHOLDER", API_KEY))  # as a version before masking wrote it
    monkeypatch.setenv("DEEPSEEK_API_KEY", API_KEY)
    home = tmp_path / "home"
    catalog = Catalog(home / "catalog.sqlite", background=False)
    catalog.ensure_store(store.root, budget=None)
    catalog.close()
    assert any(API_KEY.encode() in data for data in contents(log))  # the old log itself is left as it is
    assert leaks(home) == []
    with sqlite3.connect(home / "catalog.sqlite") as conn:
        (title,) = conn.execute("SELECT title FROM sessions").fetchone()
    assert bytes(title).decode() == f"key {MASK}"


def test_the_head_and_tail_shown_never_cut_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.secrets import mask_text
    from dsh_jupyter.tools.output import OutputCapture

    monkeypatch.setenv("DEEPSEEK_API_KEY", API_KEY)
    for before in range(20, 80, 3):  # the key across the head's end, then across the tail's start
        capture = OutputCapture(100)
        data = ("h" * before + API_KEY + "m" * 500 + API_KEY + "t" * (before // 2)).encode()
        for at in range(0, len(data), 13):
            capture.feed(data[at:at + 13])
        result = capture.finish()
        shown = mask_text(result.preview())  # what the log and the model get
        assert result.truncated and shown.count("h") + shown.count("t") > 0
        for piece in (API_KEY[:8], API_KEY[-8:], API_KEY[6:14]):
            assert piece not in shown, (before, shown)
