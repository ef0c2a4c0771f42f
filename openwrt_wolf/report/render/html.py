"""HTML: one self-contained page (CSS, SVG plots and the sort script inline; nothing fetched),
rendered with jinja2 from templates/size-report.html.j2. Text comes from cells.py like the
other formats; every figure links to its source in the footnotes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2
import markupsafe

from ...paths import PROJECT_ROOT
from ...trust import escape
from .. import plots
from ..model import Figure, Table
from ..sizereport import SizeReport
from .cells import (
    DASH,
    REFERENCE,
    SUBSTITUTION_COLUMNS,
    Footnotes,
    baseline_rows,
    figure_text,
    gate_lines,
    has_reference,
    matrix_text,
    notes,
    num,
    package_rows,
    ratio_text,
    reference_text,
    source_text,
    substitution_rows,
    table_cells,
)

TEMPLATE = "size-report.html.j2"
TLS_PLOT_ROWS = 12  # the TLS plot shows the cross-built libraries and the first devices


@dataclass(frozen=True)
class HtmlCell:
    """One table cell of the page, the same fields whether it holds a figure or not (the
    template reads each of them; StrictUndefined makes a missing one an error)."""

    text: str
    value: int | float | str | None = ""  # data-value, for sorting
    cls: str = "none"
    ref: int | None = None  # footnote number
    title: str = ""  # the source, as a tooltip


EMPTY = HtmlCell(DASH)


def _cell(fig: Figure | None, sources: Footnotes, ratio: str = "") -> HtmlCell:
    if fig is None:
        return EMPTY
    return HtmlCell(
        text=figure_text(fig) + ratio,
        value="" if fig.value is None else fig.value,
        cls={"TOO_BIG": "bad", "FITS": "good"}.get(fig.verdict or "", ""),
        ref=sources.ref(fig.source),
        title=source_text(fig.source) if fig.source else "",
    )


def _table(t: Table, sources: Footnotes) -> dict[str, Any]:
    return {
        "id": t.id,
        "title": t.title,
        "columns": t.columns,
        "reference": REFERENCE if has_reference(t) else "",
        "notes": t.notes,
        "rows": [
            {
                "label": r.label,
                "unit": r.unit,
                "id": r.id,
                "cells": [_cell(r.values.get(c), sources, ratio_text(r, c)) for c in t.columns],
                "reference": reference_text(r, t.columns) or DASH,
            }
            for r in t.rows
        ],
    }


def _plots(report: SizeReport) -> list[dict[str, str]]:
    out = []
    groups = [
        (
            d.title,
            d.blocksize,
            [(f, {"image": d.cells[f].image, "limit": d.cells[f].limit}) for f in d.flavours],
        )
        for d in report.devices
        if any(d.cells[f].limit is not None for f in d.flavours)
    ]
    for i, svg in enumerate(plots.fit_bars(groups)):
        out.append(
            {
                "id": f"plot-fit-{i}",
                "title": "Firmware image against the flash limit",
                "caption": "per device and flavour: the image (bar), the binding limit "
                "(black line), erase-block boundaries (white lines), headroom (green) and "
                "bytes over the limit (red)",
                "svg": svg,
            }
        )
    tables = {t.id: t for t in report.comparison}
    flash = tables.get("flash")
    if flash:
        tls = [r for r in flash.rows if r.id.startswith("tls_xz:")][:TLS_PLOT_ROWS]
        if tls:
            out.append(
                {
                    "id": "plot-tls",
                    "title": "TLS libraries (xz)",
                    "caption": "xz -9e of each TLS library file, summed",
                    "svg": plots.grouped_bars(tls, flash.columns, "TLS libraries (xz)"),
                }
            )
    for tid in ("memory", "performance"):
        t = tables.get(tid)
        if t and t.rows:
            for unit in dict.fromkeys(r.unit for r in t.rows):
                rows = [r for r in t.rows if r.unit == unit]
                # what the rows measure ("Heap peak during a TLS handshake"), else the unit
                measures = {r.label.split(",")[0] for r in rows}
                what = measures.pop() if len(measures) == 1 else unit
                out.append(
                    {
                        "id": f"plot-{tid}-{len(out)}",
                        "title": f"{t.title}: {what}",
                        "caption": "",
                        "svg": plots.grouped_bars(rows, t.columns, what),
                    }
                )
    return out


def environment() -> jinja2.Environment:
    """The one jinja2 set-up of the HTML pages (size report, history): autoescape, every
    value printable, a missing field an error."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROJECT_ROOT / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=printable_value,
    )


def printable_value(v: Any) -> Any:
    """Every value the template prints, control characters shown (escape.printable) before
    autoescape: the page stays safe to open, and to cat on a terminal."""
    if isinstance(v, str) and not isinstance(v, markupsafe.Markup):  # not the plots' SVG
        return escape.printable(v)
    return v


def render_html(report: SizeReport) -> str:
    sources = Footnotes()
    tables = [_table(t, sources) for t in report.comparison]
    devices = [
        {
            "profile": d.profile,
            "title": d.title,
            "target": d.target,
            "release": d.release,
            "flavours": d.flavours,
            "rows": table_cells(d)
            + [
                (label, [(v, "") for v in vals])
                for label, vals in baseline_rows(d, report.baseline)
            ],
            "packages": package_rows(d, report.top_packages) if report.top_packages else [],
            "notes": notes(d),
            "substitutions": substitution_rows(d),
            "substitution_columns": SUBSTITUTION_COLUMNS,
        }
        for d in report.devices
    ]
    columns = list(dict.fromkeys(f for r in report.matrix for f in r.cells))
    matrix = [
        {
            "profile": r.profile,
            "title": r.title,
            "target": r.target or "",
            "release": r.release or "",
            "min": "" if r.min_headroom is None else r.min_headroom,
            "cells": [
                HtmlCell(
                    matrix_text(r.cells[f]),
                    r.cells[f].headroom,
                    {"TOO_BIG": "bad", "FITS": "good"}.get(r.cells[f].verdict, "none"),
                )
                if f in r.cells
                else EMPTY
                for f in columns
            ],
        }
        for r in report.matrix
    ]
    return (
        environment()
        .get_template(TEMPLATE)
        .render(
            report=report,
            tables=tables,
            devices=devices,
            matrix=matrix,
            matrix_columns=columns,
            plots=_plots(report),
            sources=sources.items(),
            gates=gate_lines(report),
            footprints=[
                {
                    **fp.__dict__,
                    "installed": num(fp.installed),
                    "xz": num(fp.xz),
                    "squashfs_cost": num(fp.squashfs_cost),
                }
                for fp in report.footprints
            ],
        )
    )
