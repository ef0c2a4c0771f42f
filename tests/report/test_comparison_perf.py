"""The comparison's Performance table fills from the performance lab's own crypto records
(kind perf-crypto, perf.model.CryptoSpeed), labelled emulated, with the lab's units."""

from __future__ import annotations

from pathlib import Path

from openwrt_wolf.perf.model import CRYPTO, CryptoSpeed, Where
from openwrt_wolf.report import comparison
from openwrt_wolf.results.store import FileStore, Record

# what the test writes is the oracle: figures of the shape the lab stores
FIGURES = {
    "mbedtls": (
        {"p256-sign": 2.742, "x25519": 5.769},
        {"aes-128-gcm": {"1024": 7.9, "16384": 8.219}},
    ),
    "wolfssl": ({"p256-sign": 0.581}, {"aes-128-gcm": {"1024": 25.0, "16384": 28.0}}),
}


def test_crypto_records_fill_the_performance_table(tmp_path: Path) -> None:
    st = FileStore(tmp_path / "results")
    where = Where(target="qemu", emulated=True, machine="qemu-mips-static -cpu 24Kf", clock="cpu")
    for flav, (ms, mib) in FIGURES.items():
        rec = CryptoSpeed(
            flavour=flav, library=flav, version="1", config="openwrt", ecc=None,
            tool="benchmark", where=where, ms_per_op=ms, mib_per_s=mib, missing=[],
            quick=False, commands=[], outputs=[], seconds=1.0, footprint_key="k",
        )  # fmt: skip
        st.put(Record(CRYPTO, f"{flav}-qemu-crypto", "25.12.5", None, flav, rec.to_dict()))
    tables = comparison.tables([], [], st, ["mbedtls", "wolfssl"], None, None)
    perf = next(t for t in tables if t.id == "performance")
    rows = {r.id: r for r in perf.rows}
    sign = rows["perf:p256-sign_ms:"]
    assert (sign.unit, sign.better) == ("ms", "lower")
    assert {f: fig.value for f, fig in sign.values.items()} == {"mbedtls": 2.742, "wolfssl": 0.581}
    gcm = rows["perf:aes-128-gcm_16k:"]
    assert gcm.unit == "MiB/s" and gcm.values["wolfssl"].value == 28.0
    assert "perf:aes-128-gcm_1k:" in rows  # both block sizes, each its own row
    assert set(rows["perf:x25519_ms:"].values) == {"mbedtls"}  # wolfSSL has none: no cell
    src = sign.values["wolfssl"].source
    assert src is not None and src.setting.startswith("emulated") and "qemu" in src.setting
