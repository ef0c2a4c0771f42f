"""CSV: one line per device, flavour and row; plain integers for spreadsheets. Every cell
goes out through escape.csv_cell: numbers as numbers, text that cannot start a formula."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from ...trust.escape import csv_cell
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
    out = csv.writer(buf, lineterminator="\n")

    def row(cells: Iterable[object]) -> None:
        out.writerow(csv_cell(c) for c in cells)

    row(HEADER)
    for dev in report.devices:
        for f in dev.flavours:
            c = dev.cells[f]
            rows: list[tuple[str, object]] = [(r, c.value(r)) for r, _label in ROWS]
            rows += [("headroom_blocks", c.headroom_blocks)]
            mem = c.memory["boot"].kb if "boot" in c.memory else {}
            rows += [(f"mem_{k}_kb", mem[k]) for k in MEMORY_FIELDS if k in mem]
            base = report.baseline.deltas.get(dev.profile, {}).get(f) if report.baseline else None
            for name, v in rows:
                d = dev.deltas.get(f, {}).get(name)
                b = getattr(base, name, None) if base else None
                row((dev.profile, f, name, v, d, c.verdict, c.source, b))
    for t in report.comparison:  # the comparison's figures: row "<table>:<row id>"
        for r in t.rows:
            for f, fig in r.values.items():
                src = fig.source.record if fig.source else None
                row((r.device, f, f"{t.id}:{r.id}", fig.value, None, fig.verdict, src, None))
    return buf.getvalue()
