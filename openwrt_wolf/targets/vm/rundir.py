"""A private directory per VM for its console socket and QEMU's messages, removed when the VM
stops or the interpreter exits; one left by a task killed outright (SIGKILL: no cleanup ran)
is swept when the next VM starts."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

_PREFIX = "wolf-vm-"


def _remove_ours() -> None:
    for d in Path(tempfile.gettempdir()).glob(f"{_PREFIX}{os.getpid()}-*"):
        shutil.rmtree(d, ignore_errors=True)


def rundir() -> Path:
    """A new directory named by our pid, so that those of dead tasks can be told apart."""
    base = Path(tempfile.gettempdir())
    for old in base.glob(f"{_PREFIX}*-*"):
        pid = old.name.split("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    atexit.unregister(_remove_ours)  # once, however many VMs
    atexit.register(_remove_ours)
    return Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
