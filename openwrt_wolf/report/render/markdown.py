"""Markdown: a table per device, like the published comparison, then notes. Every text goes
in through escape.markdown_cell (in a line we began) or escape.markdown (where it begins a
line): a name cannot add a heading, HTML or a table cell."""

from __future__ import annotations

from ...trust.escape import markdown as line
from ...trust.escape import markdown_cell as md
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


def _row(*cells: str) -> str:
    return "| " + " | ".join(md(c) for c in cells) + " |"


def render_markdown(report: SizeReport) -> str:
    out: list[str] = []
    for dev in report.devices:
        where = ", ".join(x for x in (dev.target, dev.release and f"OpenWrt {dev.release}") if x)
        out.append(f"### {md(dev.title)} ({md(dev.profile)}{', ' + md(where) if where else ''})\n")
        out.append(_row("", *dev.flavours))
        out.append("|---|" + "---:|" * len(dev.flavours))
        for label, vals in table_rows(dev) + baseline_rows(dev, report.baseline):
            out.append(_row(label, *vals))
        out.append("")
        pkgs = package_rows(dev, report.top_packages) if report.top_packages else []
        if pkgs:
            out.append(_row("package (bytes in the squashfs)", *dev.flavours))
            out.append("|---|" + "---:|" * len(dev.flavours))
            out += [_row(name, *vals) for name, vals in pkgs]
            out.append("")
        subs = substitution_rows(dev)
        if subs:
            out.append(_row(*SUBSTITUTION_COLUMNS))
            out.append("|---" * len(SUBSTITUTION_COLUMNS) + "|")
            out += [_row(*row) for row in subs]
            out.append("")
        out += [f"- {line(n)}" for n in notes(dev)]
        if notes(dev):
            out.append("")
    if report.footprints:
        out.append("### TLS library footprint (cross-built)\n")
        out.append("| library | version | config | arch | installed | xz | squashfs cost |")
        out.append("|---|---|---|---|---:|---:|---:|")
        for fp in report.footprints:
            out.append(
                _row(fp.flavour, fp.version or "", fp.config, fp.arch or "", num(fp.installed),
                     num(fp.xz), num(fp.squashfs_cost))
            )  # fmt: skip
        out.append("")
    marks = Footnotes()
    out += _comparison(report, marks)
    if len(report.matrix) > 1:
        out += _matrix(report)
    out.append(f"Sizes in bytes. TLS libraries compressed with {report.xz_settings}.\n")
    out += [f"{mark}. {md(text)}" for mark, text in marks.items()]
    if report.baseline:
        out.append(f"\nBaseline: {md(report.baseline.label)}.")
    out += [f"- {line(n)}" for n in report.notes]
    out += [f"- {line(g)}" for g in gate_lines(report)]
    return "\n".join(out) + "\n"


def _comparison(report: SizeReport, marks: Footnotes) -> list[str]:
    out = []
    for t in report.comparison:
        out.append(f"### {md(t.title)}\n")
        if not t.rows:
            out += ["No records in the store yet.", ""]
            continue
        cols = [*t.columns, *([REFERENCE] if has_reference(t) else [])]
        out.append(_row("", "unit", *cols))
        out.append("|---|---|" + "---:|" * len(cols))
        for label, unit, vals in comparison_rows(t, marks):
            out.append(_row(label, unit, *vals))
        out.append("")
        out += [f"- note: {md(n)}" for n in t.notes]
    return out


def _matrix(report: SizeReport) -> list[str]:
    cols, rows = matrix_rows(report.matrix)
    out = [
        "### Fits: every device × flavour (headroom, tightest first)\n",
        _row("device", "target", "release", *cols),
        "|---|---|---|" + "---:|" * len(cols),
    ]
    out += [_row(r.profile, r.target or "", r.release or "", *vals) for r, vals in rows]
    return [*out, ""]
