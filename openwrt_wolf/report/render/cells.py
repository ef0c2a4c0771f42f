"""How a size-report cell reads as text (shared by the terminal and Markdown tables)."""

from __future__ import annotations

from collections.abc import Callable

from ...perf.tables import BASE, ratio
from ..model import Baseline, CellDelta, Figure, MatrixCell, MatrixRow, Row, Source, Table
from ..sizereport import BASELINE, MEMORY_FIELDS, ROWS, Cell, DeviceReport, SizeReport

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


def table_cells(dev: DeviceReport) -> list[tuple[str, list[tuple[str, str]]]]:
    """(label, one (value, difference to mbedtls or '') per flavour column) for every row,
    memory rows when measured. HTML sets the difference on a line of its own."""
    out = []
    for row, label in ROWS:
        out.append(
            (label, [(cell_text(dev, dev.cells[f], row), delta_text(dev, f, row).strip())
                     for f in dev.flavours])
        )  # fmt: skip
    booted = [dev.cells[f].memory.get("boot") for f in dev.flavours]  # not the disk boot
    for key in MEMORY_FIELDS:
        if any(m and key in m.kb for m in booted):
            vals = [m.kb.get(key) if m else None for m in booted]
            out.append((f"{key} (median, kB)", [(num(v), "") for v in vals]))
    return out


def table_rows(dev: DeviceReport) -> list[tuple[str, list[str]]]:
    """(label, one text per flavour column): table_cells with the difference appended."""
    return [
        (label, [f"{text} {delta}" if delta else text for text, delta in cells])
        for label, cells in table_cells(dev)
    ]


def notes(dev: DeviceReport) -> list[str]:
    out = []
    for f in dev.flavours:
        out += [f"{f}: {n}" for n in dev.cells[f].notes]
    return out


def substitution_rows(dev: DeviceReport) -> list[list[str]]:
    """The sources of the device's builds that were not OpenWrt's exact files, one row per
    file: file, class, what stood in (name and version), from where, and which flavours'
    builds used it."""
    rows: dict[tuple[str, str, str], list[str]] = {}
    detail: dict[tuple[str, str, str], list[str]] = {}
    for f in dev.flavours:
        for s in dev.cells[f].substitutions:
            key = (str(s.get("file", "")), str(s.get("class", "")), str(s.get("placed", "")))
            rows.setdefault(key, []).append(f)
            detail[key] = [str(s.get("version", ""))[:12], str(s.get("origin", ""))]
    return [
        [file, cls, placed or "(none)", *detail[(file, cls, placed)], ", ".join(fl)]
        for (file, cls, placed), fl in sorted(rows.items())
    ]


SUBSTITUTION_COLUMNS = ("file", "class", "used instead", "version", "from", "builds")


def package_rows(dev: DeviceReport, n: int) -> list[tuple[str, list[str]]]:
    """The n packages taking the most bytes inside the squashfs (in any column), with their
    bytes per flavour: where the flavours differ."""
    per: dict[str, dict[str, int]] = {}
    for f in dev.flavours:
        for p in dev.cells[f].packages:
            per.setdefault(p["name"], {})[f] = int(p["stored_size"])
    top = sorted(per, key=lambda k: (-max(per[k].values()), k))[:n]
    return [(name, [num(per[name].get(f)) for f in dev.flavours]) for name in top]


class Footnotes:
    """Footnote numbers, one per distinct source, in order of first use."""

    def __init__(self) -> None:
        self.index: dict[Source, int] = {}

    def ref(self, s: Source | None) -> int | None:
        if s is None:
            return None
        return self.index.setdefault(s, len(self.index) + 1)

    def items(self) -> list[tuple[int, str]]:
        return [(n, source_text(s)) for s, n in self.index.items()]


def figure_text(fig: Figure | None) -> str:
    """A comparison figure: separators, one decimal for rates, 'does not fit: N' for a too-big
    image (computed when OpenWrt deleted it)."""
    if fig is None or fig.value is None:
        return DASH
    v = fig.value
    text = f"{v:,}" if isinstance(v, int) else f"{v:,.1f}"
    if fig.computed:
        text += " (computed: image deleted)"
    return f"does not fit: {text}" if fig.verdict == "TOO_BIG" else text


def source_text(s: Source) -> str:
    parts = [s.setting, s.target or "", s.date or "undated", s.record]
    return ", ".join(p for p in parts if p)


