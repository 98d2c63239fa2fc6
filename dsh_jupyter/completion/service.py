"""The completion service: one per server, shared by every request.

It builds the bounded context of each request, answers from its cache when it can (the same place asked
again, or the user typed the start of the last suggestion), holds the per-hour cap, streams the model's answer
and counts everything in :class:`CompletionUsage`, which is kept apart from the session logs: a completion is
never a session turn. A request whose client went away (the user typed on) is cancelled where it stands and
counted, with its id kept in :attr:`CompletionService.cancelled_ids`.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..models.base import ModelError, Usage
from ..secrets import SecretMasker
from .backends import Backend, ChatBackend, FimBackend, OfflineBackend
from .context import CompletionContext, CompletionRequest, Limits, build_context

if TYPE_CHECKING:
    from .config import DshCompletion

#: Completions the cache keeps.
CACHE_ENTRIES = 256
#: Cancelled request ids kept for :attr:`CompletionService.cancelled_ids`.
CANCELLED_KEPT = 50
HOUR = 3600.0


class CapReached(Exception):
    """The per-hour cap is spent; ``retry_after`` seconds until one request frees up."""

    def __init__(self, cap: int, retry_after: float) -> None:
        minutes = max(1, round(retry_after / 60))
        super().__init__(f"the dsh completion cap of {cap} requests an hour is reached; completions resume in "
                         f"about {minutes} minute{'s' if minutes != 1 else ''} (an administrator can raise "
                         "c.DshCompletion.hourly_cap)")
        self.cap = cap
        self.retry_after = retry_after


@dataclass
class CompletionUsage:
    """What completions cost this server since it started (never mixed into session turns)."""

    requests: int = 0
    served: int = 0
    cached: int = 0
    cancelled: int = 0
    capped: int = 0
    failed: int = 0
    empty: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    model_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["model_seconds"] = round(self.model_seconds, 3)
        return {_camel(k): v for k, v in data.items()}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@dataclass
class _Cached:
    prefix: str
    text: str


@dataclass
class CompletionService:
    """See the module docstring. ``backend`` is made on first use by ``make_backend`` (a model that cannot be
    made is a :class:`~dsh_jupyter.models.base.ModelError` for that request, and the next one tries again)."""

    make_backend: Callable[[], Backend]
    limits: Limits = field(default_factory=Limits)
    max_tokens: int = 64
    hourly_cap: int = 600
    timeout: float = 10.0
    masker: SecretMasker | None = None
    clock: Callable[[], float] = time.monotonic
    usage: CompletionUsage = field(default_factory=CompletionUsage)
    cancelled_ids: deque[str] = field(default_factory=lambda: deque(maxlen=CANCELLED_KEPT))
    in_flight: dict[str, float] = field(default_factory=dict)
    _backend: Backend | None = None
    _cache: OrderedDict[tuple[str, ...], list[_Cached]] = field(default_factory=OrderedDict)
    _sent: deque[float] = field(default_factory=deque)

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = self.make_backend()
        return self._backend

    def context(self, request: CompletionRequest) -> CompletionContext:
        return build_context(request, self.limits, self.masker)

    # -- cache -------------------------------------------------------------------------------------------
    def cached(self, context: CompletionContext) -> str | None:
        """The completion already known for this place: asked again, or typed into (the rest of it)."""
        entries = self._cache.get(context.key())
        if not entries:
            return None
        self._cache.move_to_end(context.key())
        for entry in reversed(entries):
            if context.prefix == entry.prefix:
                return entry.text
            typed = context.prefix[len(entry.prefix):] if context.prefix.startswith(entry.prefix) else None
            if typed and "\n" not in typed and entry.text.startswith(typed) and len(entry.text) > len(typed):
                return entry.text[len(typed):]
        return None

    def remember(self, context: CompletionContext, text: str) -> None:
        entries = self._cache.setdefault(context.key(), [])
        self._cache.move_to_end(context.key())
        entries.append(_Cached(context.prefix, text))
        del entries[:-8]
        while len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)

    # -- cap ---------------------------------------------------------------------------------------------
    def admit(self) -> None:
        """Count one request against the per-hour cap, or :class:`CapReached`."""
        now = self.clock()
        while self._sent and self._sent[0] <= now - HOUR:
            self._sent.popleft()
        if self.hourly_cap and len(self._sent) >= self.hourly_cap:
            self.usage.capped += 1
            raise CapReached(self.hourly_cap, self._sent[0] + HOUR - now)
        self._sent.append(now)

    # -- one completion ----------------------------------------------------------------------------------
    def start(self, request: CompletionRequest) -> tuple[CompletionContext, str | None]:
        """Count ``request`` and build its context; the cached answer when there is one, else admit it
        against the cap (:class:`CapReached`)."""
        self.usage.requests += 1
        context = self.context(request)
        hit = self.cached(context)
        if hit is not None:
            self.usage.cached += 1
            return context, hit
        self.admit()
        return context, None

    async def stream(self, request: CompletionRequest, context: CompletionContext) -> AsyncGenerator[str, None]:
        """The model's completion of ``context`` as it streams; cached and counted when it ends.

        Cancelled (the client went away): counted as cancelled, the id kept, nothing cached."""
        started = self.clock()
        self.in_flight[request.request_id] = started
        pieces: list[str] = []
        try:
            async with asyncio.timeout(self.timeout):
                async for piece in self.backend.stream(context, self.max_tokens):
                    if isinstance(piece, Usage):
                        self.usage.input_tokens += piece.input_tokens
                        self.usage.output_tokens += piece.output_tokens
                    elif piece:
                        pieces.append(piece)
                        yield piece
        except (asyncio.CancelledError, GeneratorExit):  # the client went away mid-answer
            self.usage.cancelled += 1
            self.cancelled_ids.append(request.request_id)
            raise
        except TimeoutError:
            self.usage.failed += 1
            raise ModelError("server", f"the completion took longer than {self.timeout:g} s "
                                        "(c.DshCompletion.timeout) and was given up") from None
        except Exception:
            self.usage.failed += 1
            raise
        finally:
            self.in_flight.pop(request.request_id, None)
            self.usage.model_seconds += self.clock() - started
        text = "".join(pieces)
        self.usage.served += 1
        if not text:
            self.usage.empty += 1
        self.remember(context, text)

    def report(self) -> dict[str, Any]:
        """What ``GET dsh/api/completion`` shows of the service."""
        return {"usage": self.usage.to_json(), "inFlight": sorted(self.in_flight),
                "cancelled": list(self.cancelled_ids), "hourlyCap": self.hourly_cap,
                "sentThisHour": len(self._sent)}

    async def close(self) -> None:
        if self._backend is not None:
            await self._backend.close()


def backend_for(config: DshCompletion) -> Backend:
    """The backend the options name (see :class:`~.config.DshCompletion`); a :class:`ModelError` if unusable."""
    from ..models.registry import default_model_spec, resolve_model

    spec = config.model.strip() or default_model_spec()[0]
    base_url = config.base_url.strip() or None
    key_env = config.api_key_env.strip() or None
    if spec.lower() == "offline":
        return OfflineBackend(delay=config.offline_delay, word_seconds=config.offline_word_seconds)
    family, _, name = spec.partition(":")
    kind = config.fim
    if kind == "auto":
        kind = {"deepseek": "deepseek", "ollama": "ollama"}.get(family.lower(), "off")
    chat_base = base_url
    if kind == "llama.cpp" and base_url:
        chat_base = base_url.rstrip("/").removesuffix("/v1") + "/v1"
    chat = ChatBackend(resolve_model(spec, base_url=chat_base, api_key_env=key_env))
    if kind == "off":
        return chat
    return FimBackend(kind, model=chat.provider.info.model or name, base_url=base_url,  # type: ignore[arg-type]
                      api_key_env=key_env, chat=chat, timeout=config.timeout)


def service_for(config: DshCompletion) -> CompletionService:
    return CompletionService(lambda: backend_for(config), limits=config.limits(), max_tokens=config.max_tokens,
                             hourly_cap=config.hourly_cap, timeout=config.timeout)
