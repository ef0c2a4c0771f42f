"""Running external commands: every command is logged as a line that reproduces it, always
has a timeout (``run``) or a stop with one (``spawn``), is killed with its whole process group
when it hangs, and can stream its output to a log file. ``recording()`` collects the command
lines for build records.

No command outlives its task. Each runs in its own process group, which is killed (TERM, then
KILL) on a timeout, on Ctrl-C/SIGTERM in the thread that waits for it, and — for commands
waited for in worker threads — by ``stop_all`` when the task is interrupted (``workers``,
whose ``signals.Watch`` stops them even when the main thread sleeps through the signal). A
Ctrl-C between a command's fork and its registration is held until it is registered
(``signals.held``), and a second one does not cut the first one's stop short.
Should the task itself be SIGKILLed, a small reaper process (one per task, in its own
session) sees its pipe close and kills every group still registered with it; a spawned
process also gets SIGKILL from the kernel (PR_SET_PDEATHSIG). Outside a task (scripts, tests)
spawned processes are stopped at interpreter exit and SIGTERM/SIGHUP end the interpreter
through its ``finally`` blocks."""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import ctypes
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
from types import FrameType
from typing import IO

from . import signals
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


# --- every running command of this process, and the reaper for a SIGKILLed task -----------

_live: dict[int, subprocess.Popen[bytes]] = {}
_live_lock = threading.Lock()
_stopping = threading.Event()
_reaper: IO[bytes] | None = None
_exit_hooks = False

# The reaper: reads "+PGID"/"-PGID" lines; when the pipe closes (the task ended, however),
# TERMs every group still listed, KILLs what is left of them 2 s later, and ends as soon as
# none has a live process. A killed process stays a zombie until its new parent (init, here
# a container's PID 1 that reaps when it gets to it) reaps it, and killpg() finds a group of
# zombies: the reaper waited the full 2 s after its commands had died, a process left behind
# for whoever counts them (bench/bad_inputs.py after a SIGKILLed footprint --smoke). So
# /proc's state says whether a group still runs. Python: the task's is at hand.
_REAPER = """\
import os, signal, sys, time
groups = set()
for line in sys.stdin.buffer:
    sign, pgid = line[:1], int(line[1:])
    (groups.add if sign == b"+" else groups.discard)(pgid)
def running():
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                st = f.read()
        except OSError:
            continue
        state, _ppid, pgrp = st[st.rfind(b")") + 2 :].split()[:3]
        if state not in (b"Z", b"X"):
            out.add(int(pgrp))
    return out
def signal_all(sig):
    for g in list(groups):
        try:
            os.killpg(g, sig)
        except OSError:
            groups.discard(g)
signal_all(signal.SIGTERM)
end = time.monotonic() + 2
while groups and time.monotonic() < end:
    time.sleep(0.02)
    groups &= running()
signal_all(signal.SIGKILL)
"""

_PR_SET_PDEATHSIG = 1
# Looked up in the parent: between fork and exec the child only calls it (no dlopen there,
# whose lock another thread of the parent might have held at fork time).
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent() -> None:
    """preexec_fn of a spawned process: SIGKILL from the kernel when the thread that started
    it ends (the whole task, for the main thread), even by SIGKILL."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it: while it is an unreaped zombie its pid
    (and so its process group's id) cannot be given to another process."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True  # reaped meanwhile (another thread's poll)


def kill_group(p: subprocess.Popen[bytes], *, grace: float) -> None:
    """TERM the process group, KILL what is left of it after ``grace`` seconds, reap the
    leader. A leader reaped earlier is left alone: its pid may be another process's now."""
    kill_groups([p], grace=grace)


def kill_groups(procs: list[subprocess.Popen[bytes]], *, grace: float) -> None:
    """kill_group for several groups with one grace period for all of them, not one each: a
    task stopping with n builds running waits ``grace`` seconds, not n times that."""
    procs = [p for p in procs if p.returncode is None]
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while not all(_exited(p.pid) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    # KILL what is left of each group even when its leader went at TERM: a shell's or make's
    # children (the compilers) may ignore TERM or not have been told
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)
    # a KILL is delivered when its target next runs: on a busy machine a group's other
    # members (a shell's background sleep) were still alive when the leader had been reaped
    groups = {p.pid for p in procs}
    deadline = time.monotonic() + 5
    while (groups := groups & _running_groups()) and time.monotonic() < deadline:
        time.sleep(0.01)


def _running_groups() -> set[int]:
    """The process groups with a member that is not a zombie (/proc/<pid>/stat)."""
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            st = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            continue
        state, _ppid, pgrp = st[st.rfind(b")") + 2 :].split()[:3]
        if state not in (b"Z", b"X"):
            out.add(int(pgrp))
    return out


def _tell_reaper(line: str) -> None:
    with _live_lock:
        _tell_reaper_locked(line)


