"""CSV: one line per device, flavour and row; plain integers for spreadsheets."""

from __future__ import annotations

import csv
import io

from ..sizereport import BASELINE, MEMORY_FIELDS, ROWS, SizeReport

HEADER = (
    "profile",
    "flavour",
    "row",
    "value",
    "delta_vs_" + BASELINE,
    "verdict",
    "source",
    "delta_vs_baseline",
)


def render_csv(report: SizeReport) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    for dev in report.devices:
        for f in dev.flavours:
            c = dev.cells[f]
            rows: list[tuple[str, object]] = [(r, c.value(r)) for r, _label in ROWS]
            rows += [("headroom_blocks", c.headroom_blocks)]
            rows += [(f"mem_{k}_kb", c.mem_kb[k]) for k in MEMORY_FIELDS if k in c.mem_kb]
            base = report.baseline.deltas.get(dev.profile, {}).get(f) if report.baseline else None
            for row, v in rows:
                d = dev.deltas.get(f, {}).get(row)
                b = getattr(base, row, None) if base else None
                w.writerow(
                    (dev.profile, f, row, "" if v is None else v, "" if d is None else d,
                     c.verdict, c.source, "" if b is None else b)
                )  # fmt: skip
    for t in report.comparison:  # the comparison's figures: row "<table>:<row id>"
        for r in t.rows:
            for f, fig in r.values.items():
                value = "" if fig.value is None else fig.value
                src = fig.source.record if fig.source else ""
                w.writerow(
                    (r.device or "", f, f"{t.id}:{r.id}", value, "", fig.verdict or "", src, "")
                )
    return buf.getvalue()
