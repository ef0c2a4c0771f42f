"""The comparison's Performance table fills from the performance lab's own crypto records
(kind perf-crypto, results.perf.CryptoSpeed), labelled emulated, with the lab's units."""

from __future__ import annotations

from pathlib import Path

from openwrt_wolf.report import comparison
from openwrt_wolf.results.perf import (
    CRYPTO,
    HANDSHAKE,
    IMAGE,
    MEMORY,
    CryptoSpeed,
    Handshakes,
    HeapPhase,
    HeapUse,
    ImageServer,
    NetCommon,
    Where,
)
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


def _common(flavour: str, metrics: dict[str, dict[str, object]]) -> NetCommon:
    where = Where(target="qemu", emulated=True, machine="qemu-mips-static -cpu 24Kf", clock="wall")
    return NetCommon(flavour=flavour, library=flavour, backend=flavour, userland_key="u",
                     footprint_key="f", client="tlsprobe", where=where, target="qemu",
                     emulated=True, quick=False, metrics=metrics, seconds=1.0)  # fmt: skip


def test_network_records_fill_memory_and_performance(tmp_path: Path) -> None:
    """perf-memory and perf-handshake records (results.perf.HeapUse, Handshakes): their metrics
    land in the Memory and Performance tables, labelled emulated."""
    st = FileStore(tmp_path / "results")
    peaks = {"mbedtls": 439572, "wolfssl": 244172}  # what the test writes is the oracle
    for flav, peak in peaks.items():
        phase = HeapPhase("download", 1, 0, peak, 10, 10)
        mem = HeapUse(common=_common(flav, {"download_heap_peak": {"value": peak, "unit": "B"}}),
                      download_bytes=1, download=phase, server=[], reports={})  # fmt: skip
        st.put(Record(MEMORY, f"{flav}-qemu-memory", "25.12.5", None, flav, mem.to_dict()))
        hs = Handshakes(common=_common(flav, {"handshake_p256_ms": {"value": 9.5, "unit": "ms"}}),
                        repeats=1, ms={"p256": [9.5]}, median_ms={"p256": 9.5}, sessions={},
                        negotiated={}, missing={})  # fmt: skip
        st.put(Record(HANDSHAKE, f"{flav}-qemu-handshake", "25.12.5", None, flav, hs.to_dict()))
    tables = comparison.tables([], [], st, ["mbedtls", "wolfssl"], None, None)
    by = {t.id: {r.id: r for r in t.rows} for t in tables}
    row = by["memory"]["perf:download_heap_peak:"]
    assert {f: v.value for f, v in row.values.items()} == peaks
    assert row.unit == "B" and row.better == "lower"
    src = row.values["wolfssl"].source
    assert src is not None and src.setting == "emulated (qemu)"
    assert by["performance"]["perf:handshake_p256_ms:"].values["mbedtls"].value == 9.5
    back = st.get(MEMORY, "wolfssl-qemu-memory")
    assert back is not None and HeapUse.from_dict(back.data).download.peak == 244172


def test_image_records_fill_memory_and_performance(tmp_path: Path) -> None:
    """perf-image records (results.perf.ImageServer, bench/openwrt_vm.py on a real image): the
    image's uhttpd per held session in Memory, the handshake median in Performance, each
    labelled emulated (vm) with the device."""
    st = FileStore(tmp_path / "results")
    per_session = {"mbedtls": 46.8, "wolfssl": 18.4}  # what the test writes is the oracle
    where = Where(target="vm", emulated=True, machine="qemu-system-mips -M malta", clock="wall")
    for flav, kb in per_session.items():
        rec = ImageServer(
            flavour=flav, image="x.elf", image_sha256="0" * 64, where=where, target="vm",
            emulated=True, tls_packages=[], mbedtls_present=flav == "mbedtls",
            negotiated={"version": "TLSv1.3"}, requests=1, held=10, handshake_s=[0.03],
            uhttpd_kB={}, apk_exit={"good": 0},
            metrics={"uhttpd_rss_per_session": {"value": kb, "unit": "kB"},
                     "image_handshake_ms": {"value": 30.0, "unit": "ms"}},
        )  # fmt: skip
        assert ImageServer.from_dict(rec.to_dict()) == rec
        st.put(Record(IMAGE, f"{flav}-vm-image", "25.12.5", "malta-be", flav, rec.to_dict()))
    tables = comparison.tables([], [], st, ["mbedtls", "wolfssl"], None, None)
    by = {t.id: {r.id: r for r in t.rows} for t in tables}
    row = by["memory"]["perf:uhttpd_rss_per_session:malta-be"]
    assert {f: v.value for f, v in row.values.items()} == per_session
    assert row.unit == "kB" and "TLS session held open" in row.label
    src = row.values["wolfssl"].source
    assert src is not None and src.setting == "emulated (vm)"
    assert "perf:image_handshake_ms:malta-be" in by["performance"]


def test_the_reference_s_figures_stand_beside_ours_with_their_ratios(tmp_path: Path) -> None:
    """A row data/comparison.toml gives the reference's figures for shows them as a last
    column, each with its ratio to the reference's Mbed TLS figure; every renderer's row has
    as many cells as its header. The oracle is the data file itself, read with tomllib."""
    import tomllib

    from openwrt_wolf.paths import DATA_DIR
    from openwrt_wolf.report.render import render
    from openwrt_wolf.report.sizereport import SizeReport

    raw = tomllib.loads((DATA_DIR / "comparison.toml").read_text())
    (ref,) = [m["reference"] for m in raw["memory"] if m["name"] == "download_heap_peak"]
    st = FileStore(tmp_path / "results")
    where = Where(target="vm", emulated=True, machine="qemu-system-mips -M malta", clock="wall")
    for flav, peak in {"mbedtls": 545068, "wolfssl": 306789, "openssl": 943066}.items():
        common = NetCommon(
            flavour=flav, library=flav, backend=flav, userland_key="u", footprint_key="f",
            client="c", where=where, target="vm", emulated=True, quick=False,
            metrics={"download_heap_peak": {"value": peak, "unit": "B"}}, seconds=1.0,
        )  # fmt: skip
        phase = HeapPhase("download", 1, 0, peak, 1, 1)
        rec = HeapUse(common, 1, phase, [], {})
        st.put(Record(MEMORY, f"{flav}-vm-memory", "25.12.5", "malta-be", flav, rec.to_dict()))
    cols = ["mbedtls", "wolfssl", "openssl"]
    tables = comparison.tables([], [], st, cols, None, None)
    by = {t.id: {r.id: r for r in t.rows} for t in tables}
    assert by["memory"]["perf:download_heap_peak:malta-be"].reference == ref
    want = (
        f"{ref['mbedtls']:,} / {ref['wolfssl']:,} ({ref['wolfssl'] / ref['mbedtls']:.2f}×) / "
        f"{ref['openssl']:,} ({ref['openssl'] / ref['mbedtls']:.2f}×)"
    )
    md = render(SizeReport(devices=[], comparison=tables), "markdown")
    header = next(ln for ln in md.splitlines() if ln.startswith("|  | unit |"))
    assert header.rstrip("|").split("|")[-1].strip() == "reference (router)"
    line = next(ln for ln in md.splitlines() if ln.startswith("| HTTPS download"))
    assert line.count("|") == header.count("|")
    assert line.rstrip(" |").rsplit("|", 1)[1].strip() == want
    html = render(SizeReport(devices=[], comparison=tables), "html")
    assert f'<td class="num reference">{want}</td>' in html