def _tell_reaper_locked(line: str) -> None:
    """_tell_reaper with _live_lock held by the caller."""
    global _reaper
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


def _track(p: subprocess.Popen[bytes]) -> None:
    """The command's group is known to stop_all, to the reaper and to the exit hooks. A
    command that started while stop_all was stopping the others (its Popen returned after
    stop_all took its list: a busy machine delays the starting thread) is stopped here and
    the caller gets KeyboardInterrupt, so no worker waits for a command nobody stops."""
    with _live_lock:  # the same lock stop_all sets _stopping under: one of the two sees it
        stopping = _stopping.is_set()
        if not stopping:
            _live[p.pid] = p
            # told under the same lock: a command in _live is one the reaper knows of
            _tell_reaper_locked(f"+{p.pid}")
    if stopping:
        kill_group(p, grace=5.0)
        raise KeyboardInterrupt


def _untrack(p: subprocess.Popen[bytes]) -> None:
    with _live_lock:
        if _live.pop(p.pid, None) is None:
            return
    _tell_reaper(f"-{p.pid}")


def stop_all() -> None:
    """Ctrl-C or SIGTERM with commands running in worker threads: no new command starts,
    every running one's process group is killed (TERM, then KILL)."""
    with _live_lock:
        _stopping.set()
        procs = list(_live.values())
    kill_groups(procs, grace=5.0)


@contextlib.contextmanager
def workers(n: int, name: str) -> Iterator[ThreadPoolExecutor]:
    """A thread pool whose commands stop with the task: when the block ends by an exception
    (Ctrl-C, SIGTERM, an error), or an ending signal arrives while it runs (signals.Watch), or
    while its end waits for the work, stop_all() kills the running commands and the queued
    work is cancelled, instead of waiting for every build to finish."""
    pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix=name,
                              initializer=signals.keep_off_this_thread)  # fmt: skip
    watch = signals.Watch(stop_all)
    try:
        watch.start()
        yield pool
        pool.shutdown(wait=True)  # inside the try: a Ctrl-C while waiting stops the work too
    except BaseException:
        with signals.held():  # a second Ctrl-C must not end the stop before the KILL
            stop_all()
            pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        with signals.held():
            stopped = watch.close()  # after it, nothing sets _stopping again
            _stopping.clear()
    if stopped:  # a signal whose KeyboardInterrupt the main thread never saw (a finalizer's)
        raise KeyboardInterrupt


def _stop_at_exit() -> None:
    with _live_lock:
        procs = list(_live.values())
    for p in procs:
        kill_group(p, grace=2.0)
        _untrack(p)


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _install_exit_hooks() -> None:
    """Outside a task (a script, a test; cli.guarded takes the signals in a task) spawned
    processes still stop: at interpreter exit, and on SIGTERM/SIGHUP, which become SystemExit
    so that ``finally`` blocks run."""
    global _exit_hooks
    if _exit_hooks:
        return
    _exit_hooks = True
    atexit.register(_stop_at_exit)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _exit_on_signal)


# --- starting a command ------------------------------------------------------------------


def _announce(
    argv: Sequence[str | os.PathLike[str]],
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    background: bool = False,
) -> str:
    """Log (and record) the line that reproduces the command; the line, scrubbed."""
    if _stopping.is_set():  # the task is being interrupted: start nothing new
        raise KeyboardInterrupt
    line = secrets.scrub(command_line(argv, cwd, env))  # the log and records keep no password
    log.info("$ %s%s", line, " &" if background else "")
    rec = _recorder.get()
    if rec is not None:
        rec.append(line)
    return line


def _start(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    stdin: int,
    stdout: int | IO[bytes],
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            [str(a) for a in argv],
            cwd=cwd,
            env=None if env is None else {**os.environ, **env},
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group, so a kill reaches its children too
            preexec_fn=preexec_fn,
        )
    except FileNotFoundError as e:
        raise WolfError(f"command not found: {argv[0]} (install it, see `./wolf hosttools`)") from e


# --- run: a command waited for --------------------------------------------------------------


