"""perf/runner.py's reading of a server's CPU time (/proc/<pid>/stat) against the kernel's
other account of the same process, os.times() (times(2)); a name with spaces and ")"; waiting
for a server to listen (a real one: python's http.server, and one that exits first)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from openwrt_wolf import proc
from openwrt_wolf.errors import WolfError
from openwrt_wolf.perf.runner import free_port, proc_cpu_seconds, wait_listening


def test_cpu_seconds_match_times() -> None:
    x = 0
    for i in range(3_000_000):  # burn some CPU so both readings are well above a tick
        x += i * i
    t = os.times()
    got = proc_cpu_seconds(Path("/proc/self/stat").read_text())
    assert got == pytest.approx(t.user + t.system, abs=0.05)


def test_command_name_with_spaces() -> None:
    line = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 1 0 5 0 0"
    assert proc_cpu_seconds(line) == pytest.approx(400 / os.sysconf("SC_CLK_TCK"))


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
