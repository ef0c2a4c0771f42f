"""The size report: per device, the comparison the published article made: TLS libraries
(xz), root filesystem, firmware image, erase blocks, erase-block padding, limit, headroom,
fits; one column per flavour, deltas against Mbed TLS (OpenWrt's default).

Sources: build records in the results store (kind "build", results/build.py: the output its
build measured) and/or OpenWrt output directories measured now (``--from``).
Footprint and memory records, when present, are shown beside them (docs/results.md).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import paths
from ..catalogue import devices, flavours, releases
from ..errors import WolfError
from ..firmware import artifacts
from ..results import footprint, memory
from ..results.artifacts import Artifacts
from ..results.build import BuildRecord, variant_in
from ..results.rootfs import XZ_SETTINGS, RootfsInfo
from ..results.store import FileStore, Record, now_utc, skipped
from .model import Baseline, GateResult, MatrixRow, Table

# /2: a cell's memory figures are one typed map by boot ("memory": {"boot"|"disk": {kb,
# source, created, target}}) where /1 had mem_kb/mem_source/... and mem_disk_kb/...
SCHEMA = "openwrt-wolf/size-report/2"
READABLE_SCHEMAS = ("openwrt-wolf/size-report/1", SCHEMA)  # a baseline reads flash rows only
BASELINE = "mbedtls"

# (field, label): the rows of each device table, in order
ROWS: tuple[tuple[str, str], ...] = (
    ("variant", "Packages"),
    ("tls_xz", "TLS libraries (xz)"),
    ("rootfs", "Root filesystem"),
    ("image", "Firmware image"),
    ("erase_blocks", "Erase blocks"),
    ("padding", "Erase-block padding"),
    ("limit", "Limit"),
    ("headroom", "Headroom (rootfs may grow)"),
    ("margin", "Limit − checked size"),
    ("fits", "Fits"),
    ("factory", "Factory image"),
)
DELTA_ROWS = ("tls_xz", "rootfs", "image", "erase_blocks", "headroom")
MEMORY_FIELDS = memory.SHOWN


@dataclass(frozen=True)
class MemoryFigure:
    """A memory record's medians (MemTotal, MemFree, MemAvailable, kB) as a cell shows them."""

    kb: dict[str, int]
    source: str  # "store:memory/<key>"
    created: str | None
    target: str  # "vm" or "router"

    @property
    def setting(self) -> str:
        return "hardware" if self.target == "router" else "emulated (QEMU)"


@dataclass(frozen=True)
class Cell:
    """One flavour of one device."""

    flavour: str
    source: str  # "store:build/<key>" or the directory/file measured
    tls_xz: int | None = None  # sum of xz -9e sizes of the TLS libraries in the rootfs
    tls_size: int | None = None  # their bytes in the rootfs
    rootfs: int | None = None  # squashfs bytes_used
    image: int | None = None  # firmware image bytes (file size, or computed when deleted)
    image_computed: bool = False  # True: the file is absent, size from the fit model
    erase_blocks: int | None = None
    padding: int | None = None
    limit: int | None = None
    limit_name: str | None = None
    headroom: int | None = None  # bytes the rootfs may still grow with the image kept
    headroom_blocks: int | None = None  # whole erase blocks under the limit
    margin: int | None = None  # limit - checked size
    verdict: str = "UNKNOWN"  # FITS / TOO_BIG / UNKNOWN
    factory_name: str | None = None  # factory.bin / tftp-recovery.bin, when the recipe makes one
    factory_verdict: str | None = None
    factory_room: int | None = None  # bytes the rootfs may grow with the factory image kept
    libraries: list[dict[str, Any]] = field(default_factory=list)  # rootfs.Library dicts
    packages: list[dict[str, Any]] = field(default_factory=list)  # rootfs.PackageUsage dicts
    # the memory records' medians by which boot they measured (results/memory.py boot_root):
    # "boot" (an initramfs VM, or a router) and "disk" (the VM with its rootfs on a disk)
    memory: dict[str, MemoryFigure] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # buildroot builds: the sources that were not OpenWrt's exact files (the build record's
    # sources.not_exact: file, class, placed, version, origin, note)
    substitutions: list[dict[str, Any]] = field(default_factory=list)
    created: str | None = None  # the build record's date (or when --from was measured)
    # "patch-set" (the USE_WOLFSSL patch set's packages) or "stock" (OpenWrt's own), from the
    # build record (results/build.py VARIANTS); None for a directory measured with --from
    variant: str | None = None

    @property
    def fits(self) -> str:
        return {"FITS": "yes", "TOO_BIG": "does not fit"}.get(self.verdict, "unknown")

    @property
    def factory(self) -> str:
        if self.factory_name is None:
            return "not built"
        ok = {"FITS": "fits", "TOO_BIG": "does not fit"}.get(self.factory_verdict or "", "unknown")
        return f"{self.factory_name}: {ok}"

    def value(self, row: str) -> int | str | None:
        if row in ("fits", "factory"):
            return str(getattr(self, row))
        if row == "variant":
            return {"patch-set": "patch set", "stock": "stock"}.get(self.variant or "")
        v: int | str | None = getattr(self, row)
        return v


