"""Size-report renderers, one small module per format. ``render(report, fmt)`` -> text."""

from __future__ import annotations

from ...errors import WolfError
from ..sizereport import SizeReport

FORMATS = ("terminal", "markdown", "json", "csv", "html")


def render(report: SizeReport, fmt: str, *, width: int | None = None) -> str:
    if fmt == "terminal":
        from .terminal import render_terminal

        return render_terminal(report, width=width)
    if fmt == "markdown":
        from .markdown import render_markdown

        return render_markdown(report)
    if fmt == "json":
        from .jsonout import render_json

        return render_json(report)
    if fmt == "csv":
        from .csvout import render_csv

        return render_csv(report)
    if fmt == "html":
        from .html import render_html

        return render_html(report)
    raise WolfError(f"unknown report format {fmt!r}", hint=f"one of: {', '.join(FORMATS)}")
