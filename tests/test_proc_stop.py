"""No command outlives its task (proc.workers, proc.stop_all, the reaper): commands running in
worker threads — as footprint --rebuild's and build -j's compilers do — stop on SIGTERM/
Ctrl-C of the task, and on its SIGKILL, including children that ignore SIGTERM.

The task is a real process running proc.run in a proc.workers pool under cli.guarded (as
every task does); the oracle is /proc: every process carrying the test's marker in its
environment (the commands and their children) is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TASK = """
import sys
from openwrt_wolf import cli, proc

@cli.guarded
def task():
    cmd = ["sh", "-c", "trap '' TERM; sleep 300 & sleep 300; wait"]  # TERM is ignored
    with proc.workers(2, "t") as pool:
        futs = [pool.submit(proc.run, cmd, timeout=600) for _ in range(2)]
        print("running", flush=True)
        for f in futs:
            f.result()

task()
"""


def marked(mark: str) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mark.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                out.append(int(pid))
        except OSError:
            continue
    return out


def as_from_a_shell() -> None:
    """The task's signals as a shell leaves them (a pytest-xdist worker blocks or ignores
    some, and a child inherits that)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start(mark: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", TASK], cwd=ROOT, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, mark: "1"}, preexec_fn=as_from_a_shell)  # fmt: skip
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "running"
    deadline = time.monotonic() + 30
    while len([q for q in marked(mark) if q != p.pid]) < 7:  # 2 x (sh + 2 sleep) + reaper
        assert time.monotonic() < deadline, f"the commands did not start: {marked(mark)}"
        time.sleep(0.2)
    return p


def gone(mark: str, seconds: float = 30) -> list[int]:
    deadline = time.monotonic() + seconds
    while marked(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    return marked(mark)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_term_or_ctrl_c_stops_the_commands_of_worker_threads(sig: signal.Signals) -> None:
    mark = f"WOLF_TEST_{uuid.uuid4().hex}"
    p = start(mark)
    try:
        p.send_signal(sig)
        _out, err = p.communicate(timeout=60)  # a pool waiting for its builds: 300 s
        assert p.returncode == 128 + sig, err  # what a shell shows: 143 for TERM
        assert "error: interrupted" in err and "Traceback" not in err, err
        assert gone(mark) == []
    finally:
        for pid in marked(mark):
            os.kill(pid, signal.SIGKILL)


def test_kill_of_the_task_leaves_no_command_running() -> None:
    mark = f"WOLF_TEST_{uuid.uuid4().hex}"
    p = start(mark)
    try:
        p.kill()  # no handler runs: the reaper sees its pipe close
        p.wait(timeout=30)
        assert gone(mark) == []
    finally:
        for pid in marked(mark):
            os.kill(pid, signal.SIGKILL)
