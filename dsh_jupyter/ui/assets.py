"""Where the widgets' views are: ``static/`` beside this module (the anywidget ``_esm`` and ``_css`` files).

The ``.js`` files are built, not written: ``jlpm build`` in ``labextension/`` (which ``pip install`` runs)
bundles each view from ``labextension/src/widgets/<name>.ts`` with the modules it imports, among them the one
TypeScript escape rule ``labextension/src/escape.ts``. The stylesheets are plain files.
"""

from __future__ import annotations

from pathlib import Path

#: The folder of the bundled ``chat.js``, ``picker.js``, ``prompt.js``, ``approval.js`` and their stylesheets.
STATIC = Path(__file__).with_name("static")
