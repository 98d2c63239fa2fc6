"""Presentation: everything a person sees of a session, in a cell, a widget or an exported file.

The sanitiser (:mod:`.markdown`), the cell's conversation model (:mod:`.transcript`), turn views
(:mod:`.render`), display bundles (:mod:`.display`), messages in the user's terms (:mod:`.messages`), the
widgets (:mod:`.widgets`, views in ``static/``), the approval question (:mod:`.approval_widget`) and
exports (:mod:`.export`). Nothing here imports the IPython host: what a
widget needs of it is a :mod:`.protocols` seam the host implements. This package module imports nothing.
"""
