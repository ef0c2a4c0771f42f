"""Signals that end a task: Ctrl-C (SIGINT), SIGTERM (kill, a CI timeout) and SIGHUP (a closed
terminal) all clean up the same way, as a KeyboardInterrupt where the main thread runs: the
running command's process group is killed by proc.run, temporary files are removed.

The signal is also remembered, because Python drops an exception raised while a finalizer
runs (a ``__del__``, a weakref callback): writers call ``check()`` before they publish a file,
and the task's exit status is 128 + the signal (143 for SIGTERM) even when the
KeyboardInterrupt itself was lost."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []
_holding = 0  # held() blocks the main thread is inside
_held: list[int] = []  # signals that came in them, raised when the outermost one ends


def _handler(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    if _holding:
        _held.append(signum)
        return
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


@contextlib.contextmanager
def held() -> Iterator[None]:
    """While inside (in the main thread, under as_interrupt): an ending signal is remembered
    and raised as KeyboardInterrupt when the block ends, not in its middle. For what must not
    be cut in two: a command's start and its registration (raised between them, inside
    Popen, it left the command running, known to nobody), and the stop of the running
    commands, which a second Ctrl-C must not end before their KILL. Elsewhere: nothing."""
    global _holding
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _holding += 1
    try:
        yield
    finally:
        _holding -= 1  # first: a signal from here on raises in the handler itself
        if not _holding and _held:
            _held.clear()
            raise KeyboardInterrupt


def keep_off_this_thread() -> None:
    """Block the ending signals in the calling (non-main) thread. A process-directed signal
    goes to any thread that does not block it, and Python runs its handler only when the main
    thread next runs: one taken by a worker thread while the main thread sleeps in a lock
    (waiting for the workers) is never handled, and a TERM left the task waiting 300 s for
    commands nobody stopped. With every thread we start blocking them, the kernel delivers
    them to the main thread, whose wait they interrupt."""
    if threading.current_thread() is not threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, ENDING)


class Watch:
    """Calls ``on_ending`` (proc.stop_all) when an ending signal arrives, from a thread of
    its own. CPython runs a signal's Python handler only when the main thread next runs
    bytecode, and a main thread asleep in a lock's wait (``future.result()``, ``wait()``,
    a pool's shutdown) is woken only when the kernel hands it the signal during that wait. A
    signal that came just before the wait began (after the last check, before the futex:
    under load, 1 run in 10) was handled at C level and then waited, with the commands, for
    300 s. The C handler writes the signal's number to the wakeup fd whichever thread it
    runs on (``signal.set_wakeup_fd``); this thread reads it and stops the commands, so the
    futures end and the main thread wakes to its KeyboardInterrupt. Main thread only (the
    wakeup fd is the process's one); a previous one still gets the bytes."""

    def __init__(self, on_ending: Callable[[], None]) -> None:
        self.on_ending = on_ending
        self.r = self.w = self.old = -1
        self.thread: threading.Thread | None = None
        self.stopped = False

    def start(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread can set the wakeup fd (and takes the signals)
        self.r, self.w = os.pipe()
        os.set_blocking(self.w, False)  # a signal handler never blocks on it
        self.thread = threading.Thread(target=self._watch, name="stop-on-signal", daemon=True)
        self.thread.start()
        self.old = signal.set_wakeup_fd(self.w, warn_on_full_buffer=False)

    def _watch(self) -> None:
        keep_off_this_thread()
        ending = set(ENDING)
        while True:
            data = os.read(self.r, 256)
            sigs = bytes(b for b in data if b)  # 0 is close()'s "done"
            if sigs and self.old >= 0:  # whoever had the wakeup fd before still hears them
                with contextlib.suppress(OSError):
                    os.write(self.old, sigs)
            if ending & set(sigs) and not self.stopped:
                self.stopped = True
                self.on_ending()
            if not data or 0 in data:
                return

    def close(self) -> bool:
        """Stop watching, after the signals already written are handled (``on_ending``
        included); whether one of them called it."""
        if self.thread is None:
            return False
        signal.set_wakeup_fd(self.old)
        with contextlib.suppress(OSError):
            os.write(self.w, b"\0")
        self.thread.join()
        os.close(self.r)
        os.close(self.w)
        self.thread = None
        return self.stopped


def _unraisable(u: Any) -> None:
    """The KeyboardInterrupt of a signal taken in a finalizer is dropped by Python; the signal
    is remembered (check()), so its traceback is not printed. Anything else is, as always."""
    if not (isinstance(u.exc_value, KeyboardInterrupt) and _received):
        sys.__unraisablehook__(u)


def reset() -> None:
    _received.clear()
    _held.clear()


def received() -> int | None:
    """The first ending signal since reset(), or None."""
    return _received[0] if _received else None


def check() -> None:
    """KeyboardInterrupt if an ending signal came (also when its exception was lost)."""
    if _received:
        raise KeyboardInterrupt


def describe(signum: int) -> str:
    return "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
