"""The ``dsh-jupyter`` command: find, inspect, locate, export and copy sessions from a shell.

``dsh-jupyter sessions list|search|show|locate|scan|export|reindex|copy`` and ``dsh-jupyter postgres
init|list|search|show|share|unshare``; ``dsh-jupyter COMMAND SUBCOMMAND --help`` explains each. Sessions
come from one store, ``--store DIR`` (default: ``./.dsh/sessions``, or ``$DSH_SESSIONS_DIR``), or from every
store the catalog knows with ``--all``; the ``postgres`` group and ``copy`` ask the database instead.

Exit codes: 0 done (a search that matches nothing is still 0), 1 the session asked for was not found (or
the id prefix is ambiguous), 2 bad arguments (argparse's own code too), 3 the catalog or a log could not be
read.

The package, one module per part: :mod:`.parser` (the argparse tree), :mod:`.app` (``main``: dispatch and
errors), :mod:`.scope` (which stores, which session), :mod:`.sessions` (``list``, ``search``, ``locate``,
``reindex``), :mod:`.show`, :mod:`.scan`, :mod:`.export`, :mod:`.foreign` (other tools' sessions),
:mod:`.postgres`, :mod:`.copy`, :mod:`.output` (escaping, JSON, times) and :mod:`.errors` (exit codes).
Nothing outside the package imports it: the stores, the catalog and the references never depend on the CLI.
"""

from .app import main
from .errors import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, CliError
from .output import escape

__all__ = ["EXIT_FAILED", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_USAGE", "CliError", "escape", "main"]
