"""``POST dsh/api/notebook``: the server-side notebook applier (:mod:`.shared_notebook`) over HTTP.

The one endpoint of the extension that writes. A request is authenticated either by jupyter-server (a person,
a script with the server's token) or by the key this server gave its kernels (:data:`~.shared_notebook.KEY_HEADER`);
the path must be a notebook under the server root.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.auth.identity import User
from jupyter_server.base.handlers import APIHandler
from tornado import web

from .._json import dumps
from ..workspace.document import NotebookError, edit_from_arguments
from .shared_notebook import KEY_HEADER, NotebookApplier, error_code, key_matches

#: The tornado settings keys of the applier and of the kernels' key.
APPLIER_KEY = "dsh_notebook_applier"
KERNEL_KEY = "dsh_kernel_key"
#: Who a kernel's request is (jupyter-server needs a user).
KERNEL_USER = User(username="dsh-kernel", name="the notebook's kernel")
_OPS = ("read", "apply", "outputs")


class NotebookHandler(APIHandler):
    auth_resource = "dsh"

    def _kernel_asks(self) -> bool:
        return key_matches(self.request.headers.get(KEY_HEADER), str(self.settings.get(KERNEL_KEY) or ""))

    async def prepare(self) -> None:  # type: ignore[override]
        if self._kernel_asks():
            self.current_user = KERNEL_USER
            return
        await super().prepare()

    def check_xsrf_cookie(self) -> None:
        if not self._kernel_asks():
            super().check_xsrf_cookie()

    def _fail(self, status: int, code: str, message: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(dumps({"error": {"code": code, "message": message}, "message": message}))

    @web.authenticated
    @authorized
    async def post(self) -> None:
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            return self._fail(400, "bad-request", "the request body is not JSON")
        if not isinstance(body, dict):
            return self._fail(400, "bad-request", "the request body must be a JSON object")
        op = body.get("op")
        if op not in _OPS:
            return self._fail(400, "bad-request", f"'op' must be one of {', '.join(_OPS)}, got {op!r}")
        path = await self._path(body)
        if path is None:
            return None
        applier: NotebookApplier = self.settings[APPLIER_KEY]
        try:
            result = await self._run(applier, op, path, body)
        except NotebookError as exc:
            status, code = error_code(exc)
            return self._fail(status, code, str(exc))
        except ValueError as exc:
            return self._fail(400, "bad-request", str(exc))
        result.setdefault("path", path)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(dumps(result))

    async def _path(self, body: dict[str, Any]) -> str | None:
        """The notebook: ``path`` (relative to the root), or the one the session of ``kernel_id`` runs (its path
        now, after a rename too); ``None`` once the error is sent."""
        kernel_id, path = body.get("kernel_id"), body.get("path")
        if isinstance(kernel_id, str) and kernel_id:
            sessions = await self.session_manager.list_sessions()  # type: ignore[no-untyped-call]
            path = next((s.get("path") for s in sessions if (s.get("kernel") or {}).get("id") == kernel_id), None)
            if not isinstance(path, str):
                self._fail(404, "not-found", "no notebook session of this server runs this kernel (it was started "
                           "from a console, or its notebook was closed); nothing was changed")
                return None
        if not isinstance(path, str) or not path.endswith(".ipynb") or path.startswith("/") \
                or ".." in path.split("/"):
            self._fail(400, "bad-request", f"'path' must name a .ipynb under the server root, got {path!r}")
            return None
        return path

    async def _run(self, applier: NotebookApplier, op: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if op == "read":
            return await applier.read(path)
        if op == "apply":
            edit = edit_from_arguments(body.get("edit"))
            if edit is None:
                raise ValueError("'edit' is not an edit (action, cell_id, source, cell_type, position, metadata, "
                                 "tags)")
            return await applier.apply(path, edit)
        cell_id, outputs, count = body.get("cell_id"), body.get("outputs"), body.get("execution_count")
        if not isinstance(cell_id, str) or not isinstance(outputs, list) \
                or not all(isinstance(o, dict) for o in outputs) \
                or not (count is None or (isinstance(count, int) and not isinstance(count, bool))):
            raise ValueError("'outputs' needs a cell_id, a list of nbformat outputs and an execution_count")
        return await applier.outputs(path, cell_id, outputs, count)


ROUTE = (r"dsh/api/notebook/?", NotebookHandler)