@dataclass(frozen=True)
class DeviceReport:
    profile: str
    title: str
    release: str | None
    target: str | None
    blocksize: int | None
    flavours: list[str]  # column order
    cells: dict[str, Cell]
    deltas: dict[str, dict[str, int | None]]  # flavour -> row -> value - mbedtls value


@dataclass(frozen=True)
class FootprintRow:
    """A cross-built library (a footprint record, results/footprint.py): its installed
    bytes (stripped as OpenWrt strips), xz -9e bytes and squashfs cost, per config and arch."""

    flavour: str
    config: str
    arch: str | None
    version: str | None
    installed: int | None
    xz: int | None
    squashfs_cost: int | None
    source: str
    created: str | None = None


@dataclass(frozen=True)
class SizeReport:
    devices: list[DeviceReport]
    footprints: list[FootprintRow] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    xz_settings: str = XZ_SETTINGS
    created: str = field(default_factory=now_utc)
    notes: list[str] = field(default_factory=list)
    top_packages: int = 0  # the tables show the N packages taking most squashfs bytes
    comparison: list[Table] = field(default_factory=list)  # Flash, Memory, Performance
    matrix: list[MatrixRow] = field(default_factory=list)  # every device x flavour
    baseline: Baseline | None = None  # --baseline: deltas per device and flavour
    gates: list[GateResult] = field(default_factory=list)  # --fail-on verdicts
    schema: str = SCHEMA

    @property
    def broken(self) -> list[GateResult]:
        return [g for g in self.gates if not g.ok]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d = {"schema": d.pop("schema"), **d}
        d["rows"] = [{"id": k, "label": label} for k, label in ROWS]
        return d


# --- building cells ------------------------------------------------------------------


def cell_from_artifacts(
    flavour: str, a: Artifacts, source: str, created: str | None = None
) -> Cell:
    f = a.fit
    factory = f.factory if f else None
    sysupgrade = a.upgrade_image
    image = sysupgrade.size if sysupgrade else None
    computed = False
    if image is None and f:
        image = f.final_size or f.checked_size
        computed = image is not None
    rootfs = a.rootfs
    return Cell(
        flavour=flavour,
        source=source,
        tls_xz=rootfs.tls_xz if rootfs else None,
        tls_size=rootfs.tls_size if rootfs else None,
        # the record's own figure when the rootfs piece is gone (committed records, another
        # machine): the same squashfs bytes_used, measured when the build ended
        rootfs=rootfs.size if rootfs else (f.rootfs_size if f else None),
        image=image,
        image_computed=computed,
        erase_blocks=f.erase_blocks if f else None,
        padding=f.padding if f else None,
        limit=f.limit if f else None,
        limit_name=f.limit_name if f else None,
        headroom=f.rootfs_room if f else None,
        headroom_blocks=f.headroom_blocks if f else None,
        margin=f.margin if f else None,
        verdict=f.verdict if f else "UNKNOWN",
        factory_name=factory.name if factory else None,
        factory_verdict=factory.verdict if factory else None,
        factory_room=factory.rootfs_room if factory else None,
        libraries=[asdict(lib) for lib in rootfs.tls_libraries] if rootfs else [],
        packages=[asdict(p) for p in rootfs.packages] if rootfs else [],
        notes=[
            *a.notes,
            *(f.notes if f else ()),
            *(factory.notes if factory else ()),
            *_unstripped(rootfs),
        ],
        created=created,
    )


