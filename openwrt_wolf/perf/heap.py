"""Reading heaptrack's reports (data/perf/heaptrack.c, loaded with LD_PRELOAD): one line per
report, `heaptrack pid=<pid> event=<start|mark|exit> live=<B> peak=<B> allocs=<n> frees=<n>`;
a "mark" (SIGUSR2) also starts a new peak window, so a driver reads the peak of one phase."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

MARK_SIGNAL = "SIGUSR2"
SIGNAL = signal.SIGUSR2
ENV_OUT = "HEAPTRACK_OUT"
_LINE = re.compile(
    r"^heaptrack pid=(?P<pid>\d+) event=(?P<event>\w+) live=(?P<live>\d+) peak=(?P<peak>\d+) "
    r"allocs=(?P<allocs>\d+) frees=(?P<frees>\d+)$"
)


@dataclass(frozen=True)
class HeapReport:
    pid: int
    event: str  # start | mark | exit
    live: int  # bytes the program asked for and has not freed
    peak: int  # highest live since the start or the previous mark
    allocs: int  # malloc/calloc/realloc/memalign calls so far (a realloc counts one)
    frees: int


def parse(text: str) -> list[HeapReport]:
    out = []
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m:
            out.append(HeapReport(
                pid=int(m["pid"]), event=m["event"], live=int(m["live"]), peak=int(m["peak"]),
                allocs=int(m["allocs"]), frees=int(m["frees"]),
            ))  # fmt: skip
    return out
