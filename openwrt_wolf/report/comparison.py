"""The comparison in the published shape: three tables, one column per flavour.

- Flash: TLS libraries (xz) of the cross-built libraries (footprint records) and, per
  device, of the built images; the root filesystem; the firmware image ("does not fit").
- Memory: free memory at idle after boot (memory records), heap figures (perf records).
- Performance: handshakes and crypto throughput (perf records).

Every figure carries its Source (record, date, target, emulated or hardware). Perf rows are
named in data/comparison.toml (name + unit); docs/results.md has the record shape.
"""

from __future__ import annotations

from typing import Any

from ..results.perf import (
    CRYPTO,
    HANDSHAKE,
    IMAGE,
    INSTRUCTIONS,
    MEMORY,
    SOAK,
    WIFI,
    comparison_rows,
)
from ..results.store import FileStore, Record
from .model import Figure, Row, Source, Table
from .sizereport import Cell, DeviceReport, FootprintRow

TABLES = (("flash", "Flash"), ("memory", "Memory"), ("performance", "Performance"))


def _build_source(dev: DeviceReport, c: Cell) -> Source:
    setting = "image build" if c.source.startswith("store:") else "measured now"
    where = " ".join(x for x in (dev.target, dev.release and f"OpenWrt {dev.release}") if x)
    return Source(c.source, c.created, where or None, setting)


def _device_rows(dev: DeviceReport) -> list[Row]:
    rows = []
    for field, label in (
        ("tls_xz", "TLS libraries (xz)"),
        ("rootfs", "Root filesystem"),
        ("image", "Firmware image"),
    ):
        vals: dict[str, Figure] = {}
        for f in dev.flavours:
            c = dev.cells[f]
            v = getattr(c, field)
            if v is None and field != "image":
                continue
            if field == "image" and v is None and c.verdict == "UNKNOWN":
                continue
            vals[f] = Figure(
                v,
                _build_source(dev, c),
                verdict=c.verdict if field == "image" else None,
                computed=c.image_computed if field == "image" else False,
            )
        if vals:
            rows.append(
                Row(f"{field}:{dev.profile}", f"{label}, {dev.title}", "B", dev.profile, vals)
            )
    return rows


def _footprint_rows(footprints: list[FootprintRow]) -> list[Row]:
    by: dict[tuple[str, str], dict[str, Figure]] = {}
    for fp in footprints:
        if fp.xz is None:
            continue
        src = Source(fp.source, fp.created, fp.arch, "cross-built")
        by.setdefault((fp.config, fp.arch or ""), {})[fp.flavour] = Figure(fp.xz, src)
    return [
        Row(
            f"tls_xz:footprint:{config}:{arch}",
            f"TLS libraries (xz), cross-built, {config} config{', ' + arch if arch else ''}",
            "B",
            None,
            vals,
        )
        for (config, arch), vals in sorted(by.items())
    ]


def _memory_rows(devices: list[DeviceReport]) -> list[Row]:
    """Free memory at idle per device: the initramfs boot (or a router) and, as its own row,
    the VM with its rootfs on a disk (measure-memory --root disk)."""
    rows = []
    for dev in devices:
        initramfs: dict[str, Figure] = {}
        disk: dict[str, Figure] = {}
        for f in dev.flavours:
            for root, vals in (("boot", initramfs), ("disk", disk)):
                m = dev.cells[f].memory.get(root)
                if m is not None and "MemFree" in m.kb:
                    src = Source(m.source, m.created, dev.profile, m.setting)
                    vals[f] = Figure(m.kb["MemFree"], src)
        for key, what, vals in (
            ("memfree", "", initramfs),
            ("memfree-disk", "rootfs on disk as on flash, ", disk),
        ):
            if vals:
                label = f"Free memory at idle after boot, {what}{dev.title}"
                rows.append(Row(f"{key}:{dev.profile}", label, "kB", dev.profile, vals, "higher"))
    return rows


def _crypto_metrics(data: dict[str, Any]) -> list[tuple[str, float, str | None]]:
    """(name, value, unit) of the performance lab's crypto record (results.perf.CryptoSpeed,
    kind "perf-crypto"): ms per public-key operation, MiB/s per cipher and block size."""
    out: list[tuple[str, float, str | None]] = []
    for op, ms in (data.get("ms_per_op") or {}).items():
        if isinstance(ms, int | float):
            out.append((f"{op}_ms", ms, "ms"))
    for cipher, by_size in (data.get("mib_per_s") or {}).items():
        for size, v in (by_size if isinstance(by_size, dict) else {}).items():
            if isinstance(v, int | float) and str(size).isdigit():
                out.append((f"{cipher}_{int(size) // 1024}k", v, "MiB/s"))
    return out