def _unstripped(rootfs: RootfsInfo | None) -> list[str]:
    libs = rootfs.tls_libraries if rootfs else []
    return [
        f"{lib.path} still has its symbol table: its sizes overstate what OpenWrt ships"
        for lib in libs
        if lib.stripped is False
    ]


def _deltas(cells: dict[str, Cell]) -> dict[str, dict[str, int | None]]:
    base = cells.get(BASELINE)
    if base is None:
        return {}
    out: dict[str, dict[str, int | None]] = {}
    for name, c in cells.items():
        if name == BASELINE:
            continue
        row: dict[str, int | None] = {}
        for r in DELTA_ROWS:
            v, b = getattr(c, r), getattr(base, r)
            row[r] = v - b if isinstance(v, int) and isinstance(b, int) else None
        out[name] = row
    return out


def _column_order(names: set[str]) -> list[str]:
    known = [n for n in flavours.names() if n in names]
    return known + sorted(names - set(known))


# --- sources ---------------------------------------------------------------------------


@dataclass
class _Collected:
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)  # profile -> flavour -> Cell
    meta: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # release, target
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    # the variant a flavour the patch set makes is reported in (size-report --stock: "stock")
    prefer: str = "patch-set"

    def add(self, profile: str, cell: Cell, release: str | None, target: str | None) -> None:
        cells = self.cells.setdefault(profile, {})
        had = cells.get(cell.flavour)
        # later sources win, but never a build of the other variant over the one asked for:
        # a stock wolfSSL image built last must not stand in for the patch set's
        if not (had and had.variant == self.prefer and cell.variant not in (None, self.prefer)):
            cells[cell.flavour] = cell
        old = self.meta.get(profile, (None, None))
        self.meta[profile] = (release or old[0], target or old[1])


def _build_artifacts(rec: Record) -> Artifacts | None:
    """A build record's output, the build record read whole (results/build.py; a version 1
    record through its upgrade). Every field is checked (untrusted.typed): a record of the
    wrong shape is a WolfError naming its file and the field."""
    if not (rec.data.get("artifacts") or rec.data.get("output")) or not rec.device:
        return None
    where = f"build record {rec.path or rec.key}"
    return artifacts.of_build(BuildRecord.from_dict(rec.data, where, "data"))


def read_builds(records: list[Record]) -> list[tuple[Record, Artifacts]]:
    """Build records with artifacts, read; a record of the wrong shape is skipped with the
    store's one warning line naming its file and field (one bad record must not hide the
    others)."""
    out = []
    for rec in records:
        try:
            a = _build_artifacts(rec)
        except WolfError as e:
            skipped(e)
            continue
        if a is not None:
            out.append((rec, a))
    return out


def _from_store(store: FileStore, release: str | None, got: _Collected) -> None:
    for rec, a in read_builds(store.query("build", release=release)):  # oldest first
        if rec.device is None:
            continue
        flav = rec.flavour or a.flavour or "unknown"
        cell = cell_from_artifacts(flav, a, f"store:build/{rec.key}", rec.created)
        srcs = rec.data.get("sources") or {}
        subs = srcs.get("not_exact") if isinstance(srcs, dict) else None
        if isinstance(subs, list):
            cell = dataclasses.replace(cell, substitutions=[s for s in subs if isinstance(s, dict)])
        cell = dataclasses.replace(cell, variant=variant_of(rec, flav))
        got.add(rec.device, cell, rec.release, a.target)
    got.sources.append(f"store {store.root}")


def variant_of(rec: Record, flavour: str) -> str:
    return variant_in(rec.data, flavour)


def _variant_notes(got: _Collected) -> None:
    """A cell of the other variant than the one asked for is said so, per device."""
    for profile, cells in got.cells.items():
        for fl, c in cells.items():
            if not c.variant or c.variant == got.prefer or not flavours.get(fl).patched:
                continue
            if c.variant == "stock":
                what = "the stock image (OpenWrt's own packages: the full library, Mbed TLS kept)"
            else:
                what = "the patch set's image"
            how = f"./wolf build --flavour {fl}" + (" --stock" if got.prefer == "stock" else "")
            note = (f"{what}; the store has no {got.prefer.replace('-', ' ')} build of "
                    f"{profile} ({how} makes it)")  # fmt: skip
            cells[fl] = dataclasses.replace(c, notes=[*c.notes, note])


