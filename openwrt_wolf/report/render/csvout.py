"""CSV: one line per device, flavour and row; plain integers for spreadsheets."""

from __future__ import annotations

import csv
import io

from ..sizereport import BASELINE, MEMORY_FIELDS, ROWS, SizeReport

HEADER = ("profile", "flavour", "row", "value", "delta_vs_" + BASELINE, "verdict", "source")


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
            for row, v in rows:
                d = dev.deltas.get(f, {}).get(row)
                w.writerow(
                    (dev.profile, f, row, "" if v is None else v, "" if d is None else d,
                     c.verdict, c.source)
                )  # fmt: skip
    return buf.getvalue()
