"""The run-time records of the real malta/be images committed under docs/records/ (docs/results.md
"Run-time figures on the real malta/be images"), read as a user redraws the Memory and
Performance tables from them. Each figure is checked against what the record kept beside it
from the guest (heaptrack's own report lines, the /proc tick counts) and each image against
the files OpenWrt's make wrote (sha256sums, the manifest): a record whose figures do not follow
from its raw lines, or whose image is not the one OpenWrt built, fails here."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from openwrt_wolf.perf import heap
from openwrt_wolf.report import comparison
from openwrt_wolf.results.perf import (
    HANDSHAKE,
    IMAGE,
    MEMORY,
    WIFI,
    Handshakes,
    HeapUse,
    ImageServer,
    WifiConnections,
)
from openwrt_wolf.results.store import FileStore, Record
from tests import records as records_kit

RUN = Path(__file__).resolve().parents[2] / "docs" / "records" / "openwrt-25.12.5-malta-be-runtime"
FLAVOURS = ("mbedtls", "wolfssl", "openssl")


def openwrt_sha256(flavour: str, name: str) -> str:
    return records_kit.openwrt_sha256(RUN / "openwrt" / flavour / "sha256sums", name)


def manifest(flavour: str) -> set[str]:
    text = (RUN / "openwrt" / flavour / "openwrt-malta-be-default.manifest").read_text()
    return {line.split(" - ")[0] for line in text.splitlines() if " - " in line}


def records(kind: str) -> list[Record]:
    return FileStore(RUN / "records").query(kind)


def test_every_flavour_has_its_heap_and_image_records() -> None:
    assert sorted(r.flavour or "" for r in records(MEMORY)) == sorted(FLAVOURS)
    assert sorted(r.flavour or "" for r in records(IMAGE)) == sorted(FLAVOURS)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_heap_figures_follow_from_heaptrack_s_own_lines(flavour: str) -> None:
    """The six Memory rows of the image's own uclient-fetch and uhttpd, recomputed from the
    heaptrack lines the guest wrote: the exit report of the download, the four SIGUSR2 marks
    of uhttpd (after the warm-up, after n, 2n and 4-at-once requests)."""
    (rec,) = [r for r in records(MEMORY) if r.flavour == flavour]
    h = HeapUse.from_dict(rec.data)
    ends = [r for r in heap.parse(h.reports["uclient-fetch"]) if r.event == "exit"]
    assert ends and (h.download.peak, h.download.allocs) == (ends[-1].peak, ends[-1].allocs)
    marks = [r for r in heap.parse(h.reports["uhttpd"]) if r.event == "mark"]
    assert len(marks) == 4
    n = h.server[1].requests
    for phase, m, prev in zip(h.server[1:], marks[1:], marks[:-1], strict=True):
        assert phase.live == m.live - prev.live and phase.allocs == m.allocs - prev.allocs
        assert phase.peak == m.peak
    figures = {k: v["value"] for k, v in h.common.metrics.items()}
    assert figures == {
        "download_heap_peak": ends[-1].peak,
        "download_allocs": ends[-1].allocs,
        "uhttpd_heap_peak": marks[1].peak,
        "uhttpd_heap_peak_concurrent": marks[3].peak,
        "uhttpd_heap_held": marks[1].live - marks[0].live,
        "uhttpd_allocs_per_request": round((marks[1].allocs - marks[0].allocs) / n, 1),
    }
    # the programs measured are the image's: its kernel is the one OpenWrt built, and every TLS
    # package the guest's apk listed is in OpenWrt's manifest of that flavour
    sha = openwrt_sha256(flavour, "openwrt-malta-be-vmlinux.elf")
    assert h.common.userland_key == f"image-{sha[:12]}" and rec.key.endswith("-disk")
    listed = h.common.library.removeprefix("the image's: ").split(", ")
    assert listed and set(listed) <= manifest(flavour)
    assert h.common.emulated and h.common.target == "vm"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cpu_figures_follow_from_the_tick_counts(flavour: str) -> None:
    """uhttpd's CPU per handshake and its split (plain HTTP, handshake alone, handshake and
    request) from the /proc tick counts the record kept (USER_HZ 100: 10 ms a tick)."""
    (rec,) = [r for r in records(IMAGE) if r.flavour == flavour]
    d = ImageServer.from_dict(rec.data)
    assert d.image_sha256 == openwrt_sha256(flavour, "openwrt-malta-be-vmlinux.elf")
    assert d.root == "disk" and d.mbedtls_present == (flavour == "mbedtls")
    for kex, c in d.handshake_cpu.items():
        assert c["cpu_ms_per_handshake"] == round(c["cpu_ticks"] * 10 / c["handshakes"], 2)
        shown = d.metrics[f"image_handshake_cpu_ms_{kex}"]["value"]
        assert shown == c["cpu_ms_per_handshake"]
    assert {"plain_http", "handshake_only_x25519", "handshake_request_p256"} <= set(d.cpu_split)
    for c in d.cpu_split.values():
        assert c["user_ms"] == round(c["utime_ticks"] * 10 / c["connections"], 2)
        assert c["system_ms"] == round(c["stime_ticks"] * 10 / c["connections"], 2)
    assert d.soak["requests"] == 5000 and len(d.host_load) == 2


def test_the_comparison_draws_the_image_rows_from_the_records() -> None:
    tables = comparison.tables([], [], FileStore(RUN / "records"), list(FLAVOURS), None, None)
    by = {t.id: {r.id: r for r in t.rows} for t in tables}
    row = by["memory"]["perf:download_heap_peak:malta-be"]
    for r in records(MEMORY):
        want = HeapUse.from_dict(r.data).download.peak
        assert row.values[r.flavour or ""].value == want
    src = row.values["wolfssl"].source
    assert src is not None and src.setting == "emulated (vm)"
    assert "perf:image_handshake_cpu_ms_p256:malta-be" in by["performance"]


def test_every_soak_names_its_failures() -> None:
    """Each soak the records keep (current and replaced) names its failed requests one by one
    (up to 200), as many as it counts; a uhttpd that died and was respawned by procd shows as
    two pids."""
    soaks = [ImageServer.from_dict(r.data).soak for r in FileStore(RUN / "records").history(IMAGE)]
    named = [s for s in soaks if "request_errors" in s]
    assert named, "no soak record keeps its errors"
    for s in named:
        assert len(s["request_errors"]) == min(s["request_failures"], 200)
        assert all(e.startswith("#") and " s: " in e for e in s["request_errors"])
        pids = s.get("uhttpd_pids", [])
        if len(pids) == 2 and s["request_failures"] == 0:
            assert pids[0] == pids[1]


STAMP = re.compile(r"^(\d+\.\d{6}): (.*)$", re.M)
MARK = re.compile(r"^heaptrack pid=\d+ event=mark live=(\d+) peak=(\d+) allocs=\d+ frees=\d+$",
                  re.M)  # fmt: skip


def _connections(sta_lines: str) -> list[float]:
    """Each connection in wpa_supplicant's -t lines, read here: from the first "SME: Trying to
    authenticate" after the last connection or disconnection to CTRL-EVENT-CONNECTED, ms."""
    out, start = [], None
    for t, msg in STAMP.findall(sta_lines):
        if "SME: Trying to authenticate" in msg and start is None:
            start = float(t)
        elif "CTRL-EVENT-CONNECTED" in msg and start is not None:
            out.append(round((float(t) - start) * 1000, 3))
            start = None
        elif "CTRL-EVENT-DISCONNECTED" in msg:
            start = None
    return out


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_wifi_in_the_real_image_follows_from_the_daemons_own_lines(
    flavour: str, openwrt_tree_25125: Path
) -> None:
    """The image's own wpad-basic (the v25.12.5 tree's hostapd pin) in the image OpenWrt's make
    wrote: every timed connection recomputed from wpa_supplicant's -t lines, the CPU figure the
    mean of the 10 ms ticks, the method and group from the station's status, and the AP's own
    events and PMKSA cache for that station (4-way handshake completed: the same PMK on both
    sides), hostapd's idle heap from heaptrack's first mark."""
    (rec,) = [r for r in records(WIFI) if r.flavour == flavour]
    w = WifiConnections.from_dict(rec.data)
    assert w.guest["rootfs_sha256"] == openwrt_sha256(
        flavour, "openwrt-malta-be-rootfs-squashfs.img.gz"
    )
    mk = (openwrt_tree_25125 / "package/network/services/hostapd/Makefile").read_text()
    pin = {k: re.search(rf"^PKG_{k}:=(\S+)$", mk, re.M) for k in ("SOURCE_DATE", "SOURCE_VERSION",
                                                                  "RELEASE")}  # fmt: skip
    date, version, release = (m[1] if m else "" for m in pin.values())
    want = f"wpad-basic-{flavour}-{date.replace('-', '.')}~{version[:8]}-r{release}.apk"
    assert w.wpad["package"] == want
    installed = w.wpad["installed"]  # `apk info` in the image after the run: names
    assert f"wpad-basic-{flavour}" in installed
    if flavour == "wolfssl":
        assert not [p for p in installed if "mbedtls" in p], installed
    metrics = {k: v["value"] for k, v in w.common.metrics.items()}
    for name, m in w.modes.items():
        key = name.replace("-", "_")
        assert (m.ok, m.failed) == (m.connections, 0), m.errors
        times = _connections(m.log["wpa_supplicant"])
        assert times == m.ms and len(times) == m.connections
        assert metrics[f"wifi_{key}_ms"] == round(statistics.median(times), 3)
        assert m.cpu_clock == "ticks" and len(m.ap_cpu_ms) == m.connections
        assert all(round(x) % 10 == 0 for x in m.ap_cpu_ms + m.sta_cpu_ms)
        assert metrics[f"wifi_{key}_ap_cpu_ms"] == round(statistics.mean(m.ap_cpu_ms), 3)
        status = dict(ln.split("=", 1) for ln in m.witness["wpa_cli status"].splitlines()
                      if "=" in ln)  # fmt: skip
        assert status["wpa_state"] == "COMPLETED"
        addr, ap = status["address"], m.witness["hostapd"]
        if name == "owe":
            assert status["key_mgmt"] == "OWE" and f"{addr} auth_alg=open" in ap
        else:
            assert (status["key_mgmt"], status["sae_group"]) == ("SAE", "19")
            assert status["sae_h2e"] == ("1" if name == "sae-h2e" else "0")
            assert f"AP-STA-CONNECTED {addr} auth_alg=sae" in ap
        assert f"EAPOL-4WAY-HS-COMPLETED {addr}" in ap
        assert re.search(rf"^\d+ {addr} [0-9a-f]{{32}} ", m.witness["hostapd_cli pmksa"], re.M)
        first = MARK.search(m.heap_report)
        assert first and m.heap_idle is not None and m.heap_idle.live == int(first[1])
    rows = comparison.tables([], [], FileStore(RUN / "records"), list(FLAVOURS), None, None)
    perf = {r.id: r for t in rows if t.id == "performance" for r in t.rows}
    row = perf["perf:wifi_sae_hnp_ms:malta-be"]
    assert row.values[flavour].value == metrics["wifi_sae_hnp_ms"] and row.reference


