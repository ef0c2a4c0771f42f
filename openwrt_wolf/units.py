"""OpenWrt's size spellings. image.mk's exp_units: k = ×1024, m = ×1024², g = ×1024³."""

from __future__ import annotations

import re

from .errors import WolfError

_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_SIZE = re.compile(r"^\s*(0x[0-9a-f]+|\d+)\s*([kmg]?)i?b?\s*$", re.IGNORECASE)


def parse_size(value: str | int, *, what: str = "size") -> int:
    """'7360k' -> 7536640; '0x730000' -> 7536640; 8388608 -> 8388608."""
    if isinstance(value, int):
        return value
    m = _SIZE.match(value)
    if not m:
        raise WolfError(f"cannot read {what} {value!r}: expected e.g. 7360k, 16M or 0x730000")
    number = int(m.group(1), 0)
    return number * _UNITS[m.group(2).lower()]


def kib(n: int) -> str:
    """Bytes as OpenWrt would write them when they are whole KiB, else plain bytes."""
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


def figure(v: int | None, blocks: bool = False) -> str:
    """A table's byte (or erase-block) count: '6,095,145 B', '93 blocks', '–' when unknown."""
    if v is None:
        return "–"
    return f"{v:,}" + (" blocks" if blocks else " B")
