"""perf/runner.py's reading of a server's CPU time (/proc/<pid>/stat) against the kernel's
other account of the same process, os.times() (times(2)); a name with spaces and ")"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openwrt_wolf.perf.runner import proc_cpu_seconds


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
