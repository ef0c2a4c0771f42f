"""The builds' table a build prints (locally or from a queue's workers): verdict, image,
limit, headroom and record per device and flavour, then OpenWrt's warnings and the images."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from .. import term
from ..catalogue import flavours
from ..trust import escape
from .jobs import Outcome


def _num(v: object) -> str:
    return f"{v:,}" if isinstance(v, int) else "–"


def show(outcomes: list[Outcome]) -> None:
    """The builds' table, OpenWrt's warnings and the image paths (stdout)."""
    table = Table(title=f"openwrt-wolf builds ({len(outcomes)})")
    for col in ("device", "flavour", "verdict", "image B", "checked B", "limit B",
                "headroom B", "", "record"):  # fmt: skip
        table.add_column(col, justify="right" if col.endswith(" B") else "left")
    for o in outcomes:
        r, fr = o.record, o.record.fit
        img = r.image()
        # a flavour the patch set makes says which image it is (the stock one only when asked)
        label = f"{r.flavour} ({r.variant})" if flavours.get(r.flavour).patched else r.flavour
        table.add_row(
            r.device,
            label,
            fr.verdict + (" (deleted)" if r.image_deleted else ""),
            _num(img.size) if img else "–",
            _num(fr.checked_size),
            _num(fr.limit),
            _num(fr.rootfs_room),
            "cached" if o.cached else "built",
            escape.markup(str(o.path)),
        )
    con = term.console()
    con.print(table)
    for o in outcomes:
        for w in o.record.openwrt_warnings:
            con.print(f"{o.record.device} {o.record.flavour}: OpenWrt: {w}", markup=False)
        img = o.record.image()
        if img:
            con.print(f"{o.record.device} {o.record.flavour}: {Path(img.path)}", markup=False)
