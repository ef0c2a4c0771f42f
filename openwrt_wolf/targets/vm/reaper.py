"""No QEMU outlives its task: every VM process runs in its own process group, is registered
here and killed by ``finally`` blocks, at interpreter exit (atexit), on SIGTERM/SIGHUP (turned
into SystemExit so the finally blocks run) and, if Python itself is SIGKILLed, by the kernel
(PR_SET_PDEATHSIG in the child)."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from types import FrameType

_live: set[subprocess.Popen[bytes]] = set()
_lock = threading.Lock()
_installed = False
_PR_SET_PDEATHSIG = 1


# Looked up in the parent: between fork and exec the child only calls it (no dlopen there,
# whose lock another thread of the parent might have held at fork time).
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def die_with_parent() -> None:
    """preexec_fn for QEMU: SIGKILL when the thread that started it dies. Start VMs from a
    thread that lives as long as they do (the main thread, in our tasks)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def kill(p: subprocess.Popen[bytes], *, grace: float = 3.0) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace`` seconds, reap the child."""
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
    forget(p)


def register(p: subprocess.Popen[bytes]) -> None:
    _install()
    with _lock:
        _live.add(p)


def rundir() -> Path:
    """A private directory for one VM's sockets, named by our pid so that the directories of
    tasks that were killed outright (SIGKILL: no cleanup ran) can be swept later."""
    base = Path(tempfile.gettempdir())
    for old in base.glob("wolf-vm-*-*"):
        pid = old.name.split("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"wolf-vm-{os.getpid()}-"))


def forget(p: subprocess.Popen[bytes]) -> None:
    with _lock:
        _live.discard(p)


def live_pids() -> list[int]:
    with _lock:
        return sorted(p.pid for p in _live if p.poll() is None)


def kill_all() -> None:
    with _lock:
        procs = list(_live)
    for p in procs:
        kill(p, grace=2.0)
    for d in Path(tempfile.gettempdir()).glob(f"wolf-vm-{os.getpid()}-*"):
        shutil.rmtree(d, ignore_errors=True)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(kill_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _on_signal)
