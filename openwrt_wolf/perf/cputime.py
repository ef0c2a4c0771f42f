"""The CPU time another process has used: its CPU clock where this machine can read it, else
the kernel's tick count in /proc/<pid>/stat (also what a place over a shell reads)."""

from __future__ import annotations

import os
import time


def proc_cpu_seconds(stat: str, ticks_per_second: int | None = None) -> float:
    """utime + stime of a /proc/<pid>/stat line (proc(5): fields 14 and 15, clock ticks);
    ticks per second of the machine the line comes from, this one's by default."""
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces
    tck = ticks_per_second or os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tck


def process_cpu_clock(pid: int) -> float | None:
    """Another process's CPU time in nanoseconds, every thread, the exited ones too: the clock
    clock_getcpuclockid(3) names, which Linux numbers ((~pid) << 3) | 2 (a process's
    CPUCLOCK_SCHED). None where it cannot be read. /proc/<pid>/stat counts 10 ms ticks: over
    a quick run's 5 handshakes 2 ms each, a third of a 7 ms handshake."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        return None
