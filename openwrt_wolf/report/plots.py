"""The report's plots, drawn with matplotlib to SVG text (inlined in the HTML page).

Plots draw the model's figures; they compute nothing but geometry. Few artists per figure
(one path for all erase-block marks, one collection per colour) keep a 100-device report
quick to draw."""

from __future__ import annotations

import io
from collections.abc import Sequence
from functools import cache
from typing import Any

from ..trust import escape
from .model import Row

KIB = 1024
FLAVOUR_COLOURS = {"mbedtls": "#2e6fb7", "wolfssl": "#e07b1a", "openssl": "#6b7a89"}
OTHER = "#8e5ea2"
TOO_BIG = "#c0392b"
ROOM = "#cfe8cf"
DEVICES_PER_FIGURE = 25
BAR = 0.7  # bar height in row units


@cache
def _mpl() -> Any:
    import matplotlib

    matplotlib.use("svg")  # no display, no Agg raster needed
    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",  # text stays text: smaller, searchable, selectable
            "svg.hashsalt": "openwrt-wolf",  # stable ids: the same report gives the same SVG
            "font.size": 8,
            "font.family": "sans-serif",
            "axes.spines.top": False,
            "axes.spines.right": False,
            "text.parse_math": False,  # a "$" in a name is text, not a formula to parse
        }
    )
    from matplotlib.figure import Figure

    return Figure


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    # bbox "tight": the figure grows to hold its longest tick label instead of cutting it
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE: inlined in HTML
    start, end = text.find("<metadata>"), text.find("</metadata>")
    if 0 <= start < end:  # matplotlib's RDF block: names a generator, says nothing to a reader
        text = text[:start] + text[end + len("</metadata>") :]
    return escape.printable(text)  # names in labels: no control character in the page


def _tick(v: float, _pos: object = None) -> str:
    """A tick label with thousands separators and no exponent: 1,200 or 0.25, never 1e6."""
    return f"{round(v, 6):,.12g}"


def _separators(ax: Any, axis: str = "x") -> None:
    from matplotlib.ticker import FuncFormatter

    (ax.xaxis if axis == "x" else ax.yaxis).set_major_formatter(FuncFormatter(_tick))


# Units the report's rows use for bytes, in bytes (/proc/meminfo's kB are KiB).
BYTE_UNITS = {"B": 1, "kB": KIB, "KiB": KIB}


def byte_scale(largest: float) -> tuple[int, str]:
    """The axis unit for byte values up to ``largest``: KiB below 10 MiB, else MiB."""
    return (KIB, "KiB") if largest < 10 * KIB * KIB else (KIB * KIB, "MiB")


def colour(flavour: str) -> str:
    return FLAVOUR_COLOURS.get(flavour, OTHER)


def fit_bars(
    groups: Sequence[tuple[str, int | None, list[tuple[str, dict[str, Any]]]]],
) -> list[str]:
    """Per device (title, blocksize, [(flavour, cell fields)]): the image against the limit
    per flavour, erase-block boundaries as white lines across the bar, the headroom shaded
    green up to the limit (red: the part over the limit). One SVG per 25 devices."""
    out = []
    for i in range(0, len(groups), DEVICES_PER_FIGURE):
        out.append(_fit_figure(groups[i : i + DEVICES_PER_FIGURE]))
    return out


def _rects(spans: list[tuple[float, float, float]], colour: str) -> Any:
    """One collection of bars (y, left, width): one SVG path element for all of them."""
    from matplotlib.collections import PolyCollection

    half = BAR / 2
    verts = [[(x, y - half), (x + w, y - half), (x + w, y + half), (x, y + half)]
             for y, x, w in spans]  # fmt: skip
    return PolyCollection(verts, facecolors=colour, edgecolors="none")


