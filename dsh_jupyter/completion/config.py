"""The options of inline completion: ``c.DshCompletion.<name>`` in ``jupyter_server_config.py``.

``DshCompletion`` is configured with the server (its parent is the ``ServerApp``), so
``jupyter lab --DshCompletion.enabled=True`` works too. The JupyterLab side (on/off per user, the debounce
delay, the timeout) is in the settings editor under *Inline Completer*.
"""

from __future__ import annotations

from traitlets import Bool, Enum, Float, Int, TraitError, Unicode, validate
from traitlets.config import Configurable

from .context import Limits


class DshCompletion(Configurable):
    """Ghost-text completions of notebook cells, served by the dsh server extension."""

    enabled = Bool(
        False,
        help="Offer dsh ghost-text completions to every user of this server by default. Each user can still "
        "switch them on or off in the settings editor (Inline Completer, dsh provider), and a notebook's "
        "owner can turn them off for that notebook (metadata dsh.completion = false). Off by default: "
        "completions send the code around the cursor to the model.",
    ).tag(config=True)
    model = Unicode(
        "",
        help="The model that completes, as a model spec (offline, deepseek, deepseek:<model>, ollama:<model>, "
        "openai:<model>, a LiteLLM id, or a name with base_url). Empty: the magics' default (DeepSeek when "
        "DEEPSEEK_API_KEY is set, else the offline model, which completes deterministically).",
    ).tag(config=True)
    base_url = Unicode(
        "",
        help="The model server's address, for an OpenAI-compatible server, Ollama elsewhere than 127.0.0.1, "
        "or llama.cpp (its root, e.g. http://127.0.0.1:8080, whose /infill is used).",
    ).tag(config=True)
    api_key_env = Unicode(
        "",
        help="The environment variable holding the model's API key, when it is not the provider's usual one.",
    ).tag(config=True)
    fim = Enum(
        ["auto", "deepseek", "llama.cpp", "ollama", "off"],
        "auto",
        help="Fill-in-the-middle API to use for code: auto (DeepSeek's for deepseek models, Ollama's suffix for "
        "ollama:<model>, none otherwise), deepseek, llama.cpp (/infill at base_url), ollama, or off (always "
        "ask in chat style). %%dsh cells are always completed in chat style, as prose.",
    ).tag(config=True)
    debounce_ms = Int(
        300,
        help="Milliseconds after the last key press before a completion is asked for: the default of the "
        "dsh provider's 'Debouncer delay' in the settings editor (a user's own value wins).",
    ).tag(config=True)
    max_context_bytes = Int(
        Limits().total_bytes,
        help="Most bytes of context (this cell around the cursor, the cells above with outputs summarised, the "
        "variables) one completion sends to the model.",
    ).tag(config=True)
    max_tokens = Int(64, help="Most tokens one completion may have.").tag(config=True)
    hourly_cap = Int(
        600,
        help="Most completion requests that reach the model in any hour, for the whole server (cached answers "
        "do not count); beyond it requests are refused with 429 until the hour frees up. 0: no cap.",
    ).tag(config=True)
    timeout = Float(10.0, help="Seconds a completion may take before it is given up.").tag(config=True)
    offline_delay = Float(
        0.0,
        help="Seconds the offline model waits before its first word (to show streaming and cancelling in demos).",
    ).tag(config=True)
    offline_word_seconds = Float(
        0.0, help="Seconds the offline model waits between the words it streams.",
    ).tag(config=True)

    @validate("debounce_ms", "hourly_cap")
    def _not_negative(self, proposal: dict[str, object]) -> int:
        value = proposal["value"]
        assert isinstance(value, int)
        if value < 0:
            raise TraitError(f"DshCompletion.{proposal['trait'].name} cannot be negative, "  # type: ignore[attr-defined]
                             f"got {value}")
        return value

    @validate("max_context_bytes")
    def _context_floor(self, proposal: dict[str, int]) -> int:
        value = int(proposal["value"])
        if value < 500:
            raise TraitError(f"DshCompletion.max_context_bytes must be at least 500, got {value}")
        return value

    @validate("max_tokens")
    def _tokens_range(self, proposal: dict[str, int]) -> int:
        value = int(proposal["value"])
        if not 1 <= value <= 2048:
            raise TraitError(f"DshCompletion.max_tokens must be between 1 and 2048, got {value}")
        return value

    @validate("timeout", "offline_delay", "offline_word_seconds")
    def _seconds(self, proposal: dict[str, object]) -> float:
        value = float(proposal["value"])  # type: ignore[arg-type]
        name = proposal["trait"].name  # type: ignore[attr-defined]
        if value < 0 or (name == "timeout" and value == 0):
            raise TraitError(f"DshCompletion.{name} must be a positive number of seconds, got {value}")
        return value

    def limits(self) -> Limits:
        return Limits(total_bytes=self.max_context_bytes)
