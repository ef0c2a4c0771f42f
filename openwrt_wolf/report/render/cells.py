"""How a size-report cell reads as text (shared by the terminal and Markdown tables)."""

from __future__ import annotations

from ..sizereport import BASELINE, MEMORY_FIELDS, ROWS, Cell, DeviceReport

DASH = "–"


def num(v: int | None) -> str:
    return DASH if v is None else f"{v:,}"


def signed(v: int | None) -> str:
    return DASH if v is None else f"{v:+,}"


def cell_text(dev: DeviceReport, c: Cell, row: str) -> str:
    """The value as a release engineer reads it: bytes with separators, erase blocks with
    their size, 'does not fit' where the image exceeds its limit."""
    if row == "fits":
        return c.fits
    if row == "image":
        if c.image is None:
            return DASH
        text = num(c.image) + (" (computed: image deleted)" if c.image_computed else "")
        return f"does not fit: {text}" if c.verdict == "TOO_BIG" else text
    if row == "erase_blocks":
        if c.erase_blocks is None:
            return DASH
        bs = f" × {dev.blocksize // 1024} KiB" if dev.blocksize else ""
        return f"{c.erase_blocks}{bs}"
    if row == "limit":
        return DASH if c.limit is None else f"{c.limit:,} ({c.limit_name})"
    if row == "headroom":
        if c.headroom is None:
            return DASH
        blocks = f" ({c.headroom_blocks:+} blocks)" if c.headroom_blocks is not None else ""
        return f"{c.headroom:+,}{blocks}"
    if row == "margin":
        return signed(c.margin)
    if row == "factory":
        room = f" ({c.factory_room:+,})" if c.factory_room is not None else ""
        return c.factory + (room if c.factory_name else "")
    v = c.value(row)
    return num(v) if isinstance(v, int) or v is None else str(v)


def delta_text(dev: DeviceReport, flavour: str, row: str) -> str:
    """' (+12,345 vs mbedtls)' or ''."""
    d = dev.deltas.get(flavour, {}).get(row)
    return "" if d is None else f" ({signed(d)} vs {BASELINE})"


def table_rows(dev: DeviceReport) -> list[tuple[str, list[str]]]:
    """(label, one text per flavour column) for every row, memory rows when measured."""
    out = []
    for row, label in ROWS:
        out.append(
            (
                label,
                [cell_text(dev, dev.cells[f], row) + delta_text(dev, f, row) for f in dev.flavours],
            )
        )
    for key in MEMORY_FIELDS:
        if any(key in dev.cells[f].mem_kb for f in dev.flavours):
            vals = [dev.cells[f].mem_kb.get(key) for f in dev.flavours]
            out.append((f"{key} (median, kB)", [num(v) for v in vals]))
    return out


def notes(dev: DeviceReport) -> list[str]:
    out = []
    for f in dev.flavours:
        out += [f"{f}: {n}" for n in dev.cells[f].notes]
    return out


def package_rows(dev: DeviceReport, n: int) -> list[tuple[str, list[str]]]:
    """The n packages taking the most bytes inside the squashfs (in any column), with their
    bytes per flavour: where the flavours differ."""
    per: dict[str, dict[str, int]] = {}
    for f in dev.flavours:
        for p in dev.cells[f].packages:
            per.setdefault(p["name"], {})[f] = int(p["stored_size"])
    top = sorted(per, key=lambda k: (-max(per[k].values()), k))[:n]
    return [(name, [num(per[name].get(f)) for f in dev.flavours]) for name in top]