def parse_from(spec: str) -> tuple[str | None, Path]:
    """'DIR' or 'FLAVOUR=DIR' (label a directory whose flavour cannot be told from it)."""
    name, sep, path = spec.partition("=")
    if sep and name and os.sep not in name:
        return flavours.get(name).name, Path(path)
    return None, Path(spec)


def _from_dirs(specs: list[str], profiles: list[str] | None, got: _Collected) -> None:
    for spec in specs:
        label, path = parse_from(spec)
        for a in artifacts.measure(path, profiles):
            flav = label or a.flavour or "unknown"
            if not label and not a.flavour:
                got.notes.append(f"{path}: flavour not recognisable, use --from FLAVOUR={path}")
            cell = cell_from_artifacts(flav, a, str(path), now_utc())
            got.add(a.profile, cell, a.release, a.target)
        got.sources.append(str(path))


@dataclass(frozen=True)
class StoredMemory:
    """A memory record read whole: its envelope, its model, and the device and flavour it
    names (a record without both is not one of a cell)."""

    record: Record
    result: memory.MemoryResult
    device: str
    flavour: str


def read_memory(records: list[Record]) -> list[StoredMemory]:
    """Memory records of a device and flavour, each read whole (results/memory.py); one of the
    wrong shape is skipped with the store's one warning line naming its file and field."""
    out = []
    for rec in records:
        if not rec.device or not rec.flavour:
            continue
        try:
            where = f"memory record {rec.path or rec.key}"
            m = memory.MemoryResult.from_dict(rec.data, where, "data")
        except WolfError as e:
            skipped(e)
            continue
        out.append(StoredMemory(rec, m, rec.device, rec.flavour))
    return out


def _memory(store: FileStore, got: _Collected, release: str | None) -> None:
    """Memory records (kind "memory") of the release, per device, flavour and boot; newest
    wins."""
    for s in read_memory(store.query(memory.KIND, release=release)):
        rec, m = s.record, s.result
        cells = got.cells.setdefault(s.device, {})
        old = cells.get(s.flavour) or Cell(flavour=s.flavour, source=f"store:memory/{rec.key}")
        fig = MemoryFigure(m.medians(), f"store:memory/{rec.key}", rec.created, m.target)
        cells[s.flavour] = dataclasses.replace(old, memory={**old.memory, m.boot_root: fig})
        got.meta.setdefault(s.device, (rec.release, None))


def _footprints(store: FileStore, wanted: set[str] | None) -> list[FootprintRow]:
    """Newest footprint record per (flavour, config with its ECC choice, arch); one of the
    wrong shape is skipped with the store's one warning line naming its file and field."""
    latest: dict[tuple[str, str, str], FootprintRow] = {}
    for rec in store.query(footprint.KIND):
        try:
            d = footprint.Footprint.from_dict(rec.data, f"footprint record {rec.path}", "data")
        except WolfError as e:
            skipped(e)
            continue
        flav = rec.flavour or d.library
        if wanted and flav not in wanted:
            continue
        fp = FootprintRow(
            flavour=flav,
            config=d.config + (f" ({d.ecc})" if d.ecc else ""),
            arch=d.arch,
            version=d.version,
            installed=d.installed,
            xz=d.xz,
            squashfs_cost=d.squashfs_cost,
            source=f"store:footprint/{rec.key}",
            created=rec.created,
        )
        latest[(fp.flavour, fp.config, fp.arch or "")] = fp
    return [latest[k] for k in sorted(latest)]


# --- the report ------------------------------------------------------------------------


def _release_for_baseline(
    base_kind: str | None, baseline: str | None, release: str | None
) -> str | None:
    """A release baseline compares against the default release unless --release says which."""
    if base_kind != "release" or release is not None:
        return release
    release = releases.get(None).name
    if release == baseline:
        raise WolfError(
            f"--baseline {baseline} is the release being reported",
            hint="give --release for the new side, e.g. --release 25.12.5 --baseline 24.10.8",
        )
    return release


