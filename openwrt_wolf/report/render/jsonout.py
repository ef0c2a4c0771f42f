"""JSON: the whole model, schema "openwrt-wolf/size-report/1" (docs/results.md)."""

from __future__ import annotations

import json

from ..sizereport import SizeReport


def render_json(report: SizeReport) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=False) + "\n"
