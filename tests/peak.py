"""The peak resident memory of one command, as the kernel counts it, the oracle of the
hostile-input tests (a bomb must be refused before it is held in memory).

getrusage's ru_maxrss of a child cannot be read straight from the pytest worker: at exec Linux
folds the old address space's high-water mark into the new program's (fs/exec.c exec_mmap,
setmax_mm_hiwater_rss), and the old address space is the worker's own (vfork) or a copy of it
(fork). A worker that had grown to 521 MiB made every command it ran "peak at 533776 KiB" on a
fresh CI machine. So the command is started by a small launcher (python -I -S, a few MiB) which
forks it and reports wait4's figures for it: the command's peak, and that of the tools it
waited for, counted from the launcher's few MiB."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

LAUNCHER = """\
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}\\n")
"""


class Hung(Exception):
    """The command outlived its deadline (it was killed with its process group)."""


def run(
    args: Sequence[str],
    tmp: Path,
    deadline: float,
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> tuple[int, str, str, int]:
    """Exit status, stdout, stderr (kept in tmp) and peak RSS in KiB of ARGS. Past ``deadline``
    seconds its process group is killed and Hung raised, so a hang fails instead of stalling
    the suite."""
    out, err, figures = tmp / "stdout.txt", tmp / "stderr.txt", tmp / "peak.txt"
    figures.unlink(missing_ok=True)
    with out.open("w") as o, err.open("w") as e:
        launcher = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", LAUNCHER, str(figures), *args],
            cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=o, stderr=e,
            start_new_session=True,
        )  # fmt: skip
    try:
        launcher.wait(timeout=deadline)
    except subprocess.TimeoutExpired:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        raise Hung(f"{' '.join(args)} ran past {deadline} s") from None
    code, kib = figures.read_text().split()
    return int(code), out.read_text(), err.read_text(), int(kib)
