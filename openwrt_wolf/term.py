"""The terminal: one rich Console, wide enough when output goes to a file or a pipe; and the
progress display of long work (rich on a terminal, plain periodic lines in logs).

Everything printed passes ``clean``: no secret (secrets.scrub) and no control character
from a name, a file or a record reaches the terminal or a log (escape.printable)."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

from rich.console import Console
from rich.errors import MarkupError
from rich.text import Text

from . import signals
from .trust import escape, secrets


def clean(text: str, *, newlines: bool = True) -> str:
    """A line (or lines) as it may be shown: secrets scrubbed, control characters escaped."""
    return escape.printable(secrets.scrub(text), newlines=newlines)


class SafeConsole(Console):
    """rich's Console, but every string it renders (print, table cells, titles) is cleaned,
    and text that is not valid markup is shown as it is instead of raising."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        text = clean(text)
        try:
            return super().render_str(text, **kwargs)
        except MarkupError:
            return super().render_str(text, **{**kwargs, "markup": False})


def console(
    stderr: bool = False,
    *,
    file: IO[str] | None = None,
    width: int | None = None,
    force_terminal: bool | None = None,
    highlight: bool = True,
) -> Console:
    """The Console of a task (stdout or stderr), or one rendering into ``file`` (reports)."""
    if file is None:
        file = sys.stderr if stderr else sys.stdout
        width = None if file.isatty() else columns()
    return SafeConsole(
        file=file, width=width, stderr=stderr, force_terminal=force_terminal, highlight=highlight
    )


class LogFormatter(logging.Formatter):
    """Log lines as ``clean`` shows them: one line each, no secret, no control character."""

    def format(self, record: logging.LogRecord) -> str:
        return clean(super().format(record), newlines=False)


# The environment's say in the output, read when used (at import a bad value would be a
# traceback before any task runs) and checked by cli.guarded before a task's work.


def columns() -> int:
    """The width of output that is not a terminal: $COLUMNS, else 200 (rich draws a line
    as wide as this: a billion columns would be a billion spaces)."""
    from .cli import integer

    return integer(os.environ.get("COLUMNS"), "$COLUMNS", default=200, minimum=1, maximum=100_000)


def plain_every() -> float:
    """Seconds between the plain progress lines: $OPENWRT_WOLF_PROGRESS_EVERY, else 30."""
    from .cli import number

    value = os.environ.get("OPENWRT_WOLF_PROGRESS_EVERY")
    return number(value, "$OPENWRT_WOLF_PROGRESS_EVERY", default=30.0, minimum=0.01,
                  maximum=86_400.0)  # fmt: skip


def check_environment() -> None:
    """The values above, and streams that show what they cannot encode as escapes: with
    PYTHONIOENCODING=ascii (or a C locale) rich's en dash was a UnicodeEncodeError."""
    from .files import httpget

    columns()
    plain_every()
    httpget.fixed_seconds()  # $OPENWRT_WOLF_DOWNLOAD_DEADLINE
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


# Progress of long work (downloads, builds, boots): a rich display on a terminal, plain
# periodic lines otherwise, so CI logs show that a job is alive without carriage-return noise.


# Amounts come from what a server or a file declares (a Content-Length of 10^400 was an
# OverflowError here: a traceback from the progress thread, or no error line at all from the
# main thread on a terminal): every figure shown is a float first, and one that is not finite
# or beyond 2^63 is shown as such, never raised.
_BEYOND = float(1 << 63)


def _real(n: float) -> float:
    """``n`` as a float: ±inf for an int too big for one."""
    try:
        return float(n)
    except OverflowError:
        return math.inf if n > 0 else -math.inf


def _shown(x: float) -> str | None:
    """What stands for a figure that is no real amount; None for one that is."""
    if math.isnan(x):
        return "?"
    if abs(x) <= _BEYOND:
        return None
    return "more than 2^63" if x > 0 else "less than -2^63"


def _size(n: float) -> str:
    x = _real(n)
    if (odd := _shown(x)) is not None:
        return f"{odd} B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(x) < 1024 or unit == "PiB":
            return f"{x:,.0f} {unit}" if unit == "B" else f"{x:,.1f} {unit}"
        x /= 1024
    return f"{x:,.1f} PiB"  # not reached


def _count(n: float) -> str:
    x = _real(n)
    return _shown(x) or f"{x:,.0f}"


def _percent(done: float, total: float) -> str:
    x, whole = _real(done), _real(total)
    return f"{100 * x / whole:.0f}" if math.isfinite(x) and math.isfinite(whole) and whole else "?"


def _for_rich(n: float | None) -> float | None:
    """A figure rich's bar can draw (it divides by the total): None for one it cannot."""
    x = _real(n) if n is not None else math.nan
    return x if 0 <= x <= _BEYOND else None


