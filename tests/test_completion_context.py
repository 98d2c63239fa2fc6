"""Inline completion without a server: the request read strictly, the bounded and masked context, the offline
model's completions, the cache, the per-hour cap and which backend the options pick."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dsh_jupyter.completion.backends import (
    ChatBackend,
    FimBackend,
    OfflineBackend,
    chat_request,
    deepseek_fim_request,
    fim_pieces,
    llamacpp_infill_request,
    ollama_generate_request,
)
from dsh_jupyter.completion.config import DshCompletion
from dsh_jupyter.completion.context import (
    CellAbove,
    CompletionRequest,
    Limits,
    RequestError,
    Variable,
    build_context,
    parse_request,
)
from dsh_jupyter.completion.offline import complete_code, complete_prose, known_names
from dsh_jupyter.completion.service import CapReached, CompletionService, backend_for
from dsh_jupyter.models.base import ModelError, Usage
from dsh_jupyter.models.offline import OfflineModel
from dsh_jupyter.secrets import MASK, SecretMasker

SECRET = "sk-live-0123456789abcdef"
MASKER = SecretMasker({"MY_API_KEY": SECRET})


def request(prefix: str, suffix: str = "", *, mode: str = "code", cells: tuple[CellAbove, ...] = (),
            variables: tuple[Variable, ...] = ()) -> CompletionRequest:
    return CompletionRequest("r1", prefix, suffix, mode=mode, cells=cells, variables=variables)  # type: ignore[arg-type]


def context_of(prefix: str, suffix: str = "", **kwargs: Any) -> Any:
    return build_context(request(prefix, suffix, **kwargs), masker=MASKER)


# -- the request -------------------------------------------------------------------------------------------
def test_a_full_request_is_read() -> None:
    parsed = parse_request({"requestId": "a1", "prefix": "x = ", "suffix": "\n", "language": "python",
                            "mode": "prose",
                            "cells": [{"kind": "markdown", "source": "# Title", "outputs": ""}],
                            "variables": [{"name": "df", "type": "DataFrame 3×2"}]})
    assert parsed.mode == "prose" and parsed.cells == (CellAbove("markdown", "# Title", ""),)
    assert parsed.variables == (Variable("df", "DataFrame 3×2"),)


@pytest.mark.parametrize(("body", "says"), [
    (None, "JSON object"),
    ({"prefix": "x"}, "'requestId'"),
    ({"requestId": "a"}, "'prefix' is missing"),
    ({"requestId": "a", "prefix": 3}, "'prefix' must be a string"),
    ({"requestId": "a", "prefix": "", "mode": "poem"}, "'mode' must be 'code' or 'prose'"),
    ({"requestId": "a", "prefix": "", "cells": "x"}, "'cells' must be a list"),
    ({"requestId": "a", "prefix": "x" * 200_001}, "more than the 200,000"),
    ({"requestId": "a", "prefix": "", "variables": [{"name": 1}]}, "'name' must be a string"),
])
def test_bad_requests_say_which_field(body: object, says: str) -> None:
    with pytest.raises(RequestError, match=says):
        parse_request(body)


# -- the context -------------------------------------------------------------------------------------------
def test_a_200_cell_notebook_fits_the_budget_nearest_cells_kept() -> None:
    cells = tuple(CellAbove("code", f"value_{i} = compute({i})\n" * 5, f"<Figure {i}>" * 20) for i in range(200))
    context = context_of("x" * 20_000 + "\nnear = ", "\nafter()\n" + "y" * 20_000, cells=cells,
                         variables=tuple(Variable(f"v{i}", "int") for i in range(100)))
    assert context.size <= Limits().total_bytes
    assert context.prefix.endswith("\nnear = ") and context.suffix.startswith("\nafter()")
    assert "value_199" in context.above and "value_0 " not in context.above
    assert context.above.index("value_198") < context.above.index("value_199")  # nearest last
    assert set(context.clipped) == {"prefix", "suffix", "cells", "variables"}
    assert "# Out: <Figure 199>" in context.above


def test_secrets_are_masked_everywhere() -> None:
    context = context_of(f"key = '{SECRET}'\n", f"# {SECRET}", cells=(CellAbove("code", f"k='{SECRET}'", SECRET),))
    text = context.prefix + context.suffix + context.above
    assert SECRET not in text and text.count(MASK) == 4


def test_markdown_cells_and_outputs_are_comments() -> None:
    context = context_of("x", cells=(CellAbove("markdown", "# Sales\nQ3 numbers", ""),
                                     CellAbove("code", "df", "   a  b\n0  1  2")))
    assert context.above == "# # Sales\n# Q3 numbers\n\ndf\n# Out: a b 0 1 2"


def test_a_small_budget_is_held() -> None:
    context = build_context(request("é" * 5000, "ü" * 5000), Limits(total_bytes=1000), MASKER)
    assert context.size <= 1000 and context.prefix and context.suffix


# -- the offline model -------------------------------------------------------------------------------------
def test_offline_code_completions_are_deterministic() -> None:
    radius = (CellAbove("code", "import numpy as np\nradius = 2.5", ""),)
    assert complete_code(context_of("rad", cells=radius)) == "ius"
    assert complete_code(context_of("print(", cells=radius)) == "radius)"
    assert complete_code(context_of("x = n", cells=radius)) == "p"
    assert complete_code(context_of("for ", variables=(Variable("rows", "list"),))) == "item in rows:"
    assert complete_code(context_of("\n", variables=(Variable("df", "DataFrame 3×2"),))) == "df.head()"
    assert complete_code(context_of("np.ra", cells=radius)) == ""  # attributes: no guessing
    assert complete_code(context_of("zzz")) == ""
    assert known_names(context_of("def area(r):\n    return r", variables=(Variable("df", "x"),))) == ["df", "area"]


def test_offline_prose_is_never_code() -> None:
    variables = (Variable("sales", "DataFrame"),)
    assert complete_prose(context_of("%%dsh\n", mode="prose", variables=variables)) == \
        "Explain what `sales` shows and what stands out."
    assert complete_prose(context_of("%%dsh\nSummarise", mode="prose", variables=variables)) == \
        " what stands out in `sales`, in plain words."
    assert complete_prose(context_of("%%dsh\nDone.", mode="prose")) == " Then suggest one next step."


def test_the_offline_backend_streams_words_and_usage() -> None:
    async def run() -> list[Any]:
        return [p async for p in OfflineBackend().stream(context_of("%%dsh\n", mode="prose"), 64)]

    pieces = asyncio.run(run())
    text = "".join(p for p in pieces if isinstance(p, str))
    assert text == "Explain what the results above shows and what stands out."
    assert len(pieces) > 3 and isinstance(pieces[-1], Usage)


# -- the request builders ----------------------------------------------------------------------------------
def test_fim_requests_carry_prefix_and_suffix() -> None:
    context = context_of("y = ", "\nprint(y)", cells=(CellAbove("code", "x = 1", ""),),
                         variables=(Variable("x", "int"),))
    deepseek = deepseek_fim_request(context, "deepseek-chat", 32, "https://api.deepseek.com/v1")
    assert deepseek.url == "https://api.deepseek.com/beta/completions"
    assert deepseek.body["prompt"] == "# Variables in the kernel: x (int)\n\nx = 1\n\ny = "
    assert deepseek.body["suffix"] == "\nprint(y)" and deepseek.body["max_tokens"] == 32
    infill = llamacpp_infill_request(context, 32, "http://127.0.0.1:8080/v1")
    assert infill.url == "http://127.0.0.1:8080/infill" and infill.body["input_prefix"] == "y = "
    assert infill.body["input_extra"][0]["text"].startswith("# Variables")
    ollama = ollama_generate_request(context, "qwen2.5-coder", 32)
    assert ollama.url == "http://127.0.0.1:11434/api/generate" and ollama.stream_format == "ndjson"
    assert ollama.body["suffix"] == "\nprint(y)"


def test_stream_events_of_each_api() -> None:
    assert fim_pieces({"content": "ab", "stop": False}) == ["ab"]
    assert fim_pieces({"content": "", "stop": True, "tokens_evaluated": 9, "tokens_predicted": 2}) == [Usage(9, 2)]
    assert fim_pieces({"response": "c", "done": False}) == ["c"]
    assert fim_pieces({"response": "", "done": True, "prompt_eval_count": 5, "eval_count": 1}) == [Usage(5, 1)]
    assert fim_pieces({"choices": [{"text": "d"}]}) == ["d"]
    assert fim_pieces({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}) == [Usage(3, 4)]


def test_chat_fallback_marks_the_cursor_and_stops_at_a_fence() -> None:
    context = context_of("%%dsh\nShow ", "", mode="prose")
    chat = chat_request(context, 40)
    assert "Never write code" in (chat.system or "")
    assert "Show <CURSOR>" in chat.messages[0]["content"][0]["text"]
    model = OfflineModel()
    model.queue("the totals\n```python\nprint(1)\n```")
    backend = ChatBackend(model)

    async def run() -> str:
        return "".join([p async for p in backend.stream(context, 40) if isinstance(p, str)])

    assert asyncio.run(run()).strip() == "the totals"


# -- the service -------------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def served(service: CompletionService, req: CompletionRequest) -> tuple[str, bool]:
    async def run() -> tuple[str, bool]:
        context, hit = service.start(req)
        if hit is not None:
            return hit, True
        return "".join([p async for p in service.stream(req, context)]), False

    return asyncio.run(run())


def test_the_cache_answers_the_same_place_and_typing_into_the_suggestion() -> None:
    service = CompletionService(OfflineBackend, masker=MASKER)
    cells = (CellAbove("code", "radius_of_circle = 1", ""),)
    assert served(service, request("rad", cells=cells)) == ("ius_of_circle", False)
    assert served(service, request("rad", cells=cells)) == ("ius_of_circle", True)
    assert served(service, request("radius_", cells=cells)) == ("of_circle", True)
    assert served(service, request("rad", "\nother", cells=cells)) == ("ius_of_circle", False)
    usage = service.usage
    assert (usage.requests, usage.cached, usage.served) == (4, 2, 2) and usage.output_tokens > 0


def test_the_hourly_cap_refuses_then_frees_up() -> None:
    clock = Clock()
    service = CompletionService(OfflineBackend, hourly_cap=2, clock=clock, masker=MASKER)
    served(service, request("a = 1\na"))
    served(service, request("b = 1\nb"))
    assert served(service, request("a = 1\na")) == ("", True)  # cached: not counted
    with pytest.raises(CapReached, match=r"cap of 2 requests an hour is reached; completions resume in about 60 "
                                         r"minutes .*c\.DshCompletion\.hourly_cap"):
        served(service, request("c = 1\nc"))
    assert service.usage.capped == 1
    clock.now += 3601
    served(service, request("c = 1\nc"))


def test_a_cancelled_completion_is_counted_and_not_cached() -> None:
    service = CompletionService(lambda: OfflineBackend(delay=5), masker=MASKER)
    req = request("%%dsh\n", mode="prose")

    async def run() -> None:
        context, _ = service.start(req)

        async def consume() -> None:
            async for _piece in service.stream(req, context):
                pass

        task = asyncio.ensure_future(consume())
        while "r1" not in service.in_flight:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert service.usage.cancelled == 1 and list(service.cancelled_ids) == ["r1"] and not service.in_flight
    assert service.cached(service.context(req)) is None


def test_a_slow_model_times_out_with_a_message() -> None:
    service = CompletionService(lambda: OfflineBackend(delay=5), timeout=0.05, masker=MASKER)
    with pytest.raises(ModelError, match=r"longer than 0.05 s \(c.DshCompletion.timeout\)"):
        served(service, request("%%dsh\n", mode="prose"))
    assert service.usage.failed == 1


# -- the options -------------------------------------------------------------------------------------------
def test_the_options_pick_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    assert isinstance(backend_for(DshCompletion()), OfflineBackend)
    deepseek = backend_for(DshCompletion(model="deepseek:deepseek-chat"))
    assert isinstance(deepseek, FimBackend) and deepseek.kind == "deepseek" and deepseek.model == "deepseek-chat"
    ollama = backend_for(DshCompletion(model="ollama:qwen2.5-coder"))
    assert isinstance(ollama, FimBackend) and ollama.kind == "ollama"
    assert isinstance(backend_for(DshCompletion(model="openai:gpt-4o")), ChatBackend)
    assert isinstance(backend_for(DshCompletion(model="deepseek", fim="off")), ChatBackend)
    llama = backend_for(DshCompletion(model="qwen", base_url="http://127.0.0.1:8080", fim="llama.cpp"))
    assert isinstance(llama, FimBackend) and llama.request(context_of("x"), 8).url == "http://127.0.0.1:8080/infill"
    with pytest.raises(ModelError, match="needs the server's address"):
        backend_for(DshCompletion(model="ollama:q", fim="llama.cpp"))


@pytest.mark.parametrize(("name", "value", "says"), [
    ("hourly_cap", -1, "cannot be negative"), ("max_context_bytes", 10, "at least 500"),
    ("max_tokens", 0, "between 1 and 2048"), ("timeout", 0, "positive number of seconds"),
])
def test_bad_options_say_what_is_allowed(name: str, value: object, says: str) -> None:
    from traitlets import TraitError

    with pytest.raises(TraitError, match=says):
        DshCompletion(**{name: value})


def test_every_option_is_in_the_docs_table() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "completion.md").read_text(encoding="utf-8")
    for name in DshCompletion.class_trait_names(config=True):
        default = DshCompletion.class_traits()[name].default_value
        shown = f'"{default}"' if isinstance(default, str) else str(default)
        assert f"| `{name}` | `{shown}` |" in page, f"docs/completion.md does not list {name} with its default"
