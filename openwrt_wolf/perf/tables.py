"""The reference comparison's Memory and Performance tables, drawn from the results store: one
column per flavour and a column of ratios against Mbed TLS (OpenWrt's default). Ratios carry
over from an emulated CPU to hardware, absolute times do not, so emulated figures say so.
Row labels of the network tests are the comparison report's (data/comparison.toml)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from ..errors import WolfError
from ..results import store
from ..results.perf import (
    CRYPTO,
    HANDSHAKE,
    INSTRUCTIONS,
    MEMORY,
    SOAK,
    WIFI,
    CryptoSpeed,
    Handshakes,
    HeapUse,
    Instructions,
    NetCommon,
    Soak,
    WifiConnections,
    comparison_rows,
    record_key,
)

TITLES = {"mbedtls": "Mbed TLS", "wolfssl": "wolfSSL", "openssl": "OpenSSL"}
BASE = "mbedtls"
Rows = list[tuple[str, str, list[float | None]]]


@dataclass
class Stored:
    crypto: dict[str, CryptoSpeed] = field(default_factory=dict)
    handshake: dict[str, Handshakes] = field(default_factory=dict)
    memory: dict[str, HeapUse] = field(default_factory=dict)
    soak: dict[str, Soak] = field(default_factory=dict)
    instructions: dict[str, Instructions] = field(default_factory=dict)
    wifi: dict[str, WifiConnections] = field(default_factory=dict)

    def flavours(self) -> list[str]:
        seen = {**self.crypto, **self.handshake, **self.memory, **self.soak,
                **self.instructions, **self.wifi}  # fmt: skip
        return [f for f in TITLES if f in seen] + sorted(set(seen) - set(TITLES))

    def __bool__(self) -> bool:
        return bool(self.crypto or self.handshake or self.memory or self.soak
                    or self.instructions or self.wifi)  # fmt: skip


def stored(st: store.Store, target: str, flavours: tuple[str, ...]) -> Stored:
    """The lab's records of each flavour; one of the wrong shape is skipped with the store's
    warning naming its file and field."""
    out = Stored()
    kinds: tuple[tuple[str, str, Any, dict[str, Any]], ...] = (
        (CRYPTO, "crypto", CryptoSpeed, out.crypto),
        (HANDSHAKE, "handshake", Handshakes, out.handshake),
        (MEMORY, "memory", HeapUse, out.memory),
        (SOAK, "soak", Soak, out.soak),
        (INSTRUCTIONS, "instructions", Instructions, out.instructions),
        (WIFI, "wifi", WifiConnections, out.wifi),
    )
    for f in flavours:
        for kind, test, model, into in kinds:
            rec = st.get(kind, record_key(f, target, test))
            if rec is None:
                continue
            try:
                into[f] = model.from_dict(rec.data, f"{kind} record {rec.path}")
            except WolfError as e:
                store.skipped(e)
    return out


def _num(v: float | None) -> str:
    if v is None:
        return "–"
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"


def ratio(v: float | None, base: float | None) -> str:
    if v is None or not base:
        return "–"
    return f"{v / base:.2f}×"


def crypto_rows(results: dict[str, CryptoSpeed], flavours: list[str]) -> Rows:
    """(row title, unit, value per flavour in the order of flavours)."""
    from .crypto import settings  # here: perf.crypto loads the whole bench machinery

    conf = settings()
    out: Rows = []
    for ident, title in conf["operations"].items():
        vals = [results[f].ms_per_op.get(ident) if f in results else None for f in flavours]
        if any(v is not None for v in vals):
            out.append((title, "ms/op", vals))
    for ident, title in conf["ciphers"].items():
        for size in conf["blocks"]["sizes"]:
            vals = [results[f].mib_per_s.get(ident, {}).get(str(size)) if f in results else None
                    for f in flavours]  # fmt: skip
            if any(v is not None for v in vals):
                out.append((f"{title} {int(size) // 1024} KiB", "MiB/s", vals))
    return out


def metric_rows(records: dict[str, NetCommon], flavours: list[str], table: str) -> Rows:
    """The network tests' metrics of one comparison table, in data/comparison.toml order."""
    out: Rows = []
    for m in comparison_rows().values():
        if m.table != table:
            continue
        vals = [records[f].metrics.get(m.name, {}).get("value") if f in records else None
                for f in flavours]  # fmt: skip
        if any(v is not None for v in vals):
            out.append((m.label, m.unit, vals))
    return out


def _commons(s: Stored) -> dict[str, dict[str, NetCommon]]:
    return {
        "handshake": {f: r.common for f, r in s.handshake.items()},
        "memory": {f: r.common for f, r in s.memory.items()},
        "soak": {f: r.common for f, r in s.soak.items()},
        "instructions": {f: r.common for f, r in s.instructions.items()},
        "wifi": {f: r.common for f, r in s.wifi.items()},
    }


