"""perf/cputime.py's reading of a server's CPU time (/proc/<pid>/stat) against the kernel's
other account of the same process, os.times() (times(2)); a name with spaces and ")"; another
machine's ticks; perf/ports.py waiting for a server to listen (a real one: python's
http.server, and one that exits first)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from openwrt_wolf import proc
from openwrt_wolf.errors import WolfError
from openwrt_wolf.perf.cputime import proc_cpu_seconds, process_cpu_clock
from openwrt_wolf.perf.ports import free_port, wait_listening

BURN = """
import sys, threading, time
def burn():
    t = time.thread_time()
    while time.thread_time() - t < 0.25:
        pass
ts = [threading.Thread(target=burn) for _ in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
print(time.process_time(), flush=True)
sys.stdin.read()
"""


def test_cpu_seconds_match_times() -> None:
    x = 0
    for i in range(3_000_000):  # burn some CPU so both readings are well above a tick
        x += i * i
    t = os.times()
    got = proc_cpu_seconds(Path("/proc/self/stat").read_text())
    assert got == pytest.approx(t.user + t.system, abs=0.05)


def test_a_servers_cpu_in_nanoseconds_is_its_own_account() -> None:
    """A live process that burned CPU in two threads, now gone (then idles): its CPU clock
    read from outside agrees with the process's own clock (time.process_time(), every thread)
    to 10 ms, and with the kernel's tick count in /proc/<pid>/stat to three ticks."""
    with subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as child:  # fmt: skip
        assert child.stdout is not None and child.stdin is not None
        own = float(child.stdout.readline())
        fine = process_cpu_clock(child.pid)
        ticks = proc_cpu_seconds(Path(f"/proc/{child.pid}/stat").read_text())
        child.stdin.close()
    assert own >= 0.5
    assert fine == pytest.approx(own, abs=0.01)
    assert fine == pytest.approx(ticks, abs=3 / os.sysconf("SC_CLK_TCK"))


def test_a_process_that_is_gone_has_no_cpu_clock() -> None:
    with subprocess.Popen(["true"]) as gone:
        gone.wait()
    assert process_cpu_clock(gone.pid) is None


def test_command_name_with_spaces() -> None:
    line = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 1 0 5 0 0"
    assert proc_cpu_seconds(line) == pytest.approx(400 / os.sysconf("SC_CLK_TCK"))
    assert proc_cpu_seconds(line, 250) == pytest.approx(1.6)  # a place's own CLK_TCK


def test_wait_listening_sees_a_server_come_up_or_exit_first(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "http.server", "-b", "127.0.0.1", str(port)]
    with proc.spawn(argv, cwd=tmp_path) as up:
        wait_listening("127.0.0.1", port, 30, up)
        assert up.poll() is None
    nobody = free_port()
    with proc.spawn(["sh", "-c", "exit 3"]) as gone, pytest.raises(WolfError) as e:
        wait_listening("127.0.0.1", nobody, 30, gone)
    assert e.value.message == f"the server exited (3) before listening on {nobody}"
