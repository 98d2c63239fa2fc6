"""The translator of errors into the notebook user's terms: every reference code, model kind, session error."""

from __future__ import annotations

import pytest

from dsh_jupyter.models.base import ERROR_KINDS, ModelError
from dsh_jupyter.references import errors as codes
from dsh_jupyter.references import format_session_reference_mention
from dsh_jupyter.references.errors import SessionReferenceError
from dsh_jupyter.session import SessionCorruptError, SessionLockedError, SessionNotFoundError
from dsh_jupyter.store.errors import SessionExistsError, SessionWriteError
from dsh_jupyter.ui.messages import (
    NO_VARIABLE,
    KeptField,
    Said,
    blocked_message,
    describe,
    interpolation_notice,
    model_error_message,
    session_name,
    usage_message,
)

#: Words that must never reach the user: internal classes, functions and settings they did not type.
INTERNAL = ("HostError", "SessionReferenceError", "ModelError", "max_reference_", "encode_session_reference_uri",
            "Traceback", "SESSION_REFERENCE_", "base64url", "session-reference:", "steer()", "send()")

SOURCE_ID = "5bf95342-3bb2-49ea-9826-cbf9184295ae"
TARGET_ID = "c6ce0ef8-83e3-452a-afe9-b65fadd069fc"
TITLES = {SOURCE_ID: "Regional sales Q3", TARGET_ID: "Churn model"}


def said(prompt: str = "", **options: str) -> Said:
    return Said(prompt, {f"--{k}": v for k, v in options.items()}, TARGET_ID, TITLES.get)


def clean(text: str) -> str:
    for word in INTERNAL:
        assert word not in text, f"{word!r} leaked into: {text}"
    assert "\n" not in text
    return text


def reference_error(code: str, **details: object) -> SessionReferenceError:
    return SessionReferenceError(code, "core words the notebook never shows", details=details)


MENTION = format_session_reference_mention(SOURCE_ID, "sales")


def test_every_reference_code_has_its_own_sentence() -> None:
    seen = set()
    for code in sorted(codes.ERROR_CODES):
        text = clean(describe(reference_error(code), said(MENTION)))
        assert "core words" not in text
        seen.add(text)
    assert len(seen) == len(codes.ERROR_CODES)


def test_a_damaged_mention_is_named_by_its_label() -> None:
    prompt = "compare with @[Sales \\] Q3](dsh-session:%%%) please"
    text = clean(describe(reference_error(codes.SESSION_REFERENCE_INVALID_REFERENCE, uri="dsh-session:%%%"),
                          said(prompt)))
    assert text.startswith("the mention @Sales ] Q3 does not point to a session")
    assert "remove or re-pick this mention" in text
    bare = clean(describe(reference_error(codes.SESSION_REFERENCE_INVALID_REFERENCE, uri="dsh-session:abc"),
                          said("see dsh-session:abc")))
    assert "'dsh-session:abc'" in bare and "re-pick" in bare


def test_self_reference_names_the_mention_and_the_session_title_before_its_id() -> None:
    prompt = format_session_reference_mention(TARGET_ID, "me")
    error = reference_error(codes.SESSION_REFERENCE_SELF_REFERENCE, sessionId=TARGET_ID, label="me")
    text = clean(describe(error, said(prompt)))
    assert text.startswith("the mention @me (\u201cChurn model\u201d, c6ce0ef8) is the session this prompt goes to")
    assert "--new" in text


def test_too_many_lists_the_mentions_and_how_many_to_remove() -> None:
    ids = [f"{n}0000000-aaaa" for n in range(4)]
    prompt = " ".join(format_session_reference_mention(i, f"s{n}") for n, i in enumerate(ids))
    text = clean(describe(reference_error(codes.SESSION_REFERENCE_TOO_MANY, count=4, limit=3), said(prompt)))
    assert text == ("this prompt mentions 4 different sessions (@s0, @s1, @s2, @s3) but at most 3 can be "
                    "referenced at once; remove 1 of them")


def test_read_failed_names_the_mention_of_the_missing_session() -> None:
    error = SessionReferenceError(codes.SESSION_REFERENCE_READ_FAILED, "failed",
                                  SessionNotFoundError(SOURCE_ID, "/somewhere"))
    text = clean(describe(error, said(f"see {MENTION}")))
    assert text.startswith("the mention @sales (\u201cRegional sales Q3\u201d, 5bf95342) points to a session that")
    other = SessionReferenceError(codes.SESSION_REFERENCE_READ_FAILED, "failed", OSError("disk on fire"))
    assert "disk on fire" in clean(describe(other, said(MENTION)))


def test_budget_exceeded_names_the_budget_the_user_typed() -> None:
    error = reference_error(codes.SESSION_REFERENCE_BUDGET_EXCEEDED, sessionId=SOURCE_ID, label="sales", budget=16)
    typed = clean(describe(error, said(MENTION, budget="16")))
    assert "cannot fit in 16 bytes" in typed and "raise --budget (you gave 16" in typed and "@sales" in typed
    automatic = clean(describe(error, said(MENTION)))
    assert "%%dsh --budget 65536" in automatic


def test_invalid_settings_name_the_setting_as_typed() -> None:
    text = clean(describe(reference_error(codes.SESSION_REFERENCE_INVALID_CONFIG, setting="max_references",
                                          value=5, limit=3)))
    assert text.startswith("%config DshMagics.max_references = 5 cannot be used; choose 1, 2 or 3")
    budget = clean(describe(reference_error(codes.SESSION_REFERENCE_INVALID_CONFIG,
                                            setting="max_reference_bytes", value=-5), said(budget="-5")))
    assert budget == "--budget takes a positive number of bytes, got -5"
    plain = clean(describe(reference_error(codes.SESSION_REFERENCE_INVALID_CONFIG)))
    assert "remove the mentions" in plain