def _merged(s: Stored) -> dict[str, NetCommon]:
    """One NetCommon per flavour whose metrics are those of all its network records."""
    out: dict[str, NetCommon] = {}
    for records in _commons(s).values():
        for f, c in records.items():
            if f in out:
                out[f] = NetCommon(**{**out[f].__dict__, "metrics": {**out[f].metrics,
                                                                     **c.metrics}})  # fmt: skip
            else:
                out[f] = c
    return out


def _table(title: str, flavours: list[str], rows: Rows) -> Table:
    t = Table(title=title)
    t.add_column("figure", no_wrap=True)
    t.add_column("unit")
    for f in flavours:
        t.add_column(TITLES.get(f, f), justify="right")
    others = [f for f in flavours if f != BASE] if BASE in flavours else []
    for f in others:
        t.add_column(f"{TITLES.get(f, f)} / Mbed TLS", justify="right")
    for label, unit, vals in rows:
        base = vals[flavours.index(BASE)] if BASE in flavours else None
        ratios = [ratio(vals[flavours.index(f)], base) for f in others]
        t.add_row(label, unit, *[_num(v) for v in vals], *ratios)
    return t


def tables(s: Stored, target: str) -> list[Table]:
    """Memory (if any network record) and Performance (handshakes, then the crypto tools)."""
    flavours = s.flavours()
    emulated = any(r.where.emulated for r in s.crypto.values()) or any(
        c.emulated for c in _merged(s).values()
    )
    note = " (emulated: compare the ratios)" if emulated else ""
    merged = _merged(s)
    out = []
    memory = metric_rows(merged, flavours, "memory")
    if memory:
        out.append(_table(f"Memory on {target}", flavours, memory))
    perf = metric_rows(merged, flavours, "performance") + crypto_rows(s.crypto, flavours)
    if perf:
        out.append(_table(f"Performance on {target}{note}", flavours, perf))
    return out


def caption(s: Stored) -> str:
    lines = []
    for f, r in s.crypto.items():
        w = r.where
        lines.append(
            f"{TITLES.get(f, f)} crypto: {r.tool}, {r.library} {r.version} {r.config}"
            f"{' ' + r.ecc if r.ecc else ''}; {w.target} ({w.machine}), "
            f"{'EMULATED' if w.emulated else 'hardware'}, {w.clock} clock"
            f"{', quick' if r.quick else ''}; missing: {', '.join(r.missing) or 'none'}"
        )
    for test, records in _commons(s).items():
        for f, c in records.items():
            w = c.where
            if test == "wifi":
                continue  # below, with its modes
            lines.append(
                f"{TITLES.get(f, f)} {test}: uhttpd/uclient-fetch ({c.backend}) with {c.library};"
                f" {w.target} ({w.machine}), {'EMULATED' if w.emulated else 'hardware'}"
                f"{', quick' if c.quick else ''}; client {c.client}"
            )
    for f, h in s.handshake.items():
        for group, why in h.missing.items():
            lines.append(f"{TITLES.get(f, f)}: no {group} handshake: {why}")
    for f, ins in s.instructions.items():
        lines.append(f"{TITLES.get(f, f)} instructions: counted by {ins.counter}")
        for what, why in ins.missing.items():
            lines.append(f"{TITLES.get(f, f)}: no {what} instruction count: {why}")
    for f, wr in s.wifi.items():
        c, w = wr.common, wr.common.where
        modes = "; ".join(
            f"{m.name} none"
            if m.missing
            else f"{m.name} {m.ok}/{m.connections} ok"
            + (f", group {m.negotiated.get('group')}" if m.ok else "")
            + (f", {m.median_ms:.1f} ms [{m.spread_ms['min']:.1f}–{m.spread_ms['max']:.1f}]"
               if m.median_ms is not None else "")
            for m in wr.modes.values()
        )  # fmt: skip
        lines.append(f"{TITLES.get(f, f)} wifi: {c.backend} with {c.library}; {w.target} "
                     f"({w.machine}), {'EMULATED' if w.emulated else 'hardware'}, "
                     f"{w.clock} clock{', quick' if c.quick else ''}: {modes}")  # fmt: skip
        for m in wr.modes.values():
            if m.missing:
                lines.append(f"{TITLES.get(f, f)}: no {m.name} connection: {m.missing}")
    for f, k in s.soak.items():
        lines.append(f"{TITLES.get(f, f)} soak: {k.requests_ok}/{k.requests} requests "
                     f"({k.jobs} at a time), {k.downloads_ok}/{k.downloads} downloads ok"
                     )  # fmt: skip
    if BASE in s.flavours():
        lines.append("ratio = flavour / Mbed TLS (ms, B, allocations, instructions: lower is "
                     "better; MiB/s: higher is better)")  # fmt: skip
    return "\n".join(lines)