def _perf_metrics(data: dict[str, Any]) -> list[tuple[str, float, str | None]]:
    """(name, value, unit) of a perf record: data["metrics"] as {name: {value, unit}} or
    [{name, value, unit}]; or a crypto record of the performance lab."""
    if "ms_per_op" in data or "mib_per_s" in data:
        return _crypto_metrics(data)
    raw = data.get("metrics")
    items: list[dict[str, Any]] = []
    if isinstance(raw, dict):
        items = [{"name": k, **v} for k, v in raw.items() if isinstance(v, dict)]
    elif isinstance(raw, list):
        items = [m for m in raw if isinstance(m, dict)]
    out = []
    for m in items:
        v = m.get("value")
        if isinstance(m.get("name"), str) and isinstance(v, int | float):
            unit = m.get("unit")
            out.append((m["name"], v, unit if isinstance(unit, str) else None))
    return out


def _perf_rows(records: list[Record], wanted: set[str] | None) -> tuple[list[Row], list[str]]:
    """Newest value per (metric, device, flavour); rows in data/comparison.toml order."""
    known = comparison_rows()
    latest: dict[tuple[str, str], dict[str, Figure]] = {}
    units: dict[tuple[str, str], str] = {}
    notes = []
    for rec in records:  # oldest first: newer records overwrite
        flav = rec.flavour
        if not flav or (wanted and flav not in wanted):
            continue
        d = rec.data
        raw_where = d.get("where")  # perf-crypto records say where in data["where"]
        where: dict[str, Any] = raw_where if isinstance(raw_where, dict) else {}
        emulated = d.get("emulated", where.get("emulated"))
        setting = "emulated" if emulated is True else "hardware" if emulated is False else "unknown"
        tgt = d.get("target", where.get("target"))
        if isinstance(tgt, str) and tgt:
            setting += f" ({tgt})"
        arch = rec.device or d.get("arch")
        src = Source(f"store:{rec.kind}/{rec.key}", rec.created, arch, setting)
        for name, value, unit in _perf_metrics(d):
            m = known.get(name)
            if m and unit and unit != m.unit:
                notes.append(f"perf/{rec.key}: {name} in {unit}, expected {m.unit}; not shown")
                continue
            key = (name, rec.device or "")
            latest.setdefault(key, {})[flav] = Figure(value, src)
            units[key] = m.unit if m else (unit or "")
    order = {n: i for i, n in enumerate(known)}
    rows = []
    for name, device in sorted(latest, key=lambda k: (order.get(k[0], len(order)), k)):
        m = known.get(name)
        label = m.label if m else name
        rows.append(
            Row(
                f"perf:{name}:{device}",
                f"{label}{', ' + device if device else ''}",
                units[(name, device)],
                device or None,
                latest[(name, device)],
                better=m.better if m else "higher",
                reference=dict(m.reference) if m else {},
            )
        )
    return rows, notes


def tables(
    devices: list[DeviceReport],
    footprints: list[FootprintRow],
    store: FileStore,
    columns: list[str],
    wanted_flavours: set[str] | None,
    wanted_devices: set[str] | None,
) -> list[Table]:
    """The three tables; a table with no rows is still listed (the renderers say 'no records')."""
    perf = [
        r
        # results.perf's kinds
        for kind in ("perf", CRYPTO, HANDSHAKE, MEMORY, SOAK, INSTRUCTIONS, WIFI, IMAGE)
        for r in store.query(kind)
        if not wanted_devices or r.device is None or r.device in wanted_devices
    ]
    perf_rows, notes = _perf_rows(perf, wanted_flavours)
    flash = _footprint_rows(footprints) + [r for d in devices for r in _device_rows(d)]
    memory = _memory_rows(devices) + [r for r in perf_rows if _table_of(r) == "memory"]
    performance = [r for r in perf_rows if _table_of(r) == "performance"]
    used = {f for rows in (flash, memory, performance) for r in rows for f in r.values}
    cols = [c for c in columns if c in used] + sorted(used - set(columns))
    return [
        Table("flash", "Flash", cols, flash),
        Table("memory", "Memory", cols, memory),
        Table("performance", "Performance", cols, performance, notes=notes),
    ]


def _table_of(row: Row) -> str:
    name = row.id.split(":")[1]
    m = comparison_rows().get(name)
    return m.table if m else "performance"
