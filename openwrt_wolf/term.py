"""The terminal: one rich Console, wide enough when output goes to a file or a pipe."""

from __future__ import annotations

import os
import sys

from rich.console import Console


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", "200"))
    return Console(file=stream, width=width, stderr=stderr)
