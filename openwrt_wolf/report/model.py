"""The typed parts of the report beyond the per-device tables: the comparison in the
published shape (Flash, Memory, Performance), the fits matrix, the baseline deltas and the
--fail-on verdicts. Builders fill them (comparison.py, matrix.py, baseline.py, gates.py);
renderers only format them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Source:
    """Where one figure comes from: the record, when it was made, on what."""

    record: str  # "store:build/<key>", "store:perf/<key>", or the directory measured
    date: str | None  # the record's `created` (UTC)
    target: str | None  # "ath79/generic", "malta-be", "mips_24kc", ...
    setting: str  # "image build", "emulated (QEMU)", "hardware", "cross-built", ...


@dataclass(frozen=True)
class Figure:
    value: int | float | None
    source: Source | None = None
    verdict: str | None = None  # firmware image rows: FITS / TOO_BIG / UNKNOWN
    computed: bool = False  # image deleted by OpenWrt: size from the fit model


@dataclass(frozen=True)
class Row:
    id: str  # "image:<profile>", "tls_xz:footprint:openwrt", "perf:<metric>", ...
    label: str
    unit: str  # "B", "kB", "handshakes/s", ...
    device: str | None  # profile, when the row belongs to one device
    values: dict[str, Figure]  # flavour -> figure
    better: str = "lower"  # "lower" or "higher": which way is good
    # the user's reference (a router, data/comparison.toml): flavour -> its published figure
    reference: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Table:
    id: str  # "flash", "memory", "performance"
    title: str
    columns: list[str]  # flavours, in column order
    rows: list[Row]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class MatrixCell:
    verdict: str  # FITS / TOO_BIG / UNKNOWN
    image: int | None
    limit: int | None
    limit_name: str | None
    headroom: int | None  # bytes the rootfs may still grow (fit model's rootfs_room)
    headroom_blocks: int | None  # whole erase blocks under the limit


@dataclass(frozen=True)
class MatrixRow:
    """One device of the whole-target view: a cell per flavour; rows sort by min_headroom."""

    profile: str
    title: str
    target: str | None
    release: str | None
    min_headroom: int | None  # the smallest headroom of the device's flavours
    cells: dict[str, MatrixCell]


@dataclass(frozen=True)
class CellDelta:
    """One (device, flavour) against the baseline: current minus baseline."""

    base_source: str
    base_release: str | None
    tls_xz: int | None
    rootfs: int | None
    image: int | None
    erase_blocks: int | None  # erase blocks of kernel+rootfs, current minus baseline
    headroom: int | None  # bytes the rootfs may still grow
    headroom_blocks: int | None
    margin: int | None = None  # limit - checked size


@dataclass(frozen=True)
class Baseline:
    ref: str  # what the user typed
    kind: str  # "report", "store", "release"
    label: str  # "report base.json (2026-11-30T09:00:00Z)", "release 24.10.8", ...
    deltas: dict[str, dict[str, CellDelta]]  # profile -> flavour -> delta
    missing: list[str] = field(default_factory=list)  # "<profile>/<flavour>" not in baseline


@dataclass(frozen=True)
class Breach:
    profile: str
    flavour: str
    value: int | None  # the measured value the rule compared (bytes or blocks)
    text: str  # "headroom 12,345 B < 65,536 B"


@dataclass(frozen=True)
class GateResult:
    rule: str  # as typed: "headroom<64KiB"
    broken: list[Breach]
    checked: int  # cells the rule could be checked on
    unchecked: list[str]  # "<profile>/<flavour>: why"

    @property
    def ok(self) -> bool:
        return not self.broken
