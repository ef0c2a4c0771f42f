"""--baseline REF: what each (device, flavour) was before. REF is a saved JSON report
(`size-report --format json --output base.json`), a results store directory, or a release
whose build records in the store are the baseline. Deltas are current minus baseline."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..catalogue import releases
from ..errors import WolfError
from ..trust import untrusted
from .model import Baseline, CellDelta
from .sizereport import READABLE_SCHEMAS, SCHEMA, Cell, DeviceReport


@dataclass(frozen=True)
class BaseCell:
    source: str
    release: str | None
    tls_xz: int | None
    rootfs: int | None
    image: int | None
    erase_blocks: int | None
    headroom: int | None
    headroom_blocks: int | None
    margin: int | None = None


@dataclass(frozen=True)
class _SavedCell:
    source: str | None = None
    tls_xz: int | None = None
    rootfs: int | None = None
    image: int | None = None
    erase_blocks: int | None = None
    headroom: int | None = None
    headroom_blocks: int | None = None
    margin: int | None = None


@dataclass(frozen=True)
class _SavedDevice:
    profile: str
    release: str | None = None
    cells: dict[str, _SavedCell] = field(default_factory=dict)


@dataclass(frozen=True)
class SavedReport:
    """What a baseline reads of a saved JSON report (schema SCHEMA), every field typed."""

    schema: str
    devices: list[_SavedDevice] = field(default_factory=list)
    created: str | None = None


HINT = "save one with `size-report --format json --output FILE`"


def from_report_json(path: Path) -> tuple[dict[tuple[str, str], BaseCell], str]:
    doc = untrusted.load_json(path, "--baseline", hint=HINT)
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema not in READABLE_SCHEMAS:
        shown = schema[:40] if isinstance(schema, str) else schema
        raise WolfError(
            f"--baseline {path}: schema {shown!r}, this tool reads {SCHEMA}",
            hint="save the baseline with this version's `size-report --format json`",
        )
    saved = untrusted.typed(SavedReport, doc, f"--baseline {path}")
    out = {}
    for dev in saved.devices:
        for flav, c in dev.cells.items():
            out[(dev.profile, flav)] = BaseCell(
                f"{path}: {c.source}", dev.release, c.tls_xz, c.rootfs, c.image,
                c.erase_blocks, c.headroom, c.headroom_blocks, c.margin,
            )  # fmt: skip
    return out, f"report {path} ({saved.created or 'undated'})"


def from_devices(devices: list[DeviceReport]) -> dict[tuple[str, str], BaseCell]:
    return {
        (d.profile, f): BaseCell(
            c.source,
            d.release,
            c.tls_xz,
            c.rootfs,
            c.image,
            c.erase_blocks,
            c.headroom,
            c.headroom_blocks,
            c.margin,
        )
        for d in devices
        for f, c in d.cells.items()
    }


def kind_of(ref: str) -> str:
    """'report', 'store' or 'release'; one error line when REF is none of them."""
    if os.path.isdir(ref):
        return "store"
    if os.path.lexists(ref):  # a file, or what stands there: from_report_json says what
        return "report"
    if ref in releases.releases():
        return "release"
    raise WolfError(
        f"--baseline {ref}: no such file or store directory, and not a release",
        hint=f"give a saved JSON report, a store directory or one of: "
        f"{', '.join(releases.releases())}",
    )


def _sub(a: int | None, b: int | None) -> int | None:
    return a - b if a is not None and b is not None else None


def delta(c: Cell, b: BaseCell) -> CellDelta:
    return CellDelta(
        base_source=b.source,
        base_release=b.release,
        tls_xz=_sub(c.tls_xz, b.tls_xz),
        rootfs=_sub(c.rootfs, b.rootfs),
        image=_sub(c.image, b.image),
        erase_blocks=_sub(c.erase_blocks, b.erase_blocks),
        headroom=_sub(c.headroom, b.headroom),
        headroom_blocks=_sub(c.headroom_blocks, b.headroom_blocks),
        margin=_sub(c.margin, b.margin),
    )


def compare(
    ref: str,
    kind: str,
    label: str,
    devices: list[DeviceReport],
    base: dict[tuple[str, str], BaseCell],
) -> Baseline:
    deltas: dict[str, dict[str, CellDelta]] = {}
    missing = []
    for d in devices:
        for f, c in d.cells.items():
            b = base.get((d.profile, f))
            if b is None:
                missing.append(f"{d.profile}/{f}")
                continue
            deltas.setdefault(d.profile, {})[f] = delta(c, b)
    return Baseline(ref, kind, label, deltas, missing)
