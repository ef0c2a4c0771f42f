"""Glue for tasks.py: logging set-up and turning WolfError into one line + exit code."""

from __future__ import annotations

import functools
import logging
import math
import signal
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from . import signals
from .errors import CommandError, WolfError

F = TypeVar("F", bound=Callable[..., Any])


def setup_logging(verbose: bool = False) -> None:
    """Commands we run are logged as '$ <line that reproduces it>' on stderr, every line
    through term.clean (no secret, no control character)."""
    from .term import LogFormatter

    level = logging.DEBUG if verbose else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogFormatter("%(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.captureWarnings(True)  # a library's warning quotes names too: cleaned the same way


def _error(*lines: str) -> None:
    """Error lines on stderr, each cleaned like every other line (term.clean): a newline in
    a name stays inside its line."""
    from .term import clean

    print("\n".join(clean(line, newlines=False) for line in lines), file=sys.stderr)


def guarded(fn: F) -> F:
    """Wrap a task body: WolfError -> 'error: ...' on stderr and exit 2; Ctrl-C, SIGTERM or
    SIGHUP -> cleaned up as KeyboardInterrupt, exit 128 + the signal (130, 143, 129)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        setup_logging()
        signals.reset()
        try:
            with signals.as_interrupt():
                result = fn(*args, **kwargs)
            signals.check()  # a signal whose KeyboardInterrupt Python dropped in a finalizer
            return result
        except CommandError as e:
            _error(f"error: {e.message}", *e.details().split("\n")[1:])
            raise SystemExit(e.exit_code) from None
        except WolfError as e:
            _error(f"error: {e}", *([e.note] if e.note else []))
            raise SystemExit(e.exit_code) from None
        except KeyboardInterrupt:
            sig = signals.received() or signal.SIGINT
            _error(f"error: interrupted{signals.describe(sig)}")
            raise SystemExit(128 + sig) from None

    return wrapper  # type: ignore[return-value]


# invoke converts an option to int/float from its default's type *before* a task body runs,
# so `-j abc` became a ValueError traceback. Tasks take such options as strings (default
# None) and convert them here, inside `guarded`, into one error line.


def integer(
    value: object,
    option: str,
    *,
    default: int,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """An integer option value (``default`` when not given), within its bounds."""
    if value is None or value == "":
        return default
    text = str(value).strip()
    try:
        if len(text) > 30:  # no option counts that high; int() of 5,000 digits raises
            raise ValueError
        n = int(text)
    except ValueError:
        raise WolfError(
            f"{option} {text[:30]!r} is not a whole number", hint=f"e.g. {option} {default}"
        ) from None
    if minimum is not None and n < minimum:
        raise WolfError(f"{option} {n}: must be at least {minimum}")
    if maximum is not None and n > maximum:
        raise WolfError(f"{option} {n}: must be at most {maximum}")
    return n


def number(value: object, option: str, *, default: float, minimum: float = 0.0) -> float:
    """A finite number option value (nan and inf are no durations)."""
    if value is None or value == "":
        return default
    try:
        x = float(str(value).strip())
    except ValueError:
        raise WolfError(
            f"{option} {value!r} is not a number", hint=f"e.g. {option} {default:g}"
        ) from None
    if not math.isfinite(x):
        raise WolfError(
            f"{option} {value!r} is not a finite number", hint=f"e.g. {option} {default:g}"
        )
    if x < minimum:
        raise WolfError(f"{option} {x:g}: must be at least {minimum:g}")
    return x


def required(value: str | None, option: str, *, hint: str) -> str:
    """A value the task cannot do without. Not invoke-required: then `invoke TASK --help`
    would take --help as that value instead of showing the help."""
    if value is None or not str(value).strip():
        raise WolfError(f"{option} is required", hint=hint)
    return str(value)
