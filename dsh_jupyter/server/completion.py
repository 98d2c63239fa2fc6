"""``dsh/api/completion``: ghost-text completions of notebook cells (see :mod:`dsh_jupyter.completion`).

The server extension serves completions, not the kernel: no kernel round trip, so a completion comes while a
cell runs; the page sends what it already has (the cell, the cells above, the names and types its variables
view holds), and each completion is one HTTP request, so cancelling it is closing that request.

- ``GET dsh/api/completion``: whether the server offers completions by default (``enabled``), the debounce
  delay the page defaults to, the model, and what completions cost so far (``usage``, the requests in flight,
  the ids of the ones cancelled lately, the per-hour cap).
- ``POST dsh/api/completion`` with the request as JSON (:func:`dsh_jupyter.completion.context.parse_request`):
  the answer streams as JSON lines, ``{"text": piece}`` for each piece, then ``{"done": true, "cached",
  "backend", "contextBytes"}``; a failure once streaming has begun is a last ``{"error": {code, message}}``
  line. Refused before streaming: 400 (a bad body), 429 (the per-hour cap, with ``Retry-After``), 502 (the
  model failed or cannot be used; the message says why). When the client goes away (the user typed on),
  :meth:`CompletionHandler.on_connection_close` cancels the model's request where it stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from .._json import dumps
from ..completion.config import DshCompletion
from ..completion.context import CompletionContext, CompletionRequest, RequestError, parse_request
from ..completion.service import CapReached, CompletionService
from ..models.base import ModelError
from .errors import ApiError, bad_request
from .handlers import DshApiHandler

#: The key of the :class:`CompletionService` and the options in ``web_app.settings``.
SERVICE_KEY = "dsh_completion"
OPTIONS_KEY = "dsh_completion_options"
#: 429: the per-hour cap is spent. 502: the model failed.
CAPPED = "DSH_COMPLETION_CAP"
MODEL_FAILED = "DSH_COMPLETION_MODEL"
#: The media type of a streamed answer.
NDJSON = "application/x-ndjson"


class CompletionHandler(DshApiHandler):
    """See the module docstring."""

    parameters: frozenset[str] = frozenset()
    _pump: asyncio.Task[None] | None = None
    _gone = False

    @property
    def service(self) -> CompletionService:
        service: CompletionService = self.settings[SERVICE_KEY]
        return service

    @web.authenticated
    @authorized
    async def get(self) -> None:
        try:
            self.params()
        except ApiError as exc:
            self.fail(exc)
            return
        options: DshCompletion = self.settings[OPTIONS_KEY]
        self.reply({"enabled": options.enabled, "debounceMs": options.debounce_ms,
                    "model": options.model or "default", "maxContextBytes": options.max_context_bytes,
                    **self.service.report()})

    @web.authenticated
    @authorized
    async def post(self) -> None:
        try:
            self.params()
            request = self._request()
            context, hit = self.service.start(request)
        except ApiError as exc:
            self.fail(exc)
            return
        except CapReached as exc:
            self.set_header("Retry-After", str(math.ceil(exc.retry_after)))
            self.fail(ApiError(429, CAPPED, str(exc)))
            return
        self.set_header("Content-Type", NDJSON + "; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Accel-Buffering", "no")
        if hit is not None:
            self._line({"text": hit} if hit else None)
            self._line(self._done(context, cached=True))
            self.finish()
            return
        self._pump = asyncio.ensure_future(self._stream(request, context))
        try:
            await self._pump
        except asyncio.CancelledError:
            if not self._gone:
                raise

    def finish(self, *args: Any, **kwargs: Any) -> Any:
        """Keep the JSON-lines type of a streamed answer (jupyter-server's ``APIHandler.finish`` would make any
        body ``application/json``)."""
        streamed = self._headers.get("Content-Type", "").startswith(NDJSON)
        result = super().finish(*args, **kwargs) if not streamed else web.RequestHandler.finish(self, *args, **kwargs)
        return result

    def _request(self) -> CompletionRequest:
        try:
            body = json.loads(self.request.body or b"null")
        except ValueError:
            raise bad_request("the body of a completion request must be JSON (see docs/completion.md)") from None
        try:
            return parse_request(body)
        except RequestError as exc:
            raise bad_request(f"unusable completion request: {exc}") from None

    def _line(self, value: object) -> None:
        if value is not None:
            self.write(dumps(value) + "\n")

    def _done(self, context: CompletionContext, *, cached: bool) -> dict[str, object]:
        name = "cache" if cached else self.service.backend.name
        return {"done": True, "cached": cached, "backend": name, "contextBytes": context.size}

    async def _stream(self, request: CompletionRequest, context: CompletionContext) -> None:
        started = False
        try:
            async with contextlib.aclosing(self.service.stream(request, context)) as pieces:
                async for piece in pieces:
                    self._line({"text": piece})
                    started = True
                    await self.flush()
            self._line(self._done(context, cached=False))
        except StreamClosedError:
            return
        except (ModelError, Exception) as exc:
            if isinstance(exc, ModelError):
                message = f"the completion model failed: {exc}"
                self.log.warning("dsh-jupyter: completion %s failed: %s", request.request_id, exc)
            else:
                self.log.exception("dsh-jupyter: completion %s failed", request.request_id)
                message = "the completion failed (internal error; the server log has the details)"
            if not started:
                self.fail(ApiError(502, MODEL_FAILED, message))
                return
            self._line({"error": {"code": MODEL_FAILED, "message": message}})
        if not self._finished:
            self.finish()

    def on_connection_close(self) -> None:
        """The client went away mid-answer (the user typed on): cancel the model's request."""
        self._gone = True
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()
        super().on_connection_close()


ROUTES: list[tuple[str, type[DshApiHandler]]] = [(r"dsh/api/completion/?", CompletionHandler)]
