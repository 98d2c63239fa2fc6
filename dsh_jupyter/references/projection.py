"""Projection: the part of a session's current surface that a reference carries across.

The rules are pure functions of session events, so they live with the event model
(:mod:`dsh_jupyter.session.projection`), below both the stores (which index the projected words) and the
catalog; this module is the name references and their hosts import them by.
"""

from __future__ import annotations

from ..session.projection import (
    ASSISTANT,
    PROJECTION_SKIPS,
    USER,
    ProjectedMessage,
    ProjectedSession,
    format_version,
    project_event,
    project_surface,
    source_data,
)

__all__ = ["ASSISTANT", "PROJECTION_SKIPS", "USER", "ProjectedMessage", "ProjectedSession", "format_version",
           "project_event", "project_surface", "source_data"]