class Tracker:
    """One piece of long work: advance() or update() it; finished when its block ends."""

    def __init__(self, board: _Board, label: str, total: float | None, unit: str) -> None:
        self.board, self.label, self.total, self.unit = board, label, total, unit
        self.completed: float = 0  # an int while ints are added: exact at any size
        self.started = time.monotonic()
        self.task_id: Any = None

    def advance(self, n: float = 1) -> None:
        try:
            done = self.completed + n
        except OverflowError:  # a float and an int too big for one
            done = _real(self.completed) + _real(n)
        self.update(completed=done)

    def update(
        self,
        *,
        completed: float | None = None,
        total: float | None = None,
        label: str | None = None,
    ) -> None:
        with self.board.lock:
            if completed is not None:
                self.completed = completed
            if total is not None:
                self.total = total
            if label is not None:
                self.label = label
            self.board.changed(self)

    def line(self, done: bool = False) -> str:
        secs = time.monotonic() - self.started
        fmt = _size if self.unit == "B" else _count
        amount = fmt(self.completed)
        if self.total:
            amount += f"/{fmt(self.total)} ({_percent(self.completed, self.total)} %)"
        if done:
            return f"{self.label}: done in {secs:.0f} s" + (
                f" ({amount})" if self.completed else ""
            )
        return (
            f"{self.label}: {amount if self.completed or self.total else 'running'}, {secs:.0f} s"
        )


class _Board:
    """All trackers of this process: one rich Live display, or one plain-line ticker."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.trackers: list[Tracker] = []
        self.rich: Any = None
        self.ticker: threading.Thread | None = None
        self.stop = threading.Event()

    def start(self, t: Tracker) -> None:
        con = console(stderr=True)
        with self.lock:
            self.trackers.append(t)
            if con.is_terminal:
                if self.rich is None:
                    from rich.progress import (
                        BarColumn,
                        Progress,
                        SpinnerColumn,
                        TextColumn,
                        TimeElapsedColumn,
                    )

                    self.rich = Progress(
                        SpinnerColumn(),
                        TextColumn("{task.description}"),
                        BarColumn(),
                        TextColumn("{task.fields[amount]}"),
                        TimeElapsedColumn(),
                        console=con,
                        transient=True,
                    )
                    self.rich.start()
                t.task_id = self.rich.add_task(t.label, total=_for_rich(t.total), amount="")
            else:
                con.print(f"{t.label}: started", markup=False, highlight=False)
                if self.ticker is None:
                    self.stop.clear()
                    self.ticker = threading.Thread(target=self._tick, daemon=True, name="progress")
                    self.ticker.start()

    def changed(self, t: Tracker) -> None:
        if self.rich is not None and t.task_id is not None:
            fmt = _size if t.unit == "B" else _count
            amount = fmt(t.completed) + (f"/{fmt(t.total)}" if t.total else "")
            self.rich.update(t.task_id, description=t.label, completed=_for_rich(t.completed) or 0,
                             total=_for_rich(t.total), amount=amount)  # fmt: skip

    def finish(self, t: Tracker, ok: bool) -> None:
        con = console(stderr=True)
        with self.lock:
            self.trackers.remove(t)
            if self.rich is not None:
                self.rich.remove_task(t.task_id)
                if not self.trackers:
                    self.rich.stop()
                    self.rich = None
            if not con.is_terminal or ok:
                text = (
                    t.line(done=True)
                    if ok
                    else f"{t.label}: stopped after {time.monotonic() - t.started:.0f} s"
                )
                con.print(text, markup=False, highlight=False)
            if not self.trackers and self.ticker is not None:
                self.stop.set()
                self.ticker = None

    def _tick(self) -> None:
        signals.keep_off_this_thread()  # a TERM must reach the main thread (signals.py)
        stop, every = self.stop, plain_every()
        while not stop.wait(every):
            # a line that cannot be made is skipped: an exception here was a traceback printed
            # in the middle of the task's output (threading's excepthook)
            with contextlib.suppress(Exception):
                with self.lock:
                    lines = [t.line() for t in self.trackers]
                con = console(stderr=True)
                for line in lines:
                    con.print(line, markup=False, highlight=False)


_BOARD = _Board()


@contextlib.contextmanager
def progress(label: str, total: float | None = None, *, unit: str = "") -> Iterator[Tracker]:
    """Show progress of one piece of long work; several may run at once (threads).

    ``unit="B"`` shows bytes (downloads); otherwise counts (steps, lines, boots)."""
    t = Tracker(_BOARD, label, total, unit)
    _BOARD.start(t)
    ok = False
    try:
        yield t
        ok = True
    finally:
        _BOARD.finish(t, ok)
