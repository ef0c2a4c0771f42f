"""Terminal: a rich table per device; 'does not fit' cells in red. Every text from a record
or a directory goes in through escape.markup (its [ escaped, control characters shown)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from ... import term
from ...trust.escape import markup as esc
from ..sizereport import SizeReport
from .cells import (
    REFERENCE,
    SUBSTITUTION_COLUMNS,
    Footnotes,
    baseline_rows,
    comparison_rows,
    gate_lines,
    has_reference,
    matrix_rows,
    notes,
    num,
    package_rows,
    substitution_rows,
    table_rows,
)


def _style(text: str) -> str:
    """A cell's text, escaped, in red when it does not fit and green for 'yes'."""
    if text.startswith("does not fit"):
        return f"[bold red]{esc(text)}[/]"
    if text == "yes":
        return f"[green]{text}[/]"
    return esc(text)


def render_terminal(report: SizeReport, *, width: int | None = None) -> str:
    buf = io.StringIO()
    con = term.console(file=buf, width=width or 200, force_terminal=width is None,
                       highlight=False)  # fmt: skip
    for dev in report.devices:
        where = ", ".join(x for x in (dev.target, dev.release and f"OpenWrt {dev.release}") if x)
        con.print(f"{dev.title} ({dev.profile}{', ' + where if where else ''})", style="bold",
                  markup=False)  # fmt: skip
        t = Table()
        t.add_column("bytes", style="bold")
        for f in dev.flavours:
            t.add_column(esc(f), justify="right")
        for label, vals in table_rows(dev) + baseline_rows(dev, report.baseline):
            t.add_row(esc(label), *(_style(v) for v in vals))
        con.print(t)
        pkgs = package_rows(dev, report.top_packages) if report.top_packages else []
        if pkgs:
            pt = Table(title="largest packages (bytes in the squashfs)")
            pt.add_column("package")
            for f in dev.flavours:
                pt.add_column(esc(f), justify="right")
            for name, vals in pkgs:
                pt.add_row(esc(name), *vals)
            con.print(pt)
        subs = substitution_rows(dev)
        if subs:
            st = Table(title="sources that were not OpenWrt's exact files")
            for col in SUBSTITUTION_COLUMNS:
                st.add_column(col, overflow="fold")
            for row in subs:
                st.add_row(*(esc(v) for v in row))
            con.print(st)
        for n in notes(dev):
            con.print(f"  note: {n}", markup=False)
    if report.footprints:
        t = Table(title="TLS library footprint (cross-built)")
        numeric = ("installed", "xz", "squashfs cost")
        for col in ("library", "version", "config", "arch", *numeric):
            t.add_column(col, justify="right" if col in numeric else "left")
        for fp in report.footprints:
            t.add_row(
                esc(fp.flavour), esc(fp.version or ""), esc(fp.config), esc(fp.arch or ""),
                num(fp.installed), num(fp.xz), num(fp.squashfs_cost),
            )  # fmt: skip
        con.print(t)
    marks = Footnotes()
    _comparison(con, report, marks)
    if len(report.matrix) > 1:
        _matrix(con, report)
    con.print(f"TLS libraries compressed with {report.xz_settings}.", markup=False)
    for mark, text in marks.items():
        con.print(f"[{mark}] {text}", markup=False, highlight=False)
    if report.baseline:
        con.print(f"baseline: {report.baseline.label}", markup=False)
        if report.baseline.missing:
            con.print(f"not in the baseline: {', '.join(report.baseline.missing)}", markup=False)
    for n in report.notes:
        con.print(f"note: {n}", markup=False)
    for line in gate_lines(report):
        con.print(line, markup=False, style="bold red" if "BROKEN" in line else None)
    return buf.getvalue()


def _comparison(con: Console, report: SizeReport, marks: Footnotes) -> None:
    for t in report.comparison:
        if not t.rows:
            con.print(f"{t.title}: no records in the store yet", markup=False)
            continue
        tab = Table(title=f"{t.title} (the comparison)")
        tab.add_column("", style="bold")
        tab.add_column("unit")
        for c in [*t.columns, *([REFERENCE] if has_reference(t) else [])]:
            tab.add_column(esc(c), justify="right")
        for label, unit, vals in comparison_rows(t, marks):
            tab.add_row(esc(label), esc(unit), *(_style(v) for v in vals))
        con.print(tab)
        for n in t.notes:
            con.print(f"  note: {n}", markup=False)


def _matrix(con: Console, report: SizeReport) -> None:
    cols, rows = matrix_rows(report.matrix)
    tab = Table(title="Fits: every device × flavour (headroom, tightest first)")
    for c in ("device", "target", "release"):
        tab.add_column(c)
    for c in cols:
        tab.add_column(esc(c), justify="right")
    for r, vals in rows:
        tab.add_row(esc(r.profile), esc(r.target or ""), esc(r.release or ""),
                    *(_style(v) for v in vals))  # fmt: skip
    con.print(tab)
