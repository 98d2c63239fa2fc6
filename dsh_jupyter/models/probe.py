"""Which local model servers answer right now, and what they serve (for ``%dsh models``).

Only addresses on this machine (:data:`LOCAL_PROBES`: Ollama on 127.0.0.1:11434, LM Studio on 127.0.0.1:1234)
and the ``base_url`` the user configured are asked, each with a short timeout, so a listing never waits on
the network and never reaches a host the user did not name.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from .catalog import OLLAMA_BASE_URL

#: Seconds a server gets to answer a probe.
PROBE_TIMEOUT = 0.4

#: (family of the ``--model`` spec, models URL, how its answer lists models)
LOCAL_PROBES: tuple[tuple[str, str, str], ...] = (
    ("ollama", OLLAMA_BASE_URL.removesuffix("/v1") + "/api/tags", "ollama"),
    ("lmstudio", "http://127.0.0.1:1234/v1/models", "openai"),
)


@dataclass(frozen=True)
class ServedModel:
    """A model a server that answered serves: the ``--model`` spec to use it, and where it is."""

    spec: str
    model: str
    server: str
    base_url: str | None  # the base_url setting the spec needs (``None``: the spec's family knows it)


def _get(url: str, timeout: float) -> Any:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read(1_000_000))


def _names(payload: Any, shape: str) -> list[str]:
    if not isinstance(payload, dict):
        return []
    entries = payload.get("models") if shape == "ollama" else payload.get("data")
    key = "name" if shape == "ollama" else "id"
    return [str(e[key]) for e in entries or [] if isinstance(e, dict) and isinstance(e.get(key), str)]


def served_models(base_url: str | None = None, timeout: float = PROBE_TIMEOUT) -> list[ServedModel]:
    """What the local servers (and the configured OpenAI-compatible ``base_url``) serve; a server that does not
    answer in ``timeout`` seconds, or answers nonsense, lists nothing."""
    found: list[ServedModel] = []
    probes = list(LOCAL_PROBES)
    if base_url and base_url.startswith(("http://", "https://")):
        probes.append(("", base_url.rstrip("/") + "/models", "openai"))
    for family, url, shape in probes:
        try:
            names = _names(_get(url, timeout), shape)
        except (OSError, ValueError, urllib.error.URLError):
            continue
        server = url.removesuffix("/models") if shape == "openai" else url.removesuffix("/api/tags")
        for name in names:
            if family == "ollama":
                found.append(ServedModel(f"ollama:{name}", name, server, None))
            else:
                found.append(ServedModel(name, name, server, server if family else base_url))
    return found


__all__ = ["LOCAL_PROBES", "PROBE_TIMEOUT", "ServedModel", "served_models"]
