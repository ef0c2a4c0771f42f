"""`invoke history` in every format: a table of the device's builds over time; in HTML also
a line plot of the image against the limit per flavour."""

from __future__ import annotations

import csv
import io

from rich.table import Table

from ... import term
from ...errors import WolfError
from ...trust import escape
from .. import plots
from ..history import History, Point
from .cells import DASH, num

FORMATS = ("terminal", "markdown", "json", "csv", "html")
HEADER = (
    "date",
    "release",
    "flavour",
    "image",
    "headroom",
    "TLS libraries (xz)",
    "MemFree (kB)",
    "fits",
    "source",
)


def _headroom(p: Point) -> str:
    if p.headroom is None:
        return DASH
    blocks = f" ({p.headroom_blocks:+} blocks)" if p.headroom_blocks is not None else ""
    return f"{p.headroom:+,}{blocks}"


def _image(p: Point) -> str:
    return num(p.image) + (" (computed)" if p.image_computed else "")


def _fits(p: Point) -> str:
    return {"FITS": "yes", "TOO_BIG": "does not fit"}.get(p.verdict, "unknown")


def rows(h: History) -> list[list[str]]:
    return [
        [
            p.created,
            p.release,
            p.flavour,
            _image(p),
            _headroom(p),
            num(p.tls_xz),
            num(p.memfree_kb),
            _fits(p),
            p.source,
        ]
        for p in h.points
    ]


def render_history(h: History, fmt: str, *, width: int | None = None) -> str:
    if fmt == "terminal":
        buf = io.StringIO()
        con = term.console(file=buf, width=width or 200, force_terminal=width is None,
                           highlight=False)  # fmt: skip
        t = Table(title=escape.markup(f"{h.title} ({h.device}): builds over time"))
        for i, col in enumerate(HEADER):
            t.add_column(col, justify="right" if 3 <= i <= 6 else "left")
        for r in rows(h):
            t.add_row(*(escape.markup(x) for x in r))
        con.print(t)
        return buf.getvalue()
    if fmt == "markdown":
        out = [
            f"### {escape.markdown_cell(h.title)} ({escape.markdown_cell(h.device)}): "
            "builds over time\n",
            "| " + " | ".join(HEADER) + " |",
            "|---|---|---|---:|---:|---:|---:|---|---|",
        ]
        out += ["| " + " | ".join(escape.markdown_cell(x) for x in r) + " |" for r in rows(h)]
        return "\n".join(out) + "\n"
    if fmt == "json":
        return escape.json_text(h.to_dict(), "history")
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(
            (
                "created",
                "release",
                "flavour",
                "image",
                "image_computed",
                "limit",
                "headroom",
                "headroom_blocks",
                "verdict",
                "tls_xz",
                "memfree_kb",
                "source",
            )
        )
        for p in h.points:
            w.writerow(
                escape.csv_cell(v)
                for v in (
                    p.created,
                    p.release,
                    p.flavour,
                    p.image,
                    p.image_computed,
                    p.limit,
                    p.headroom,
                    p.headroom_blocks,
                    p.verdict,
                    p.tls_xz,
                    p.memfree_kb,
                    p.source,
                )
            )
        return buf.getvalue()
    if fmt == "html":
        series = {
            f: [(p.created, p.image) for p in h.points if p.flavour == f and p.image]
            for f in h.flavours
        }
        limits = [(p.created, p.limit) for p in h.points if p.limit is not None]
        svg = plots.history_lines(
            {k: v for k, v in series.items() if v}, limits, f"{h.title}: firmware image over time"
        )
        from .html import environment

        page = environment().get_template("history.html.j2")
        return page.render(h=h, header=HEADER, rows=rows(h), svg=svg)
    raise WolfError(f"unknown --format {fmt!r}", hint=f"one of: {', '.join(FORMATS)}")
