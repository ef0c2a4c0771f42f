"""Markdown: a table per device, like the published comparison, then notes."""

from __future__ import annotations

from ..sizereport import SizeReport
from .cells import notes, num, table_rows


def _esc(s: str) -> str:
    return s.replace("|", "\\|")


def render_markdown(report: SizeReport) -> str:
    out: list[str] = []
    for dev in report.devices:
        where = ", ".join(x for x in (dev.target, dev.release and f"OpenWrt {dev.release}") if x)
        out.append(f"### {dev.title} (`{dev.profile}`{', ' + where if where else ''})\n")
        out.append("| | " + " | ".join(dev.flavours) + " |")
        out.append("|---|" + "---:|" * len(dev.flavours))
        for label, vals in table_rows(dev):
            out.append(f"| {label} | " + " | ".join(_esc(v) for v in vals) + " |")
        out.append("")
        out += [f"- {_esc(n)}" for n in notes(dev)]
        if notes(dev):
            out.append("")
    if report.footprints:
        out.append("### TLS library footprint (cross-built)\n")
        out.append("| library | config | version | stripped | xz |")
        out.append("|---|---|---|---:|---:|")
        for fp in report.footprints:
            out.append(
                f"| {fp.flavour} | {fp.config} | {fp.version or ''} | "
                f"{num(fp.stripped_size)} | {num(fp.xz_size)} |"
            )
        out.append("")
    out.append(f"Sizes in bytes. TLS libraries compressed with {report.xz_settings}.")
    out += [f"- {n}" for n in report.notes]
    return "\n".join(out) + "\n"
