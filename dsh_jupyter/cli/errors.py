"""The command's exit codes and the one error it reports on stderr without a traceback."""

from __future__ import annotations

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_FAILED = 3


class CliError(Exception):
    """A failure to report on stderr (``dsh-jupyter: ...``) with an exit code (no traceback)."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code
