"""The reference comparison's Performance table, drawn from the results store: one column per
flavour and a column of ratios against Mbed TLS (OpenWrt's default). Ratios carry over from
an emulated CPU to hardware, absolute times do not, so emulated figures say so."""

from __future__ import annotations

from rich.table import Table

from ..results import store
from .crypto import settings
from .model import CRYPTO, CryptoSpeed, record_key

TITLES = {"mbedtls": "Mbed TLS", "wolfssl": "wolfSSL", "openssl": "OpenSSL"}
BASE = "mbedtls"


def stored(st: store.Store, target: str, flavours: tuple[str, ...]) -> dict[str, CryptoSpeed]:
    out = {}
    for f in flavours:
        rec = st.get(CRYPTO, record_key(f, target, "crypto"))
        if rec is not None:
            out[f] = CryptoSpeed.from_dict(rec.data)
    return out


def _num(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:,.3f}" if v < 10 else f"{v:,.1f}"


def _ratio(v: float | None, base: float | None) -> str:
    if v is None or not base:
        return "–"
    return f"{v / base:.2f}×"


def rows(results: dict[str, CryptoSpeed]) -> list[tuple[str, str, list[float | None]]]:
    """(row title, unit, value per flavour in the order of results)."""
    conf = settings()
    flavours = list(results)
    out: list[tuple[str, str, list[float | None]]] = []
    for ident, title in conf["operations"].items():
        vals = [results[f].ms_per_op.get(ident) for f in flavours]
        if any(v is not None for v in vals):
            out.append((title, "ms/op", vals))
    for ident, title in conf["ciphers"].items():
        for size in conf["blocks"]["sizes"]:
            vals = [results[f].mib_per_s.get(ident, {}).get(str(size)) for f in flavours]
            if any(v is not None for v in vals):
                out.append((f"{title} {int(size) // 1024} KiB", "MiB/s", vals))
    return out


def caption(results: dict[str, CryptoSpeed]) -> str:
    lines = []
    for f, r in results.items():
        w = r.where
        lines.append(
            f"{TITLES.get(f, f)}: {r.tool}, {r.library} {r.version} {r.config}"
            f"{' ' + r.ecc if r.ecc else ''}; {w.target} ({w.machine}), "
            f"{'EMULATED' if w.emulated else 'hardware'}, {w.clock} clock"
            f"{', quick' if r.quick else ''}; missing: {', '.join(r.missing) or 'none'}"
        )
    if BASE in results:
        lines.append("ratio = flavour / Mbed TLS (ms/op: lower is faster; MiB/s: higher is faster)")
    return "\n".join(lines)


def table(results: dict[str, CryptoSpeed], target: str) -> Table:
    emulated = any(r.where.emulated for r in results.values())
    t = Table(
        title=f"Performance on {target}{' (emulated: compare the ratios)' if emulated else ''}"
    )
    flavours = list(results)
    t.add_column("operation", no_wrap=True)
    t.add_column("unit")
    for f in flavours:
        t.add_column(TITLES.get(f, f), justify="right")  # "emulated" is in the title
    others = [f for f in flavours if f != BASE] if BASE in flavours else []
    for f in others:
        t.add_column(f"{TITLES.get(f, f)} / Mbed TLS", justify="right")
    for title, unit, vals in rows(results):
        base = vals[flavours.index(BASE)] if BASE in flavours else None
        ratios = [_ratio(vals[flavours.index(f)], base) for f in others]
        t.add_row(title, unit, *[_num(v) for v in vals], *ratios)
    return t
