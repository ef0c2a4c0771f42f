"""`invoke perf --flavour all --target qemu --quick --test handshake,memory,soak`, as CI runs it:
uhttpd and uclient-fetch of each flavour's userland (MIPS, qemu-user) with heaptrack, the
host's client. Oracles: the negotiated session as `openssl s_client -brief` reports it (the
host's OpenSSL, kept raw in the record) and the library's own options.h; heaptrack's raw lines
read with this file's own pattern, checked against what must hold whatever the code computes
(a download buffers at least one full TLS record; twice the requests make about twice the
allocations; four connections at once need more than one; nothing allocated after the last
mark survives to the exit); the client's own summary line and uclient-fetch's exit statuses
for the soak; the comparison report and the printed table against the store."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from openwrt_wolf.footprint import lab as fp_lab
from openwrt_wolf.report import comparison
from openwrt_wolf.results import store
from openwrt_wolf.results.perf import HANDSHAKE, MEMORY, SOAK, Handshakes, HeapUse, Soak
from tests.conftest import need_tools, userland_sources
from tests.perf import labrun
from tests.perf.labrun import Run

TOOLS = ("mips-linux-gnu-gcc", "qemu-mips-static", "cmake", "autoreconf", "libtoolize", "perl",
         "make", "patch", "openssl", "gcc", "pkg-config", "/usr/include/crypt.h",
         "/usr/mips-linux-gnu/include/stdio.h")  # fmt: skip
FLAVOURS = ("mbedtls", "wolfssl", "openssl")
# RFC 8446 5.1: a record carries up to 2^14 bytes of plaintext, and a TLS library must hold a
# whole record to decrypt it (Mbed TLS MBEDTLS_SSL_IN_CONTENT_LEN, OpenSSL
# SSL3_RT_MAX_PLAIN_LENGTH, wolfSSL MAX_RECORD_SIZE: 16384 each). A 1 MiB download arrives in
# full-size records.
RECORD = 16384
LINE = re.compile(r"^heaptrack pid=\d+ event=(\w+) live=(\d+) peak=(\d+) allocs=(\d+) "
                  r"frees=(\d+)$", re.M)  # fmt: skip

# A cold run builds the three userlands (and OpenSSL for the host) inside the fixture
pytestmark = [pytest.mark.timeout(5400), pytest.mark.xdist_group("perf-net")]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, testrun_uid: str) -> Run:
    need_tools(*TOOLS)
    userland_sources()
    return labrun.once(tmp_path_factory, testrun_uid, "perf-net", "--flavour", "all", "--target",
                       "qemu", "--quick", "--test", "handshake,memory,soak")  # fmt: skip


def _get(st: Path, kind: str) -> dict[str, store.Record]:
    return {r.flavour or "": r for r in store.FileStore(st).query(kind)}


def _heap_lines(text: str) -> list[tuple[str, int, int, int, int]]:
    return [(m[1], int(m[2]), int(m[3]), int(m[4]), int(m[5])) for m in LINE.finditer(text)]


# --- handshakes ---------------------------------------------------------------------------


def test_handshake_groups_from_the_session(run: Run) -> None:
    recs = {f: Handshakes.from_dict(r.data) for f, r in _get(run[1], HANDSHAKE).items()}
    assert set(recs) == set(FLAVOURS)
    # OpenSSL 3.0's s_client (the host's) for X25519 and P-256, 3.5's for the hybrid group
    temp_key = {"x25519": "Server Temp Key: X25519", "p256": "Server Temp Key: ECDH, prime256v1",
                "x25519mlkem768": "Negotiated TLS1.3 group: X25519MLKEM768"}  # fmt: skip
    for flavour, h in recs.items():
        assert h.common.emulated and h.common.target == "qemu" and h.common.quick
        for group, want in temp_key.items():
            witness = h.sessions[group]
            if group in h.missing:  # the server refused the group: s_client says so too
                assert "Protocol version" not in witness, (flavour, group, witness)
                continue
            assert "Protocol version: TLSv1.3" in witness, (flavour, witness)
            assert want in witness, (flavour, witness)
            assert re.search(r"Signature type: (ECDSA|ecdsa_secp256r1_sha256)$", witness, re.M)
            assert "Hash used: SHA256" in witness and "Verification: OK" in witness
            assert len(h.ms[group]) == h.repeats == 5
            probe_names = {"x25519": "x25519", "p256": "secp256r1",
                           "x25519mlkem768": "X25519MLKEM768"}  # fmt: skip
            assert h.negotiated[group]["group"] == probe_names[group]
            assert h.median_ms[group] == pytest.approx(statistics.median(h.ms[group]), abs=1e-3)
            assert h.common.metrics[f"handshake_{group}_ms"]["unit"] == "ms"
            assert h.server_cpu_ms[group] > 0
        assert "p256" not in h.missing  # every library here has P-256


def test_x25519_only_where_the_library_has_it(run: Run) -> None:
    """wolfSSL's minimal mode: X25519 exactly when its options.h (configure's output) says so."""
    h = Handshakes.from_dict(_get(run[1], HANDSHAKE)["wolfssl"].data)
    options = fp_lab.build_root() / h.common.footprint_key / "include/wolfssl/options.h"
    has = "#define HAVE_CURVE25519" in options.read_text()
    assert ("x25519" not in h.missing) == has


def test_hybrid_post_quantum_only_in_openssl(run: Run) -> None:
    recs = {f: Handshakes.from_dict(r.data) for f, r in _get(run[1], HANDSHAKE).items()}
    assert recs["openssl"].negotiated["x25519mlkem768"]["group"] == "X25519MLKEM768"
    assert recs["openssl"].negotiated["x25519mlkem768"]["version"] == "TLSv1.3"
    for f in ("mbedtls", "wolfssl"):
        assert "Mbed TLS 3.6 has no ML-KEM" in recs[f].missing["x25519mlkem768"]


# --- memory -------------------------------------------------------------------------------


def test_download_heap_holds_a_full_record(run: Run) -> None:
    for flavour, rec in _get(run[1], MEMORY).items():
        m = HeapUse.from_dict(rec.data)
        lines = _heap_lines(m.reports["uclient-fetch"])
        assert lines[0][0] == "start" and lines[-1][0] == "exit", flavour
        _, _, peak, allocs, frees = lines[-1]
        assert peak > RECORD, (flavour, peak)
        assert m.common.metrics["download_heap_peak"] == {"value": peak, "unit": "B"}
        assert m.common.metrics["download_allocs"]["value"] == allocs >= frees
        assert m.download_bytes == 1024 * 1024


def test_uhttpd_heap_phases(run: Run) -> None:
    for flavour, rec in _get(run[1], MEMORY).items():
        m = HeapUse.from_dict(rec.data)
        lines = _heap_lines(m.reports["uhttpd"])
        marks = [x for x in lines if x[0] == "mark"]
        assert len(marks) == 4 and lines[-1][0] == "exit", (flavour, lines)
        before, seq, double, conc = marks
        n = m.server[1].requests
        per = (seq[3] - before[3]) / n
        per2 = (double[3] - seq[3]) / (2 * n)
        # uhttpd's allocations grow linearly in requests: 2N requests cost ~2x N's
        assert per2 == pytest.approx(per, rel=0.15), (flavour, per, per2)
        assert m.common.metrics["uhttpd_allocs_per_request"]["value"] == pytest.approx(per, 0.01)
        # four connections open at once need more heap than one at a time
        assert conc[2] > seq[2], (flavour, conc, seq)
        assert m.common.metrics["uhttpd_heap_peak"]["value"] == seq[2]
        assert m.common.metrics["uhttpd_heap_held"]["value"] == seq[1] - before[1]
        # at exit (SIGTERM after the last mark) nothing more is live than at the last mark
        assert lines[-1][1] <= conc[1], (flavour, lines[-1], conc)


# --- soak ---------------------------------------------------------------------------------


def test_soak_has_no_failure(run: Run) -> None:
    recs = {f: Soak.from_dict(r.data) for f, r in _get(run[1], SOAK).items()}
    assert set(recs) == set(FLAVOURS)
    for flavour, s in recs.items():
        m = re.fullmatch(r"done ok=(\d+) failed=(\d+)", s.client_summary)
        assert m and (int(m[1]), int(m[2])) == (s.requests, 0), (flavour, s.client_summary)
        assert s.download_exits == {"0": s.downloads}, (flavour, s.errors)
        assert (s.requests, s.jobs, s.downloads) == (100, 4, 10)
    assert "soak: 100/100 requests" in run[0].stderr  # progress lines


# --- the tables ---------------------------------------------------------------------------


def test_table_prints_memory_with_ratios(run: Run) -> None:
    out = run[0].stdout
    assert "Memory on qemu" in out and "Performance on qemu (emulated" in out
    mem = {f: HeapUse.from_dict(r.data) for f, r in _get(run[1], MEMORY).items()}
    per = {f: m.common.metrics["uhttpd_allocs_per_request"]["value"] for f, m in mem.items()}
    row = next(ln for ln in out.splitlines() if "allocations per request" in ln)
    assert f"{per['wolfssl'] / per['mbedtls']:.2f}×" in row, (row, per)
    assert f"{per['openssl'] / per['mbedtls']:.2f}×" in row, (row, per)
    assert "TLS 1.3 handshake, P-256 (median)" in out


def test_comparison_report_fills_memory_and_performance(run: Run) -> None:
    tables = comparison.tables([], [], store.FileStore(run[1]), list(FLAVOURS), None, None)
    by = {t.id: {r.id: r for r in t.rows} for t in tables}
    peak = by["memory"]["perf:download_heap_peak:"]
    mem = {f: HeapUse.from_dict(r.data) for f, r in _get(run[1], MEMORY).items()}
    assert {f: v.value for f, v in peak.values.items()} == {
        f: m.download.peak for f, m in mem.items()
    }
    src = peak.values["wolfssl"].source
    assert src is not None and src.setting == "emulated (qemu)"
    hs = by["performance"]["perf:handshake_p256_ms:"]
    assert set(hs.values) == set(FLAVOURS) and hs.unit == "ms"
    assert "perf:soak_failed:" in by["memory"]