class _Output:
    """A command's combined output, read on a thread line by line: kept, its last lines
    tailed, appended to the log file, passed to ``on_line``."""

    def __init__(
        self,
        line: str,
        logfile: Path | None,
        on_line: Callable[[str], None] | None,
        tail_lines: int,
    ) -> None:
        self.chunks: list[str] = []
        self.tail: deque[str] = deque(maxlen=tail_lines)
        self.logfile = logfile
        self.on_line = on_line
        self.fh = logfile.open("a", encoding="utf-8") if logfile else None
        if self.fh:
            self.fh.write(f"$ {line}\n")
            self.fh.flush()
        self.reader: threading.Thread | None = None

    def read(self, p: subprocess.Popen[bytes]) -> None:
        self.reader = threading.Thread(target=self._pump, args=(p,), daemon=True)
        self.reader.start()

    def _pump(self, p: subprocess.Popen[bytes]) -> None:
        signals.keep_off_this_thread()
        assert p.stdout is not None
        for raw in p.stdout:
            text = raw.decode("utf-8", "replace")
            self.chunks.append(text)
            self.tail.append(text.rstrip("\n"))
            if self.fh and not self.fh.closed:
                self.fh.write(text)
                self.fh.flush()
            if self.on_line:
                self.on_line(text.rstrip("\n"))

    def close(self, wait: float) -> None:
        if wait and self.reader:
            self.reader.join(timeout=wait)
        if self.fh:
            self.fh.close()

    def error(self, message: str) -> CommandError:
        return CommandError(
            message, tail=list(self.tail), log=str(self.logfile) if self.logfile else None
        )


def _feed(p: subprocess.Popen[bytes], data: bytes) -> None:
    """Write stdin on a thread, so a command that answers before reading it all can't block."""

    def feed() -> None:
        signals.keep_off_this_thread()
        assert p.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            p.stdin.write(data)
            p.stdin.close()

    threading.Thread(target=feed, daemon=True).start()


def _wait(p: subprocess.Popen[bytes], timeout: float, line: str, out: _Output) -> None:
    """Wait for the command; on its timeout its group is killed first."""
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p, grace=5.0)
        out.close(wait=5)
        raise out.error(f"timed out after {timeout:g} s and was killed: {line}") from None
    out.close(wait=30)


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
    line = _announce(argv, cwd, env)
    start = time.monotonic()
    out = _Output(line, logfile, on_line, tail_lines)
    stdin = subprocess.PIPE if input is not None else subprocess.DEVNULL
    p: subprocess.Popen[bytes] | None = None
    try:
        # a Ctrl-C between the fork and the tracking is raised once the command is tracked,
        # here, where the except kills it: raised inside Popen, it left the command running
        with signals.held():
            p = _start(argv, cwd=cwd, env=env, stdin=stdin, stdout=subprocess.PIPE)
            _track(p)
        if input is not None:
            _feed(p, input)
        out.read(p)
        _wait(p, timeout, line, out)
    except BaseException:
        if p is not None:  # Ctrl-C or another error: leave nothing running
            kill_group(p, grace=5.0)
        out.close(wait=0)
        raise
    finally:
        if p is not None:
            _untrack(p)
    if _stopping.is_set():  # killed by stop_all: an interruption, not a failed command
        raise KeyboardInterrupt
    seconds = time.monotonic() - start
    if check and p.returncode != 0:
        raise out.error(f"command failed (exit {p.returncode}): {line}")
    return Completed(tuple(str(a) for a in argv), p.returncode, "".join(out.chunks), seconds)


# --- spawn: a command that runs beside the task (a server, a VM) ----------------------------


@dataclass
class Spawned:
    """A process started by ``spawn``; it runs until ``stop()`` or the end of its ``with``."""

    popen: subprocess.Popen[bytes]
    line: str  # the line that reproduces it (logged with a trailing " &")
    grace: float  # seconds between TERM and KILL when it is stopped

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def stop(self) -> None:
        """TERM its process group, KILL what is left ``grace`` seconds later. Idempotent."""
        kill_group(self.popen, grace=self.grace)
        _untrack(self.popen)
        if self.popen.stdin:
            self.popen.stdin.close()

    def __enter__(self) -> Spawned:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def spawn(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    output: Path | None = None,
    stdin_open: bool = False,
    grace: float = 3.0,
) -> Spawned:
    """Start argv (never through a shell) in the background, in its own session, and return
    it running; the caller stops it (``with spawn(...) as s:`` or ``s.stop()``).

    stdout and stderr are appended to ``output`` (else discarded); with ``stdin_open`` its
    stdin is a pipe that stays open until it is stopped (some servers end at EOF). The kernel
    KILLs it when the thread that started it ends: start it from the main thread or from the
    worker that also stops it.
    """
    line = _announce(argv, cwd, env, background=True)
    _install_exit_hooks()
    stdin = subprocess.PIPE if stdin_open else subprocess.DEVNULL
    p: subprocess.Popen[bytes] | None = None
    try:
        with contextlib.ExitStack() as files:
            out = files.enter_context(output.open("ab")) if output else subprocess.DEVNULL
            with signals.held():  # as in run: a Ctrl-C comes once the process is tracked
                p = _start(argv, cwd=cwd, env=env, stdin=stdin, stdout=out,
                           preexec_fn=_die_with_parent)  # fmt: skip
                _track(p)
    except BaseException:
        if p is not None:  # the caller never gets it: nobody else would stop it
            kill_group(p, grace=grace)
            _untrack(p)
        raise
    return Spawned(p, line, grace)
