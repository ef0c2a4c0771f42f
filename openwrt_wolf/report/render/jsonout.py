"""JSON: the whole model, schema "openwrt-wolf/size-report/2" (docs/results.md)."""

from __future__ import annotations

from ...trust import escape
from ..sizereport import SizeReport


def render_json(report: SizeReport) -> str:
    return escape.json_text(report.to_dict(), "size report")