def test_cancelled() -> None:
    assert clean(describe(reference_error(codes.SESSION_REFERENCE_CANCELLED))) == (
        "preparing the referenced sessions was interrupted")


@pytest.mark.parametrize("kind", sorted(ERROR_KINDS))
def test_every_model_error_kind(kind: str) -> None:
    text = clean(describe(ModelError(kind, "the endpoint said no (HTTP 400)."), said()))
    if kind == "cancelled":
        assert text == "the model call was stopped"
    else:
        assert text.endswith("the endpoint said no (HTTP 400)") and text.startswith("the model")


def test_model_config_errors_use_notebook_settings_and_the_typed_model() -> None:
    error = ModelError("config", "model spec 'x:' names no model after ':'; use 'offline', or a model name "
                                 "with base_url=<OpenAI-compatible endpoint>")
    text = clean(model_error_message(error, said(model="x:")))
    assert "%config DshMagics.base_url" in text and "base_url=" not in text
    unknown = model_error_message(ModelError("config", "unknown model 'nope': give base_url= for a custom "
                                                       "endpoint"), said(model="nope"))
    assert unknown.startswith("unknown model 'nope': set %config DshMagics.base_url for a custom endpoint")
    other = model_error_message(ModelError("config", "the local model needs the optional extra"), said(model="local"))
    assert other.startswith("--model local: ")


def test_session_and_store_errors() -> None:
    cases = {
        SessionNotFoundError(SOURCE_ID): "there is no \u201cRegional sales Q3\u201d (5bf95342) here",
        SessionLockedError("held"): "is open in another kernel or notebook",
        SessionCorruptError("bad json", path="/x/session.jsonl", line=3): "damaged at /x/session.jsonl, line 3",
        SessionExistsError("exists"): "run the cell again",
        SessionWriteError("No space left on device"): "No space left on device); nothing already saved was lost",
    }
    for error, words in cases.items():
        assert words in clean(describe(error, Said(session_id=SOURCE_ID, title_of=TITLES.get)))


def test_busy_interrupts_and_unknown_errors_never_show_class_names() -> None:
    from dsh_jupyter.agent import AgentBusyError, AgentIdleError

    assert "%dsh wait" in clean(describe(AgentBusyError("steer() into it")))
    assert "new %%dsh cell" in clean(describe(AgentIdleError("send() starts a new turn")))
    assert clean(describe(KeyboardInterrupt())) == "interrupted"
    assert clean(describe(ValueError("a session title cannot be empty"))) == "a session title cannot be empty"
    assert "try again" in clean(describe(RuntimeError()))
    assert "permission denied (/x)" in clean(describe(PermissionError(13, "Permission denied", "/x")))


def test_blocked_and_usage_messages() -> None:
    assert blocked_message("no secrets.") == "the prompt was blocked by a hook (no secrets); nothing was written"
    assert blocked_message(None).startswith("the prompt was blocked by a hook (no reason given)")
    assert usage_message("--budget x", "argument -b/--budget: invalid int value: 'x'") == (
        "'%%dsh --budget x': --budget takes a whole number, got 'x'; see %%dsh?")
    assert usage_message("-p up", "argument -p/--placement: invalid choice: 'up' (choose from 'separate', "
                                  "'prompt-prefix')") == (
        "'%%dsh -p up': --placement takes separate or prompt-prefix, got 'up'; see %%dsh?")
    assert usage_message("--model", "argument -m/--model: expected one argument") == (
        "'%%dsh --model': --model needs a value after it; see %%dsh?")
    assert usage_message("--frob", "unrecognized arguments: --frob") == (
        "'%%dsh --frob': unrecognized arguments: --frob; see %%dsh?")


def test_interpolation_notice() -> None:
    assert interpolation_notice([]) is None
    one = interpolation_notice([KeptField("{undefined_var}", NO_VARIABLE)])
    assert one == ("`{undefined_var}` was kept as written: no variable of that name "
                   "(use --no-interpolate to keep braces)")
    several = interpolation_notice([KeptField("{a}", NO_VARIABLE), KeptField("{b}", NO_VARIABLE),
                                    KeptField("{a}", NO_VARIABLE), KeptField("{x.y}", "it could not be filled in")])
    assert several is not None and "\n" not in several
    assert several.startswith("`{a}`, `{b}` were kept as written: no variable of those names; `{x.y}` was kept")


def test_session_names_put_the_title_first() -> None:
    assert session_name(SOURCE_ID, "Regional sales Q3") == "\u201cRegional sales Q3\u201d (5bf95342)"
    assert session_name(SOURCE_ID) == "session 5bf95342"


def test_hostile_labels_are_shown_on_one_line_without_control_characters() -> None:
    prompt = format_session_reference_mention(SOURCE_ID, "\x1b[31mred\x1b[0m\nnext line")
    error = SessionReferenceError(codes.SESSION_REFERENCE_READ_FAILED, "failed", SessionNotFoundError(SOURCE_ID))
    text = clean(describe(error, said(prompt)))
    assert "\x1b" not in text and "@[31mred[0m next line" in text


def test_the_interpolation_notice_names_every_kept_expression() -> None:
    from dsh_jupyter.notebook.magics import interpolate_fields

    text, kept = interpolate_fields('rows {len(df)} of {nothere}, as JSON {"a": 1}, {} {0}', {"df": [1]})
    assert text == 'rows {len(df)} of {nothere}, as JSON {"a": 1}, {} {0}'
    notice = interpolation_notice(kept)
    assert notice is not None and "`{len(df)}`" in notice and "`{nothere}`" in notice
    assert '"a"' not in notice and "`{}`" not in notice and "`{0}`" not in notice
