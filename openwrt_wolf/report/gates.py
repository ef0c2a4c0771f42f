"""--fail-on rules: a CI job fails (exit 1) when an image stops fitting or grows past a budget.

A rule names a measure, a comparison and a threshold, and is *broken* when the comparison
holds: `headroom<64KiB` is broken by a cell with less than 64 KiB headroom. `fits` is broken
by an image that does not fit. Measures are one line each in MEASURES; `growth` and `blocks`
compare with --baseline.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import WolfError
from ..units import parse_size
from .model import Baseline, Breach, CellDelta, GateResult
from .sizereport import Cell, DeviceReport


@dataclass(frozen=True)
class Measure:
    unit: str  # "B" (threshold takes k/KiB/M suffixes) or "blocks" (a count)
    needs_baseline: bool
    get: Callable[[Cell, CellDelta | None], int | None]
    what: str


MEASURES: dict[str, Measure] = {
    "headroom": Measure("B", False, lambda c, d: c.headroom, "bytes the rootfs may still grow"),
    "margin": Measure("B", False, lambda c, d: c.margin, "limit - checked size"),
    "headroom_blocks": Measure(
        "blocks", False, lambda c, d: c.headroom_blocks, "whole erase blocks under the limit"
    ),
    "image": Measure("B", False, lambda c, d: c.image, "firmware image bytes"),
    "rootfs": Measure("B", False, lambda c, d: c.rootfs, "root filesystem bytes"),
    "tls": Measure("B", False, lambda c, d: c.tls_xz, "TLS libraries, xz bytes"),
    "growth": Measure(
        "B", True, lambda c, d: d.image if d else None, "firmware image growth over the baseline"
    ),
    "blocks": Measure(
        "blocks",
        True,
        lambda c, d: d.erase_blocks if d else None,
        "erase blocks added over the baseline",
    ),
    "tls_growth": Measure(
        "B",
        True,
        lambda c, d: d.tls_xz if d else None,
        "TLS libraries (xz) growth over the baseline",
    ),
}
OPS: dict[str, Callable[[int, int], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_RULE = re.compile(r"^([a-z_]+)\s*(<=|>=|<|>)\s*([+-]?)\s*(\S+)$")


@dataclass(frozen=True)
class Rule:
    text: str
    measure: str  # key of MEASURES, or "fits"
    op: str = ""
    threshold: int = 0


def _bad(text: str, why: str) -> WolfError:
    names = ", ".join(["fits", *MEASURES])
    return WolfError(
        f"--fail-on {text!r}: {why}",
        hint=f"rules look like fits, headroom<64KiB, growth>4KiB, blocks>+0; measures: {names}",
    )


def parse(spec: str) -> Rule:
    text = spec.strip()
    if text == "fits":
        return Rule(text, "fits")
    m = _RULE.match(text.replace(" ", ""))
    if not m:
        raise _bad(text, "not a rule")
    name, op, sign, value = m.groups()
    meas = MEASURES.get(name)
    if meas is None:
        raise _bad(text, f"unknown measure {name!r}")
    if meas.unit == "blocks":
        if not value.isdigit():
            raise _bad(text, f"{name} counts erase blocks: {value!r} is not a whole number")
        n = int(value)
    else:
        try:
            n = parse_size(value, what=f"--fail-on {text!r} size")
        except WolfError:
            raise _bad(text, f"{value!r} is not a size (e.g. 4096, 4KiB, 64k, 1M)") from None
    return Rule(text, name, op, -n if sign == "-" else n)


def parse_all(specs: list[str]) -> list[Rule]:
    """Rules from repeated options, each possibly comma-separated."""
    return [parse(s) for spec in specs for s in spec.split(",") if s.strip()]


def _fmt(v: int, unit: str) -> str:
    return f"{v:+,} B" if unit == "B" else f"{v:+} blocks"


def check(
    rules: list[Rule], devices: list[DeviceReport], base: Baseline | None
) -> list[GateResult]:
    for r in rules:
        if r.measure in MEASURES and MEASURES[r.measure].needs_baseline and base is None:
            raise _bad(r.text, f"{r.measure} compares with a baseline: give --baseline REF")
    out = []
    for r in rules:
        broken, unchecked, checked = [], [], 0
        for dev in devices:
            for f, c in dev.cells.items():
                where = f"{dev.profile}/{f}"
                if r.measure == "fits":
                    if c.verdict == "UNKNOWN":
                        unchecked.append(f"{where}: no fit verdict")
                        continue
                    checked += 1
                    if c.verdict == "TOO_BIG":
                        text = (
                            f"does not fit: headroom {c.headroom:+,} B"
                            if c.headroom is not None
                            else "does not fit"
                        )
                        broken.append(Breach(dev.profile, f, c.headroom, text))
                    continue
                meas = MEASURES[r.measure]
                d = base.deltas.get(dev.profile, {}).get(f) if base else None
                v = meas.get(c, d)
                if v is None:
                    why = "not in the baseline" if meas.needs_baseline and d is None else "unknown"
                    unchecked.append(f"{where}: {r.measure} {why}")
                    continue
                checked += 1
                if OPS[r.op](v, r.threshold):
                    text = f"{r.measure} {_fmt(v, meas.unit)} {r.op} {_fmt(r.threshold, meas.unit)}"
                    broken.append(Breach(dev.profile, f, v, text))
        out.append(GateResult(r.text, broken, checked, unchecked))
    return out
