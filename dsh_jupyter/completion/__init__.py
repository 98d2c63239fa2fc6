"""Inline (ghost-text) completion of notebook cells, served by the dsh jupyter-server extension.

- :mod:`.context`: the request the page sends (this cell's text around the cursor, the cells above with
  their outputs summarised, the names and types of the user's variables) and the bounded, secret-masked
  context built from it;
- :mod:`.backends`: fill-in-the-middle requests (DeepSeek FIM, llama.cpp ``/infill``, Ollama ``suffix``) and
  the chat-style fallback, and what picks one for the configured model;
- :mod:`.offline`: the offline model's deterministic completions (code, and prose for ``%%dsh`` cells);
- :mod:`.service`: the cache, the per-hour cap, the usage counted apart from session turns, the requests in
  flight;
- :mod:`.config`: the ``c.DshCompletion.*`` options.

Nothing here is imported by ``%load_ext dsh_jupyter``; the server extension loads it on start.
"""