def ratio_text(r: Row, column: str) -> str:
    """ " (0.85×)": a performance-lab figure against Mbed TLS's in the same row. Those figures
    are often emulated, where only the ratios between flavours carry over to a router."""
    base, fig = r.values.get(BASE), r.values.get(column)
    if column == BASE or not r.id.startswith("perf:") or base is None or fig is None:
        return ""
    if not isinstance(fig.value, int | float) or not isinstance(base.value, int | float):
        return ""
    return f" ({ratio(fig.value, base.value)})" if base.value else ""


REFERENCE = "reference (router)"


def reference_text(r: Row, columns: list[str]) -> str:
    """The reference's published figures in column order, each flavour's ratio to its Mbed TLS
    figure beside it, as our own ratios are shown: "439,572 / 244,172 (0.56×) / 910,577 (2.07×)"."""
    base = r.reference.get(BASE)
    parts = []
    for c in columns:
        v = r.reference.get(c)
        if v is None:
            parts.append(DASH)
            continue
        text = f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"
        parts.append(text + (f" ({ratio(v, base)})" if base and c != BASE else ""))
    return " / ".join(parts) if any(c in r.reference for c in columns) else ""


def has_reference(t: Table) -> bool:
    return any(r.reference for r in t.rows)


def comparison_rows(t: Table, notes: Footnotes) -> list[tuple[str, str, list[str]]]:
    """(label, unit, texts with a [n] source mark) for the terminal and Markdown; the
    reference's figures as a last column when a row of the table has them."""
    out = []
    for r in t.rows:
        vals = []
        for c in t.columns:
            fig = r.values.get(c)
            n = notes.ref(fig.source) if fig else None
            vals.append(figure_text(fig) + ratio_text(r, c) + (f" [{n}]" if n else ""))
        if has_reference(t):
            vals.append(reference_text(r, t.columns) or DASH)
        out.append((r.label, r.unit, vals))
    return out


def matrix_text(c: MatrixCell) -> str:
    """'fits, +1,234,567 B (+18 blocks)' / 'does not fit, -12,345 B (-1 blocks)' / 'unknown'."""
    word = {"FITS": "fits", "TOO_BIG": "does not fit"}.get(c.verdict, "unknown")
    if c.headroom is None:
        return word
    blocks = f" ({c.headroom_blocks:+} blocks)" if c.headroom_blocks is not None else ""
    return f"{word}, {c.headroom:+,} B{blocks}"


def matrix_rows(rows: list[MatrixRow]) -> tuple[list[str], list[tuple[MatrixRow, list[str]]]]:
    cols = list(dict.fromkeys(f for r in rows for f in r.cells))
    return cols, [
        (r, [matrix_text(r.cells[f]) if f in r.cells else DASH for f in cols]) for r in rows
    ]


def delta_blocks_text(d: CellDelta) -> str:
    """'+12,345 B, +1 erase blocks': the image against the baseline in bytes and blocks."""
    if d.image is None:
        return DASH
    blocks = "" if d.erase_blocks is None else f", {d.erase_blocks:+} erase blocks"
    return f"{d.image:+,} B{blocks}"


def baseline_rows(dev: DeviceReport, base: Baseline | None) -> list[tuple[str, list[str]]]:
    """Rows 'vs baseline' under a device's table: TLS, rootfs, image (+ blocks), headroom."""
    if base is None or dev.profile not in base.deltas:
        return []
    ds = base.deltas[dev.profile]
    getters: tuple[tuple[str, Callable[[CellDelta], str]], ...] = (
        ("TLS libraries (xz)", lambda d: signed(d.tls_xz)),
        ("Root filesystem", lambda d: signed(d.rootfs)),
        ("Firmware image", delta_blocks_text),
        ("Headroom", lambda d: signed(d.headroom)),
    )
    return [
        (f"{label} vs baseline", [get(ds[f]) if f in ds else DASH for f in dev.flavours])
        for label, get in getters
    ]


def gate_lines(report: SizeReport) -> list[str]:
    """'fail-on headroom<64KiB: BROKEN by <profile>/<flavour>: headroom +1,000 B < +65,536 B'."""
    out = []
    for g in report.gates:
        if g.ok:
            skipped = f", {len(g.unchecked)} not checked: {g.unchecked[0]}" if g.unchecked else ""
            out.append(f"fail-on {g.rule}: ok ({g.checked} checked{skipped})")
        out += [f"fail-on {g.rule}: BROKEN by {b.profile}/{b.flavour}: {b.text}" for b in g.broken]
    return out