def _fit_figure(groups: Sequence[tuple[str, int | None, list[tuple[str, dict[str, Any]]]]]) -> str:
    """The device's name labels its group of bars, one bar per flavour in the column order;
    colour tells the flavour (legend)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    Figure = _mpl()
    n_bars = sum(len(g[2]) for g in groups)
    height = 0.7 + 0.2 * n_bars + 0.15 * len(groups)
    fig = Figure(figsize=(8.5, height))
    ax = fig.add_axes((0.26, 0.55 / height, 0.71, 1 - 0.85 / height))
    y = 0.0
    ticks: list[float] = []
    labels: list[str] = []
    spans: dict[str, list[tuple[float, float, float]]] = {"room": [], "over": []}
    bx: list[float] = []
    by: list[float] = []
    lx: list[float] = []
    ly: list[float] = []
    xmax = 0.0
    flavours: list[str] = []
    for title, blocksize, cells in groups:
        top = y
        for flavour, c in cells:
            image, limit = c.get("image"), c.get("limit")
            if flavour not in flavours:
                flavours.append(flavour)
            if image is not None:
                shown = min(image, limit) if limit is not None else image
                spans.setdefault(flavour, []).append((y, 0.0, shown / KIB))
                xmax = max(xmax, image / KIB)
            if image is not None and limit is not None:
                start, width = (limit, image - limit) if image > limit else (image, limit - image)
                spans["over" if image > limit else "room"].append((y, start / KIB, width / KIB))
            if blocksize and image is not None:
                for b in range(blocksize, image + 1, blocksize):
                    bx += [b / KIB, b / KIB, float("nan")]
                    by += [y - BAR / 2, y + BAR / 2, float("nan")]
            y += 1
        ticks.append((top + y - 1) / 2)
        labels.append(title)
        for lim in {c.get("limit") for _, c in cells if c.get("limit") is not None}:
            assert lim is not None
            lx += [lim / KIB, lim / KIB, float("nan")]
            ly += [top - 0.45, y - 0.55, float("nan")]
            xmax = max(xmax, lim / KIB)
        y += 0.6
    colours = {**{f: colour(f) for f in flavours}, "room": ROOM, "over": TOO_BIG}
    for name, rects in spans.items():
        if rects:
            ax.add_collection(_rects(rects, colours[name]))
    if bx:
        ax.plot(bx, by, color="white", lw=0.35)
    if lx:
        ax.plot(lx, ly, color="black", lw=1.4)
    ax.set_yticks(ticks, labels)
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(y - 0.4, -0.6)
    ax.set_xlim(0, xmax * 1.04 if xmax else 1)
    ax.set_xlabel("KiB (white lines: erase-block boundaries)")
    _separators(ax)
    handles: list[Any] = [Patch(color=colour(f), label=f) for f in flavours]
    handles += [Patch(color=ROOM, label="headroom"), Patch(color=TOO_BIG, label="over the limit")]
    handles.append(Line2D([], [], color="black", lw=1.4, label="limit"))
    fig.legend(handles=handles, loc="upper right", fontsize=7, ncols=6, frameon=False)
    return _svg(fig)


def grouped_bars(rows: Sequence[Row], columns: Sequence[str], title: str) -> str:
    """One horizontal bar per (row, flavour); rows in table order, one unit per figure."""
    Figure = _mpl()
    n = sum(len(r.values) for r in rows)
    height = 0.7 + 0.2 * n + 0.25 * len(rows)
    fig = Figure(figsize=(8.5, height))
    ax = fig.add_axes((0.34, 0.55 / height, 0.62, 1 - 0.85 / height))
    y = 0.0
    ticks: list[float] = []
    labels: list[str] = []
    per: dict[str, tuple[list[float], list[float]]] = {}
    for r in rows:
        for f in columns:
            fig_ = r.values.get(f)
            if fig_ is None or fig_.value is None:
                continue
            per.setdefault(f, ([], []))[0].append(y)
            per[f][1].append(float(fig_.value))
            ticks.append(y)
            labels.append(f"{_short(r.label)} · {f}")
            y += 1
        y += 0.5
    units = sorted({r.unit for r in rows})
    label = ", ".join(units)
    if len(units) == 1 and units[0] in BYTE_UNITS:  # bytes read in KiB or MiB, never "1e6"
        per_unit = BYTE_UNITS[units[0]]
        largest = max((w * per_unit for _, ws in per.values() for w in ws), default=0.0)
        div, label = byte_scale(largest)
        per = {f: (ys, [w * per_unit / div for w in ws]) for f, (ys, ws) in per.items()}
    for f, (ys, ws) in per.items():
        ax.barh(ys, ws, height=0.7, color=colour(f), label=f)
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.set_ylim(y - 0.3, -0.8)
    ax.set_xlabel(label)
    _separators(ax)
    ax.set_title(title, fontsize=9, loc="left")
    return _svg(fig)


def _short(label: str, n: int = 48) -> str:
    return label if len(label) <= n else label[: n - 1] + "…"


def history_lines(
    series: dict[str, list[tuple[str, int]]], limits: list[tuple[str, int]], title: str
) -> str:
    """Image bytes over time, one line per flavour (x: record dates as text, in order)."""
    Figure = _mpl()
    fig = Figure(figsize=(8.5, 3.2))
    ax = fig.add_axes((0.1, 0.22, 0.86, 0.68))
    dates = sorted({d for pts in series.values() for d, _ in pts} | {d for d, _ in limits})
    pos = {d: i for i, d in enumerate(dates)}
    for f, pts in series.items():
        ax.plot(
            [pos[d] for d, _ in pts],
            [v / KIB for _, v in pts],
            marker="o",
            ms=3,
            color=colour(f),
            label=f,
        )
    if limits:
        ax.step(
            [pos[d] for d, _ in limits],
            [v / KIB for _, v in limits],
            where="post",
            color="black",
            lw=1,
            ls="--",
            label="limit",
        )
    step = max(1, len(dates) // 8)
    ax.set_xticks(
        range(0, len(dates), step),
        [dates[i][:16] for i in range(0, len(dates), step)],
        rotation=20,
        fontsize=6,
    )
    ax.set_ylabel("firmware image, KiB")
    _separators(ax, "y")
    ax.set_title(title, fontsize=9, loc="left")
    ax.legend(fontsize=7, frameon=False)
    return _svg(fig)