def _device_reports(
    got: _Collected, profiles: list[str] | None, wanted_flavours: set[str] | None
) -> list[DeviceReport]:
    """One DeviceReport per collected device (of --device), its flavours' cells (of --flavour)."""
    reports = []
    for profile in sorted(got.cells):
        if profiles and profile not in profiles:
            continue
        cells = {
            k: v
            for k, v in got.cells[profile].items()
            if not wanted_flavours or k in wanted_flavours
        }
        if not cells:
            continue
        dev, _note = artifacts.find_device(profile, got.meta[profile][0])
        order = _column_order(set(cells))
        reports.append(
            DeviceReport(
                profile=profile,
                title=dev.title if dev else profile,
                release=got.meta[profile][0] or (dev.release if dev else None),
                target=got.meta[profile][1] or (dev.target_path if dev else None),
                blocksize=dev.blocksize if dev else None,
                flavours=order,
                cells={k: cells[k] for k in order},
                deltas=_deltas(cells),
            )
        )
    return reports


def _against_baseline(
    baseline: str,
    base_kind: str,
    reports: list[DeviceReport],
    *,
    store: str | os.PathLike[str] | None,
    device: str | None,
    flavour: str | None,
) -> Baseline:
    """The comparison with --baseline: a saved report, or the same report of a store or an
    older release built again."""
    from . import baseline as base_mod

    if base_kind == "report":
        base_cells, label = base_mod.from_report_json(Path(baseline))
    else:
        old = build(
            store=baseline if base_kind == "store" else store,
            device=device,
            flavour=flavour,
            release=baseline if base_kind == "release" else None,
        )
        base_cells = base_mod.from_devices(old.devices)
        label = f"{base_kind} {baseline}"
    return base_mod.compare(baseline, base_kind, label, reports, base_cells)


def build(
    *,
    store: str | os.PathLike[str] | None = None,
    from_dirs: list[str] | None = None,
    device: str | None = None,
    flavour: str | None = None,
    release: str | None = None,
    top_packages: int = 0,
    baseline: str | None = None,
    fail_on: list[str] | None = None,
    sort: str = "headroom",
    stock: bool = False,
) -> SizeReport:
    """Collect, filter and assemble the report. --from alone does not read build records.

    ``baseline``: a saved JSON report, a store directory or a release (report/baseline.py);
    ``fail_on``: --fail-on rules (report/gates.py), checked into ``SizeReport.gates``."""
    from . import baseline as base_mod
    from . import comparison, gates, matrix

    rules = gates.parse_all(fail_on or [])  # a bad rule fails before anything is measured
    if sort not in matrix.SORTS:
        raise WolfError(f"unknown --sort {sort!r}", hint=f"one of: {', '.join(matrix.SORTS)}")
    base_kind = base_mod.kind_of(baseline) if baseline else None
    release = _release_for_baseline(base_kind, baseline, release)
    wanted_devices = devices.resolve_many(device, release) if device else None
    profiles = [d.profile for d in wanted_devices] if wanted_devices else None
    wanted_flavours = {f.name for f in flavours.resolve_many(flavour)} if flavour else None

    got = _Collected(prefer="stock" if stock else "patch-set")
    fs = FileStore(paths.store_dir(store))
    if not from_dirs or store:
        _from_store(fs, release, got)
        _variant_notes(got)
    if from_dirs:
        _from_dirs(from_dirs, profiles, got)
    _memory(fs, got, release)

    reports = _device_reports(got, profiles, wanted_flavours)
    footprints = _footprints(fs, wanted_flavours)
    if not reports and not (footprints and not device and not from_dirs):
        where = ", ".join(got.sources) or str(fs.root)
        what = f" for {device}" if device else ""
        raise WolfError(
            f"nothing to report{what}: no build records or artifacts in {where}",
            hint="run `./wolf build ...` first, or give --from bin/targets/<target>/<subtarget>",
        )
    base = None
    if baseline and base_kind:
        base = _against_baseline(
            baseline, base_kind, reports, store=store, device=device, flavour=flavour
        )
    columns = _column_order(
        {f for d in reports for f in d.flavours} | {f.flavour for f in footprints}
    )
    return SizeReport(
        devices=reports,
        footprints=footprints,
        sources=got.sources,
        notes=got.notes,
        top_packages=top_packages,
        comparison=comparison.tables(
            reports, footprints, fs, columns, wanted_flavours, set(profiles) if profiles else None
        ),
        matrix=matrix.rows(reports, sort),
        baseline=base,
        gates=gates.check(rules, reports, base),
    )
