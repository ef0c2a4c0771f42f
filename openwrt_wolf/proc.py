"""Running external commands: every command is logged as a line that reproduces it, always
has a timeout, is killed with its whole process group when it hangs, and can stream its
output to a log file. ``recording()`` collects the command lines for build records.

No command outlives its task. Each runs in its own process group, which is killed (TERM, then
KILL) on a timeout, on Ctrl-C/SIGTERM in the thread that waits for it, and — for commands
waited for in worker threads — by ``stop_all`` when the task is interrupted (``workers``).
Should the task itself be SIGKILLed, a small reaper process (one per task, in its own
session) sees its pipe close and kills every group still registered with it."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .errors import CommandError, WolfError
from .trust import secrets

log = logging.getLogger("openwrt_wolf.cmd")

_recorder: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "openwrt_wolf_recorder", default=None
)


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    output: str
    seconds: float


def command_line(
    argv: Sequence[str | os.PathLike[str]],
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """A shell line that reproduces the command: cd, changed variables, quoted argv."""
    parts: list[str] = []
    if cwd is not None:
        parts.append(f"cd {shlex.quote(str(cwd))} &&")
    if env:
        changed = {k: v for k, v in env.items() if os.environ.get(k) != v}
        parts += [f"{k}={shlex.quote(v)}" for k, v in sorted(changed.items())]
    parts.append(shlex.join(str(a) for a in argv))
    return " ".join(parts)


@contextlib.contextmanager
def recording() -> Iterator[list[str]]:
    """Collect the reproducing line of every command run inside the block."""
    lines: list[str] = []
    token = _recorder.set(lines)
    try:
        yield lines
    finally:
        _recorder.reset(token)


def _kill_group(p: subprocess.Popen[bytes]) -> None:
    _kill_groups([p])


def _kill_groups(procs: list[subprocess.Popen[bytes]]) -> None:
    """TERM every group, one grace period for all of them (not one each: a task stopping
    with n builds running waits 5 s, not 5n s), then KILL what is left."""
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
    # KILL what is left of each group even when its leader went at TERM: a shell's or make's
    # children (the compilers) may ignore TERM or not have been told
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)


# --- every running command of this process, and the reaper for a SIGKILLed task -----------

_live: dict[int, subprocess.Popen[bytes]] = {}
_live_lock = threading.Lock()
_stopping = threading.Event()
_reaper: IO[bytes] | None = None

# The reaper: reads "+PGID"/"-PGID" lines; when the pipe closes (the task ended, however),
# TERMs and then KILLs every group still listed. Python, since the task's Python is at hand.
_REAPER = """\
import os, signal, sys, time
groups = set()
for line in sys.stdin.buffer:
    sign, pgid = line[:1], int(line[1:])
    (groups.add if sign == b"+" else groups.discard)(pgid)
for sig in (signal.SIGTERM, signal.SIGKILL):
    for g in list(groups):
        try:
            os.killpg(g, sig)
        except OSError:
            groups.discard(g)
    if groups and sig == signal.SIGTERM:
        time.sleep(2)
"""


def _tell_reaper(line: str) -> None:
    global _reaper
    with _live_lock:
        try:
            if _reaper is None:
                r = subprocess.Popen(
                    [sys.executable, "-c", _REAPER],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # a KILL of the task's group does not reach it
                )
                _reaper = r.stdin
            assert _reaper is not None
            _reaper.write(line.encode() + b"\n")
            _reaper.flush()
        except OSError:
            pass  # no reaper: the groups are still killed on timeouts and interrupts


@contextlib.contextmanager
def _tracked(p: subprocess.Popen[bytes]) -> Iterator[None]:
    """The command's group is known to stop_all and to the reaper while it runs."""
    with _live_lock:
        _live[p.pid] = p
    _tell_reaper(f"+{p.pid}")
    try:
        yield
    finally:
        with _live_lock:
            _live.pop(p.pid, None)
        _tell_reaper(f"-{p.pid}")


def stop_all() -> None:
    """Ctrl-C or SIGTERM with commands running in worker threads: no new command starts,
    every running one's process group is killed (TERM, then KILL)."""
    _stopping.set()
    with _live_lock:
        procs = list(_live.values())
    _kill_groups(procs)


@contextlib.contextmanager
def workers(n: int, name: str) -> Iterator[ThreadPoolExecutor]:
    """A thread pool whose commands stop with the task: when the block ends by an exception
    (Ctrl-C, SIGTERM, an error), stop_all() kills the running commands and the queued work
    is cancelled, instead of waiting for every build to finish."""
    pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix=name)
    try:
        yield pool
    except BaseException:
        stop_all()
        pool.shutdown(wait=True, cancel_futures=True)
        _stopping.clear()
        raise
    pool.shutdown(wait=True)


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    logfile: Path | None = None,
    on_line: Callable[[str], None] | None = None,
    check: bool = True,
    input: bytes | None = None,
    tail_lines: int = 20,
) -> Completed:
    """Run argv (never through a shell) and return its combined stdout+stderr.

    Output is streamed line by line to ``logfile`` (appended) and ``on_line``. On a timeout
    the process group is killed and CommandError names the timeout; on a non-zero exit with
    ``check`` CommandError carries the last ``tail_lines`` lines and the log path.
    """
    if _stopping.is_set():  # the task is being interrupted: start nothing new
        raise KeyboardInterrupt
    line = secrets.scrub(command_line(argv, cwd, env))  # the log and records keep no password
    log.info("$ %s", line)
    rec = _recorder.get()
    if rec is not None:
        rec.append(line)
    full_env = None if env is None else {**os.environ, **env}
    start = time.monotonic()
    try:
        p = subprocess.Popen(
            [str(a) for a in argv],
            cwd=cwd,
            env=full_env,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group, so a timeout kills children too
        )
    except FileNotFoundError as e:
        raise WolfError(f"command not found: {argv[0]} (install it, see `./wolf hosttools`)") from e
    with _tracked(p):
        if input is not None:
            assert p.stdin is not None

            def feed() -> None:
                assert p.stdin is not None
                with contextlib.suppress(BrokenPipeError):
                    p.stdin.write(input)
                    p.stdin.close()

            threading.Thread(target=feed, daemon=True).start()

        chunks: list[str] = []
        tail: deque[str] = deque(maxlen=tail_lines)
        fh = logfile.open("a", encoding="utf-8") if logfile else None
        if fh:
            fh.write(f"$ {line}\n")
            fh.flush()

        def pump() -> None:
            assert p.stdout is not None
            for raw in p.stdout:
                text = raw.decode("utf-8", "replace")
                chunks.append(text)
                tail.append(text.rstrip("\n"))
                if fh:
                    fh.write(text)
                    fh.flush()
                if on_line:
                    on_line(text.rstrip("\n"))

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            reader.join(timeout=5)
            if fh:
                fh.close()
            raise CommandError(
                f"timed out after {timeout:g} s and was killed: {line}",
                tail=list(tail),
                log=str(logfile) if logfile else None,
            ) from None
        except BaseException:
            _kill_group(p)  # Ctrl-C or another error: leave nothing running
            if fh:
                fh.close()
            raise
        reader.join(timeout=30)
        if fh:
            fh.close()
        if _stopping.is_set():  # killed by stop_all: an interruption, not a failed command
            raise KeyboardInterrupt
        out = "".join(chunks)
        seconds = time.monotonic() - start
        if check and p.returncode != 0:
            raise CommandError(
                f"command failed (exit {p.returncode}): {line}",
                tail=list(tail),
                log=str(logfile) if logfile else None,
            )
        return Completed(tuple(str(a) for a in argv), p.returncode, out, seconds)
