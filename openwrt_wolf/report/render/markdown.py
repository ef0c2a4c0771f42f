"""Markdown: a table per device, like the published comparison, then notes."""

from __future__ import annotations

from ..sizereport import SizeReport
from .cells import (
    SUBSTITUTION_COLUMNS,
    Footnotes,
    baseline_rows,
    comparison_rows,
    gate_lines,
    matrix_rows,
    notes,
    num,
    package_rows,
    substitution_rows,
    table_rows,
)


def _esc(s: str) -> str:
    return s.replace("|", "\\|")


def render_markdown(report: SizeReport) -> str:
    out: list[str] = []
    for dev in report.devices:
        where = ", ".join(x for x in (dev.target, dev.release and f"OpenWrt {dev.release}") if x)
        out.append(f"### {dev.title} (`{dev.profile}`{', ' + where if where else ''})\n")
        out.append("| | " + " | ".join(dev.flavours) + " |")
        out.append("|---|" + "---:|" * len(dev.flavours))
        for label, vals in table_rows(dev) + baseline_rows(dev, report.baseline):
            out.append(f"| {label} | " + " | ".join(_esc(v) for v in vals) + " |")
        out.append("")
        pkgs = package_rows(dev, report.top_packages) if report.top_packages else []
        if pkgs:
            out.append("| package (bytes in the squashfs) | " + " | ".join(dev.flavours) + " |")
            out.append("|---|" + "---:|" * len(dev.flavours))
            out += [f"| {name} | " + " | ".join(vals) + " |" for name, vals in pkgs]
            out.append("")
        subs = substitution_rows(dev)
        if subs:
            out.append("| " + " | ".join(SUBSTITUTION_COLUMNS) + " |")
            out.append("|---" * len(SUBSTITUTION_COLUMNS) + "|")
            out += ["| " + " | ".join(_esc(v) for v in row) + " |" for row in subs]
            out.append("")
        out += [f"- {_esc(n)}" for n in notes(dev)]
        if notes(dev):
            out.append("")
    if report.footprints:
        out.append("### TLS library footprint (cross-built)\n")
        out.append("| library | version | config | arch | installed | xz | squashfs cost |")
        out.append("|---|---|---|---|---:|---:|---:|")
        for fp in report.footprints:
            out.append(
                f"| {fp.flavour} | {fp.version or ''} | {fp.config} | {fp.arch or ''} | "
                f"{num(fp.installed)} | {num(fp.xz)} | {num(fp.squashfs_cost)} |"
            )
        out.append("")
    marks = Footnotes()
    out += _comparison(report, marks)
    if len(report.matrix) > 1:
        out += _matrix(report)
    out.append(f"Sizes in bytes. TLS libraries compressed with {report.xz_settings}.\n")
    out += [f"{mark}. {_esc(text)}" for mark, text in marks.items()]
    if report.baseline:
        out.append(f"\nBaseline: {_esc(report.baseline.label)}.")
    out += [f"- {n}" for n in report.notes]
    out += [f"- {_esc(line)}" for line in gate_lines(report)]
    return "\n".join(out) + "\n"


def _comparison(report: SizeReport, marks: Footnotes) -> list[str]:
    out = []
    for t in report.comparison:
        out.append(f"### {t.title}\n")
        if not t.rows:
            out += ["No records in the store yet.", ""]
            continue
        out.append("| | unit | " + " | ".join(t.columns) + " |")
        out.append("|---|---|" + "---:|" * len(t.columns))
        for label, unit, vals in comparison_rows(t, marks):
            out.append(f"| {_esc(label)} | {unit} | " + " | ".join(_esc(v) for v in vals) + " |")
        out.append("")
        out += [f"- note: {_esc(n)}" for n in t.notes]
    return out


def _matrix(report: SizeReport) -> list[str]:
    cols, rows = matrix_rows(report.matrix)
    out = [
        "### Fits: every device × flavour (headroom, tightest first)\n",
        "| device | target | release | " + " | ".join(cols) + " |",
        "|---|---|---|" + "---:|" * len(cols),
    ]
    out += [
        f"| {r.profile} | {r.target or ''} | {r.release or ''} | " + " | ".join(vals) + " |"
        for r, vals in rows
    ]
    return [*out, ""]
