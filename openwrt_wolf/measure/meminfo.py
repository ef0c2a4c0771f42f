"""Reading a guest's memory the way the kernel and busybox report it: /proc/meminfo (kB) and
`free` (busybox: kB; its columns differ between versions, so they are read from the header)."""

from __future__ import annotations

import re

from ..errors import WolfError

# The fields the published table and the size report look at; the rest are kept as read.
KEY_FIELDS = ("MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "Slab", "SReclaimable",
              "SUnreclaim", "Shmem", "KernelStack", "PageTables")  # fmt: skip

_LINE = re.compile(r"^([A-Za-z0-9_()]+):\s+(\d+)(?:\s+kB)?\s*$")


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo → {field: kB} (HugePages_* counts stay plain numbers)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m:
            out[m.group(1)] = int(m.group(2))
    for need in ("MemTotal", "MemFree"):
        if need not in out:
            raise WolfError(
                f"/proc/meminfo output has no {need}: {text.strip()[:120]!r}",
                hint="is the console showing kernel messages over the command output?",
            )
    return out


def parse_free(text: str) -> dict[str, int]:
    """`free` → {column: kB} for the Mem: row, column names as the header spells them
    (busybox 1.35: total used free shared buff/cache available; older: buffers cached)."""
    header: list[str] | None = None
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "total":
            header = words
        elif words[0] == "Mem:" and header:
            values = words[1:]
            if len(values) != len(header) or not all(v.isdigit() for v in values):
                break
            return dict(zip(header, map(int, values), strict=True))
    raise WolfError(f"cannot read `free` output: {text.strip()[:160]!r}")


_UPTIME = re.compile(r"^(\d{1,12}(?:\.\d+)?)\s+\d{1,15}(?:\.\d+)?$")
_LOADAVG = re.compile(r"^\d+\.\d+ \d+\.\d+ \d+\.\d+ \d+/\d+ \d+$")


def parse_uptime(text: str) -> float:
    """/proc/uptime → seconds since boot. The line is found among others: a shell's start-up
    noise (stderr shares the channel) is not taken for the figure."""
    for line in text.splitlines():
        m = _UPTIME.match(line.strip())
        if m:
            return float(m.group(1))
    raise WolfError(f"cannot read /proc/uptime output: {text.strip()[:120]!r}")


def parse_loadavg(text: str) -> str:
    """/proc/loadavg's line (kept as read), found among others as parse_uptime does."""
    for line in text.splitlines():
        if _LOADAVG.match(line.strip()):
            return line.strip()
    raise WolfError(f"cannot read /proc/loadavg output: {text.strip()[:120]!r}")
