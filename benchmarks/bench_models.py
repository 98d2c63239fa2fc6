"""Model provider figures: ``%load_ext`` with the LiteLLM extra installed, and LiteLLM's first-token overhead.

    .venv/bin/python benchmarks/bench_models.py

Goals (issue 25): with ``dsh-jupyter[litellm]`` installed, ``%load_ext dsh_jupyter`` still takes ≤ 150 ms
(beside importing IPython alone, the baseline) and imports neither ``litellm`` nor ``openai``. The time to
the first streamed token through LiteLLM is measured beside the OpenAI-compatible path on the same loopback
server (``tests/fake_wire.py``, chat-completions format, warm providers, median of 30 requests each): the
LiteLLM path may add at most 25 ms. Loading LiteLLM itself (once per kernel, on the first request, in a
worker thread) is reported too, without a goal: it is LiteLLM's own import time.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for folder in (REPO, REPO / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from benchmarks._summary import goal  # noqa: E402
from benchmarks.bench_notebook import measure_load  # noqa: E402

NAME = "bench_models"
LOAD_GOAL_S = 0.150
OVERHEAD_GOAL_S = 0.025
REQUESTS = 30
_MODULES_SCRIPT = ("import sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
                   "InteractiveShell.instance().extension_manager.load_extension('dsh_jupyter')\n"
                   "print(' '.join(m for m in ('litellm', 'openai') if m in sys.modules))")
_IMPORT_SCRIPT = ("import time\nt = time.perf_counter()\nfrom dsh_jupyter.models.litellm_provider import load_litellm\n"
                  "load_litellm()\nprint(time.perf_counter() - t)")


async def _first_token(provider: object, request: object) -> float:
    from dsh_jupyter.models.base import TextDelta

    started = time.perf_counter()
    first = None
    async for event in provider.stream(request):  # type: ignore[attr-defined]
        if first is None and isinstance(event, TextDelta):
            first = time.perf_counter() - started
    assert first is not None, "the fake server streamed no text"
    return first


async def measure_first_tokens() -> dict[str, float]:
    from fake_openai import text_reply
    from fake_wire import FakeWireServer

    from dsh_jupyter.models.base import ModelRequest
    from dsh_jupyter.models.litellm_provider import LiteLLMProvider
    from dsh_jupyter.models.openai_compat import OpenAICompatibleProvider
    from dsh_jupyter.session.messages import user_message

    server = FakeWireServer()
    request = ModelRequest([user_message("hello")], system="Be brief.")
    providers = {"openai-compatible": OpenAICompatibleProvider(server.base_url, "gpt-4o", api_key="sk-bench"),
                 "litellm": LiteLLMProvider("openai/gpt-4o", api_base=server.base_url, api_key="sk-bench")}
    times: dict[str, list[float]] = {name: [] for name in providers}
    try:
        for provider in providers.values():  # warm: SDK and LiteLLM loaded, connections made
            server.queue(text_reply("warm", "up"))
            await _first_token(provider, request)
        for _ in range(REQUESTS):  # interleaved, so both paths see the same machine load
            for name, provider in providers.items():
                server.queue(text_reply("Hel", "lo"))
                times[name].append(await _first_token(provider, request))
    finally:
        for provider in providers.values():
            await provider.close()  # type: ignore[attr-defined]
        server.close()
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    import importlib.util

    if importlib.util.find_spec("litellm") is None:
        print("the LiteLLM extra is not installed: pip install -e '.[litellm]'", file=sys.stderr)
        return 1
    print("models (LiteLLM extra installed):")
    load = measure_load()
    ok = goal(NAME, "%load_ext dsh_jupyter with the litellm extra", f"{load['load_ext'] * 1000:.0f} ms",
              f"≤ {LOAD_GOAL_S * 1000:.0f} ms", f"import IPython {load['ipython'] * 1000:.0f} ms",
              load["load_ext"] <= LOAD_GOAL_S)
    with tempfile.TemporaryDirectory() as folder:
        loaded = subprocess.run([sys.executable, "-c", _MODULES_SCRIPT], capture_output=True, text=True,
                                cwd=folder, env=env, check=True).stdout.strip()
        imported = float(subprocess.run([sys.executable, "-c", _IMPORT_SCRIPT], capture_output=True, text=True,
                                        cwd=folder, env=env, check=True).stdout.strip().splitlines()[-1])
    ok &= goal(NAME, "litellm/openai imported by %load_ext", loaded or "none", "none", "-", not loaded)
    print(f"  loading LiteLLM (first request of a kernel, in a worker thread): {imported:.2f} s")
    first = asyncio.run(measure_first_tokens())
    overhead = first["litellm"] - first["openai-compatible"]
    ok &= goal(NAME, "first token via LiteLLM, above OpenAI-compatible path", f"{overhead * 1000:+.1f} ms",
               f"≤ {OVERHEAD_GOAL_S * 1000:.0f} ms", f"OpenAI-compatible {first['openai-compatible'] * 1000:.1f} ms "
               f"(LiteLLM {first['litellm'] * 1000:.1f} ms)", overhead <= OVERHEAD_GOAL_S)
    print(json.dumps({"first_token_ms": {k: round(v * 1000, 2) for k, v in first.items()}}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
