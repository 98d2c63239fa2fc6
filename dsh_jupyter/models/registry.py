"""Model specs: turn ``--model`` strings into providers, pick the default, list the choices.

Specs understood by :func:`resolve_model`:

============================  ===========================================================================
``offline``                   the deterministic keyless model (:class:`~.offline.OfflineModel`)
``local``                     SmolLM2-135M through llama.cpp (extra ``dsh-jupyter[local]``)
``deepseek``                  DeepSeek's default model ``deepseek-v4-flash`` (``$DEEPSEEK_API_KEY``)
``deepseek:<model>``          another DeepSeek model, e.g. ``deepseek:deepseek-reasoner``
``openai:<model>``            OpenAI (``$OPENAI_API_KEY``, ``https://api.openai.com/v1``)
``ollama:<model>``            a local Ollama server (``http://127.0.0.1:11434/v1``, no key)
``<model>`` + ``base_url=``   any OpenAI-compatible endpoint (vLLM, llama.cpp, ...); keyless unless
                              ``api_key_env=`` names the variable holding its key
``<provider>/<model>``        a LiteLLM model id: ``anthropic/claude-sonnet-4-5``, ``gemini/gemini-2.5-flash``,
                              ``azure/<deployment>``, ``openrouter/<org>/<model>``, ``ollama/llama3.1``...
                              (extra ``dsh-jupyter[litellm]``; ``litellm:<id>`` says so explicitly;
                              ``base_url`` is passed on as LiteLLM's ``api_base``)
``<model>``                   a bare ``deepseek-*`` name goes to DeepSeek, a bare ``gpt-*``/``o1``/``o3``/
                              ``o4-*`` name to OpenAI
============================  ===========================================================================

``base_url``, ``api_key_env`` and ``context_window`` override the spec's defaults. An unusable spec raises
``ModelError(kind="config")`` saying what is accepted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .base import ModelError, ModelProvider
from .catalog import (
    DEEPSEEK_BASE_URL,
    DEEPSEEK_DEFAULT_MODEL,
    DEEPSEEK_KEY_ENV,
    OLLAMA_BASE_URL,
    OPENAI_BASE_URL,
    OPENAI_KEY_ENV,
)
from .facts import Prices, litellm_providers, model_facts
from .litellm_provider import COMMON_PROVIDERS, INSTALL_HINT, LiteLLMProvider, key_variable, litellm_installed, split_id
from .local import LOCAL_CONTEXT_WINDOW, LocalModel, missing_local_packages
from .offline import OFFLINE_CONTEXT_WINDOW, OfflineModel
from .openai_compat import SWITCH_HINT, OpenAICompatibleProvider
from .probe import served_models

SPEC_HELP = ("use 'offline', 'local', 'deepseek', 'deepseek:<model>', 'openai:<model>', 'ollama:<model>', "
             "a LiteLLM id such as 'anthropic/claude-sonnet-4-5', or a model name with "
             "base_url=<OpenAI-compatible endpoint>")

DEFAULT_NOTICE = ("Using the offline model (no API key needed). To use DeepSeek, set DEEPSEEK_API_KEY; "
                  "or pick another model with --model (`%dsh models` lists them).")

_OPENAI_NAME = re.compile(r"^(gpt-|o1|o3|o4|chatgpt-)")


def resolve_model(spec: str | None = None, *, base_url: str | None = None, api_key_env: str | None = None,
                  context_window: int | None = None, accepts_images: bool | None = None,
                  prices: Prices | None = None) -> ModelProvider:
    """The provider for ``spec`` (``None``: :func:`default_model_spec`). See the module docstring.

    ``accepts_images`` overrides whether an OpenAI-compatible model is sent images (``None``: the catalog's
    value for its name); the offline and local models ignore it. ``prices`` overrides what a call of the
    model costs (``None``: LiteLLM's model map for hosted providers, else unknown)."""
    if spec is None:
        spec = default_model_spec()[0]
    if not isinstance(spec, str) or not spec.strip():
        raise ModelError("config", f"empty model spec; {SPEC_HELP}")
    spec = spec.strip()
    litellm_id = litellm_model_id(spec)
    if litellm_id is not None and (base_url is None or litellm_installed()):
        # a name such as "openai/gpt-oss-20b" at a base_url of your own needs no LiteLLM to be served
        if not litellm_installed():
            raise ModelError("config", f"{spec!r} is a LiteLLM model id, which needs the LiteLLM extra: "
                                       f"{INSTALL_HINT}; or {SWITCH_HINT}")
        return LiteLLMProvider(litellm_id, api_base=base_url, api_key_env=api_key_env,
                               context_window=context_window, accepts_images=accepts_images, prices=prices)
    family, sep, name = spec.partition(":")
    family_l = family.lower()
    if not sep:
        if family_l == "offline":
            _no_endpoint_options("offline", base_url, api_key_env)
            return OfflineModel()
        if family_l == "local":
            _no_endpoint_options("local", base_url, api_key_env)
            LocalModel.check_available()
            return LocalModel(n_ctx=context_window) if context_window else LocalModel()
        if family_l == "deepseek":
            family_l, name = "deepseek", DEEPSEEK_DEFAULT_MODEL
        elif base_url is not None:
            return OpenAICompatibleProvider(base_url, spec, api_key_env=api_key_env,
                                            context_window=context_window, accepts_images=accepts_images, prices=prices)
        elif spec.lower().startswith("deepseek-"):
            family_l, name = "deepseek", spec
        elif _OPENAI_NAME.match(spec.lower()):
            family_l, name = "openai", spec
        else:
            raise ModelError("config", f"unknown model {spec!r}: give base_url= for a custom endpoint, or {SPEC_HELP}")
    name = name.strip()
    if not name:
        raise ModelError("config", f"model spec {spec!r} names no model after ':'; {SPEC_HELP}")
    if family_l == "deepseek":
        return OpenAICompatibleProvider(base_url or DEEPSEEK_BASE_URL, name,
                                        api_key_env=api_key_env or DEEPSEEK_KEY_ENV,
                                        context_window=context_window, accepts_images=accepts_images, prices=prices,
                                        provider_name="deepseek")
    if family_l == "openai":
        return OpenAICompatibleProvider(base_url or OPENAI_BASE_URL, name, api_key_env=api_key_env or OPENAI_KEY_ENV,
                                        context_window=context_window, accepts_images=accepts_images, prices=prices,
                                        provider_name="openai")
    if family_l == "ollama":
        return OpenAICompatibleProvider(base_url or OLLAMA_BASE_URL, name, api_key_env=api_key_env,
                                        context_window=context_window, accepts_images=accepts_images, prices=prices,
                                        provider_name="ollama")
    if base_url is not None:  # "org:model"-style names of custom servers
        return OpenAICompatibleProvider(base_url, spec, api_key_env=api_key_env, context_window=context_window,
                                        accepts_images=accepts_images, prices=prices)
    raise ModelError("config", f"unknown model family {family!r} in {spec!r}; {SPEC_HELP}")


def litellm_model_id(spec: str) -> str | None:
    """The LiteLLM id ``spec`` names (``litellm:<id>``, or ``<provider>/<model>`` with a provider LiteLLM
    knows, such as ``anthropic/claude-sonnet-4-5``), else ``None``."""
    family, sep, rest = spec.partition(":")
    if sep and family.strip().lower() == "litellm":
        return rest.strip()
    provider, slash, name = spec.partition("/")
    if not slash or ":" in provider or not name.strip():
        return None
    provider = provider.strip().lower()
    return spec if provider in COMMON_PROVIDERS or provider in litellm_providers() else None


def _no_endpoint_options(spec: str, base_url: str | None, api_key_env: str | None) -> None:
    if base_url is not None or api_key_env is not None:
        raise ModelError("config", f"the {spec} model takes no base_url or api_key_env; give a model name with "
                                   "base_url= for an OpenAI-compatible endpoint")


def default_model_spec(env: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """``("deepseek", None)`` when ``DEEPSEEK_API_KEY`` is set, else ``("offline", notice)``."""
    env = os.environ if env is None else env
    if env.get(DEEPSEEK_KEY_ENV, "").strip():
        return "deepseek", None
    return "offline", DEFAULT_NOTICE


@dataclass(frozen=True)
class ModelListing:
    """One row of ``%dsh models``."""

    spec: str
    provider: str
    model: str
    context_window: int | None
    key_env: str | None
    key_present: bool
    available: bool
    note: str
    #: Where the window and prices came from (:data:`~.facts.SOURCE_LITELLM`, :data:`~.facts.SOURCE_TABLE`...).
    facts: str = ""
    #: What a million tokens cost (``free``; ``""``: unknown).
    price: str = ""

    @property
    def needs_key(self) -> bool:
        return self.key_env is not None


#: LiteLLM ids ``%dsh models`` offers (any other id works too).
LITELLM_EXAMPLES = ("anthropic/claude-sonnet-4-5", "anthropic/claude-haiku-4-5", "gemini/gemini-2.5-flash",
                    "gemini/gemini-2.5-pro", "mistral/mistral-large-latest", "azure/<deployment>",
                    "openrouter/<org>/<model>")


def _listing(spec: str, provider: str, model: str, key_env: str | None, key_present: bool, available: bool,
             note: str, *, facts_of: tuple[str, str | None] | None = None, window: int | None = None) -> ModelListing:
    """A row with the model's facts: window (unless given), where they came from, and its price."""
    facts = model_facts(*facts_of) if facts_of else None
    prices = facts.prices if facts else None
    return ModelListing(spec, provider, model, window if window is not None else (facts.context_window if facts
                                                                                    else None),
                        key_env, key_present, available, note, (facts.source or "") if facts else "",
                        prices.describe() if prices else "")


def list_models(env: Mapping[str, str] | None = None, *, base_url: str | None = None,
                probe: bool = True) -> list[ModelListing]:
    """The models worth offering, with whether each can be used right now and what is known of it: the
    keys set, the LiteLLM providers (with the extra), and, with ``probe``, the models local servers and the
    configured ``base_url`` serve (:func:`~.probe.served_models`, a short timeout each)."""
    env = os.environ if env is None else env

    def has(name: str) -> bool:
        return bool(env.get(name, "").strip())

    missing = missing_local_packages()
    rows = [
        ModelListing("offline", "offline", "offline", OFFLINE_CONTEXT_WINDOW, None, True, True,
                     "deterministic, no network; reports what it was sent", "built in", "free"),
        ModelListing("local", "local", "smollm2", LOCAL_CONTEXT_WINDOW, None, True, not missing,
                     "SmolLM2-135M via llama.cpp" if not missing else "needs pip install 'dsh-jupyter[local]'",
                     "built in", "free"),
    ]
    for model, note in ((DEEPSEEK_DEFAULT_MODEL, "default when DEEPSEEK_API_KEY is set"),
                        ("deepseek-chat", ""), ("deepseek-reasoner", "streams its reasoning")):
        spec = "deepseek" if model == DEEPSEEK_DEFAULT_MODEL else f"deepseek:{model}"
        rows.append(_listing(spec, "deepseek", model, DEEPSEEK_KEY_ENV, has(DEEPSEEK_KEY_ENV), has(DEEPSEEK_KEY_ENV),
                             note, facts_of=(model, "deepseek")))
    for model in ("gpt-4.1", "gpt-4o", "gpt-4o-mini", "o3"):
        rows.append(_listing(f"openai:{model}", "openai", model, OPENAI_KEY_ENV, has(OPENAI_KEY_ENV),
                             has(OPENAI_KEY_ENV), "", facts_of=(model, "openai")))
    installed = litellm_installed()
    for model_id in LITELLM_EXAMPLES:
        provider, name = split_id(model_id)
        key_env = key_variable(provider, env)
        present = key_env is None or has(key_env)
        placeholder = "<" in model_id
        note = ("needs " + INSTALL_HINT) if not installed else (
            "put your own name in place of <...>" if placeholder else "")
        rows.append(_listing(model_id, provider, name, key_env, present, installed and present and not placeholder,
                             note, facts_of=None if placeholder else (model_id, provider)))
    if probe:
        for served in served_models(base_url):
            where = f"served at {served.server}" + (f"; needs base_url={served.base_url}" if served.base_url and
                                                   served.base_url != base_url else "")
            provider = "ollama" if served.spec.startswith("ollama:") else "openai-compatible"
            rows.append(_listing(served.spec, provider, served.model, None, True, True, where,
                                 facts_of=(served.model, None)))
    return rows
