"""The notebook as the agent's workspace: what the agent reads of the notebook and how it changes it.

- :mod:`.document`: the cells, outputs and edits as the tools see them, and the ``NotebookDocument`` protocol;
- :mod:`.kernel_record`: the kernel's own record of executed cells (every frontend);
- :mod:`.cell_runner`: running a source as a real cell, on the right thread;
- :mod:`.outputs`: cell outputs read from IPython's bundles and nbformat dicts;
- :mod:`.live_document`: the open notebook in JupyterLab and Notebook 7, over a comm, with edit proposals;
- :mod:`.notebook_tools`: the ``notebook_read``, ``notebook_edit`` and ``notebook_run`` tools;
- :mod:`.edits`: applied edits in the session log and ``%dsh undo``;
- :mod:`.variables` and :mod:`.variable_refs`: the user's variables (the ``variables`` tool, ``@`` variables);
- :mod:`.fix`: the ``%dsh fix`` prompt built from the last error.
"""
