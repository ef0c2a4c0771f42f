"""The run-time records of the real malta/be images committed under docs/records/ (docs/results.md
"Run-time figures on the real malta/be images"), read as a user redraws the Memory and
Performance tables from them. Each figure is checked against what the record kept beside it
from the guest (heaptrack's own report lines, the /proc tick counts) and each image against
the files OpenWrt's make wrote (sha256sums, the manifest): a record whose figures do not follow
from its raw lines, or whose image is not the one OpenWrt built, fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from openwrt_wolf.perf import heap
from openwrt_wolf.perf.model import IMAGE, MEMORY, HeapUse, ImageServer
from openwrt_wolf.report import comparison
from openwrt_wolf.results.store import FileStore, Record

RUN = Path(__file__).resolve().parents[2] / "docs" / "records" / "openwrt-25.12.5-malta-be-runtime"
FLAVOURS = ("mbedtls", "wolfssl", "openssl")


def openwrt_sha256(flavour: str, name: str) -> str:
    for line in (RUN / "openwrt" / flavour / "sha256sums").read_text().splitlines():
        digest, _, file = line.partition(" *")
        if file == name:
            return digest
    raise AssertionError(f"{name} not in OpenWrt's sha256sums of {flavour}")


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
