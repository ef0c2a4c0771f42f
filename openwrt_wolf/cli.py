"""Glue for tasks.py: logging set-up and turning WolfError into one line + exit code."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import CommandError, WolfError

F = TypeVar("F", bound=Callable[..., Any])


def setup_logging(verbose: bool = False) -> None:
    """Commands we run are logged as '$ <line that reproduces it>' on stderr."""
    level = logging.DEBUG if verbose else logging.INFO
    logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr, force=True)


def guarded(fn: F) -> F:
    """Wrap a task body: WolfError -> 'error: ...' on stderr and exit 2; Ctrl-C -> exit 130."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        setup_logging()
        try:
            return fn(*args, **kwargs)
        except CommandError as e:
            print(f"error: {e.details()}", file=sys.stderr)
            raise SystemExit(e.exit_code) from None
        except WolfError as e:
            print(f"error: {e}", file=sys.stderr)
            raise SystemExit(e.exit_code) from None
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            raise SystemExit(130) from None

    return wrapper  # type: ignore[return-value]
