"""User-facing errors: the CLI prints ``error: <message>`` and ``hint: <hint>`` and exits 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (arguments, files, catalog). Never shown with a traceback."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
