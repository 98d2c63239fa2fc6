"""Where the widgets' views are: ``static/`` beside this module (the anywidget ``_esm`` and ``_css`` files)."""

from __future__ import annotations

from pathlib import Path

#: The folder of ``chat.js``, ``picker.js``, ``prompt.js``, ``approval.js`` and their stylesheets.
STATIC = Path(__file__).with_name("static")
