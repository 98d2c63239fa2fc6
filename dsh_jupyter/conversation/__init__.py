"""One transcript model for every view of a conversation: the ``%%dsh`` cell, the chat and pick panels and
their static copies, exports and ``sessions show``.

- :mod:`.items`: the item types (prompts, answers, reasoning, checkpoints, harness notes, tool calls,
  reference contexts, notices, turn ends);
- :mod:`.fold`: :class:`~.fold.Transcript`, the one fold of a conversation into items;
- :mod:`.log_feed`: stored session events into the fold (the live input, agent events, is adapted at its
  source: :mod:`dsh_jupyter.agent.transcript_feed`);
- :mod:`.limits`: how much text an item keeps, per view; :mod:`.calls`: a tool call in a few words;
  :mod:`.usage`: a turn's token counts; :mod:`.tally`: what a streamed export counted.

Pure Python over session events: no IPython, widget or presentation import. This package module imports
nothing, so a view loads only the parts it uses.
"""
