"""The whole-target view: fits / does not fit for every device × flavour, tightest first."""

from __future__ import annotations

from .model import MatrixCell, MatrixRow
from .sizereport import DeviceReport

SORTS = ("headroom", "device")


def rows(devices: list[DeviceReport], sort: str = "headroom") -> list[MatrixRow]:
    out = []
    for dev in devices:
        cells = {
            f: MatrixCell(c.verdict, c.image, c.limit, c.limit_name, c.headroom, c.headroom_blocks)
            for f, c in dev.cells.items()
        }
        rooms = [c.headroom for c in cells.values() if c.headroom is not None]
        out.append(
            MatrixRow(
                dev.profile,
                dev.title,
                dev.target,
                dev.release,
                min(rooms) if rooms else None,
                cells,
            )
        )
    if sort == "headroom":  # the tightest device first; devices without a fit last
        out.sort(key=lambda r: (r.min_headroom is None, r.min_headroom or 0, r.profile))
    else:
        out.sort(key=lambda r: r.profile)
    return out
