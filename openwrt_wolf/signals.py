"""Signals that end a task: Ctrl-C (SIGINT), SIGTERM (kill, a CI timeout) and SIGHUP (a closed
terminal) all clean up the same way, as a KeyboardInterrupt where the main thread runs: the
running command's process group is killed by proc.run, temporary files are removed.

The signal is also remembered, because Python drops an exception raised while a finalizer
runs (a ``__del__``, a weakref callback): writers call ``check()`` before they publish a file,
and the task's exit status is 128 + the signal (143 for SIGTERM) even when the
KeyboardInterrupt itself was lost."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []


def _handler(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


@contextlib.contextmanager
def as_interrupt() -> Iterator[None]:
    """While inside: ENDING signals raise KeyboardInterrupt and are remembered. Only the main
    thread can take signals; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _handler) for s in ENDING}
    old_hook = sys.unraisablehook
    sys.unraisablehook = _unraisable
    try:
        yield
    finally:
        sys.unraisablehook = old_hook
        for s, h in old.items():
            signal.signal(s, h)


def keep_off_this_thread() -> None:
    """Block the ending signals in the calling (non-main) thread. A process-directed signal
    goes to any thread that does not block it, and Python runs its handler only when the main
    thread next runs: one taken by a worker thread while the main thread sleeps in a lock
    (waiting for the workers) is never handled, and a TERM left the task waiting 300 s for
    commands nobody stopped. With every thread we start blocking them, the kernel delivers
    them to the main thread, whose wait they interrupt."""
    if threading.current_thread() is not threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, ENDING)


def _unraisable(u: Any) -> None:
    """The KeyboardInterrupt of a signal taken in a finalizer is dropped by Python; the signal
    is remembered (check()), so its traceback is not printed. Anything else is, as always."""
    if not (isinstance(u.exc_value, KeyboardInterrupt) and _received):
        sys.__unraisablehook__(u)


def reset() -> None:
    _received.clear()


def received() -> int | None:
    """The first ending signal since reset(), or None."""
    return _received[0] if _received else None


def check() -> None:
    """KeyboardInterrupt if an ending signal came (also when its exception was lost)."""
    if _received:
        raise KeyboardInterrupt


def describe(signum: int) -> str:
    return "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
