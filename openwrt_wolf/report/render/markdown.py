"""Markdown: a table per device, like the published comparison, then notes."""

from __future__ import annotations

from ..sizereport import SizeReport
from .cells import notes, num, package_rows, table_rows


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
        pkgs = package_rows(dev, report.top_packages) if report.top_packages else []
        if pkgs:
            out.append("| package (bytes in the squashfs) | " + " | ".join(dev.flavours) + " |")
            out.append("|---|" + "---:|" * len(dev.flavours))
            out += [f"| {name} | " + " | ".join(vals) + " |" for name, vals in pkgs]
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
    out.append(f"Sizes in bytes. TLS libraries compressed with {report.xz_settings}.")
    out += [f"- {n}" for n in report.notes]
    return "\n".join(out) + "\n"
