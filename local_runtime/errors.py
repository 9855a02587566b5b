"""What the command line says when the person at the terminal can fix what went wrong."""

from __future__ import annotations


class UserError(Exception):
    """A mistake with a known fix (a missing file, a taken port, an engine not started): `blackbox`
    prints it as one line, the problem then the fix, and exits 2 as argparse does for a bad option.
    The traceback is shown only with --debug."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}; {fix}")