SESSION_GROUP = {"x25519": r"Server Temp Key: X25519\b",
                 "p256": r"Server Temp Key: ECDH, prime256v1\b",
                 "x25519mlkem768": r"Negotiated TLS1\.3 group: X25519MLKEM768\b"}  # fmt: skip


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_image_handshakes_follow_from_the_probe_s_times_and_the_sessions(flavour: str) -> None:
    """`perf --test handshake --rootfs` against each image's own uhttpd: each median from the
    probe's times, each group witnessed by the host's `openssl s_client -brief` (TLS 1.3, the
    group offered, the P-256 certificate verified), the server's CPU a whole number of 10 ms
    ticks over the handshakes; ML-KEM only where the image's library has it (OpenSSL 3.5)."""
    (rec,) = [r for r in records(HANDSHAKE) if r.flavour == flavour]
    h = Handshakes.from_dict(rec.data)
    assert rec.device == "malta-be" and h.common.where.target == "vm"
    for g in ("x25519", "p256", "x25519mlkem768"):
        if g == "x25519mlkem768" and flavour != "openssl":
            assert g in h.missing and g not in h.ms
            continue
        s = h.sessions[g]
        assert "Protocol version: TLSv1.3" in s and "Verification: OK" in s
        assert re.search(SESSION_GROUP[g], s), s
        assert len(h.ms[g]) == h.repeats
        assert h.median_ms[g] == round(statistics.median(h.ms[g]), 3)
        assert h.common.metrics[f"handshake_{g}_ms"]["value"] == h.median_ms[g]
        ticks = h.server_cpu_ms[g] * h.repeats / 10
        assert ticks > 0 and abs(ticks - round(ticks)) < 1e-6
    tables = comparison.tables([], [], FileStore(RUN / "records"), list(FLAVOURS), None, None)
    perf = {r.id: r for t in tables if t.id == "performance" for r in t.rows}
    row = perf["perf:handshake_x25519_cpu_ms:malta-be"]
    assert row.values[flavour].value == h.server_cpu_ms["x25519"]
