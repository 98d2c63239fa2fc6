"""The harness home, as the tools have always imported it: :mod:`dsh_jupyter.home` holds it.

It lives outside this package so that the catalog and the session sources can find the home without
importing the tools (asyncio, the bash tool and the jobs: about a fifth of a fresh process's catalog import).
"""

from __future__ import annotations

from ..home import DEFAULT_DSH_HOME, expand_home, resolve_dsh_home

__all__ = ["DEFAULT_DSH_HOME", "expand_home", "resolve_dsh_home"]
