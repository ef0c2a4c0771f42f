"""The records of the real armsr/armv8 images committed under docs/records/ (docs/results.md
"Real OpenWrt: armsr/armv8"), read as a user redraws the tables from them. Each figure is
checked against what OpenWrt's make wrote beside the images (sha256sums, the manifest,
profiles.json) and against the raw lines the record kept from the guest (heaptrack's reports,
the probe's times, `openssl s_client -brief`): a record whose image is not the one OpenWrt
built, or whose figures do not follow from its own lines, fails here."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from openwrt_wolf.perf import heap
from openwrt_wolf.results.artifacts import Artifacts
from openwrt_wolf.results.perf import HANDSHAKE, MEMORY, Handshakes, HeapUse
from openwrt_wolf.results.store import FileStore, Record
from tests import records as records_kit

RUN = Path(__file__).resolve().parents[2] / "docs" / "records" / "openwrt-25.12.5-armsr-armv8"
FLAVOURS = ("mbedtls", "wolfssl", "openssl")
PREFIX = "openwrt-armsr-armv8-generic"
ROOTFS = f"{PREFIX}-squashfs-rootfs.img.gz"
INITRAMFS = f"{PREFIX}-initramfs-kernel.bin"
PARTITION = 104 * 1024 * 1024  # CONFIG_TARGET_ROOTFS_PARTSIZE's default (Config-images.in)


def openwrt_sha256(flavour: str, name: str) -> str:
    return records_kit.openwrt_sha256(RUN / "openwrt" / flavour / "sha256sums", name)


def manifest(flavour: str) -> set[str]:
    text = (RUN / "openwrt" / flavour / f"{PREFIX}.manifest").read_text()
    return {line.split(" - ")[0] for line in text.splitlines() if " - " in line}


def records(kind: str) -> list[Record]:
    return FileStore(RUN / "records").query(kind)


def one(kind: str, flavour: str) -> Record:
    (rec,) = [r for r in records(kind) if r.flavour == flavour]
    return rec


def test_every_flavour_has_its_records() -> None:
    for kind in ("build", "memory", MEMORY, HANDSHAKE):
        assert sorted(r.flavour or "" for r in records(kind)) == sorted(FLAVOURS), kind


def test_no_mbedtls_is_left_in_the_wolfssl_image() -> None:
    """OpenWrt's own manifest of each image: the patch set's wolfSSL image has no Mbed TLS
    package, the stock one has Mbed TLS's, the OpenSSL one OpenSSL's."""
    assert not [p for p in manifest("wolfssl") if "mbedtls" in p]
    base = {re.sub(r"[\d.]+(\.[0-9a-f]{8})?$", "", p) for p in manifest("wolfssl")}  # ABI names
    assert {"libwolfssl", "libustream-wolfssl", "apk-wolfssl", "px5g-wolfssl"} <= base
    assert [p for p in manifest("mbedtls") if p.startswith("libmbedtls")]
    assert [p for p in manifest("openssl") if p.startswith("libopenssl")]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_build_record_fits_the_root_partition(flavour: str) -> None:
    """The fit of each build: the root partition's 104 MiB, the rootfs's squashfs size, the
    squashfs disk image profiles.json lists (its size and OpenWrt's sha256)."""
    rec = one("build", flavour)
    a = Artifacts.from_dict(rec.data["output"])
    assert a.fit is not None and a.rootfs is not None
    assert a.fit.limit == PARTITION and a.fit.verdict == "FITS"
    assert a.fit.margin == PARTITION - a.rootfs.size
    prof = json.loads((RUN / "openwrt" / flavour / "profiles.json").read_text())
    disks = {i["name"]: i for i in prof["profiles"]["generic"]["images"]
             if i["type"] == "combined-efi" and i["filesystem"] == "squashfs"}  # fmt: skip
    up = a.upgrade_image
    assert up is not None and up.name in disks and up.size == disks[up.name]["size"]
    assert disks[up.name]["sha256"] == openwrt_sha256(flavour, up.name)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_free_memory_is_of_the_image_openwrt_built(flavour: str) -> None:
    """measure-memory booted the flavour's initramfs kernel (OpenWrt's sha256) three times; the
    medians follow from each boot's /proc/meminfo."""
    d = one("memory", flavour).data
    assert d["image_sha256"] == openwrt_sha256(flavour, INITRAMFS)
    assert d["arch"] == "aarch64" and d["openwrt_release"] == "25.12.5"
    boots = d["per_boot"]
    assert len(boots) == d["boots"] == 3
    for field in ("MemFree", "MemAvailable"):
        median = statistics.median(b["meminfo_kb"][field] for b in boots)
        assert d[f"{field.lower()}_kb"] == median


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_heap_figures_follow_from_heaptrack_s_own_lines(flavour: str) -> None:
    h = HeapUse.from_dict(one(MEMORY, flavour).data)
    assert h.common.userland_key == f"image-{openwrt_sha256(flavour, ROOTFS)[:12]}"
    ends = [r for r in heap.parse(h.reports["uclient-fetch"]) if r.event == "exit"]
    assert ends and (h.download.peak, h.download.allocs) == (ends[-1].peak, ends[-1].allocs)
    marks = [r for r in heap.parse(h.reports["uhttpd"]) if r.event == "mark"]
    assert len(marks) == 4
    assert h.common.metrics["uhttpd_heap_peak"]["value"] == marks[1].peak
    assert h.common.metrics["uhttpd_heap_peak_concurrent"]["value"] == marks[3].peak
    listed = h.common.library.removeprefix("the image's: ").split(", ")
    assert listed and set(listed) <= manifest(flavour)
    assert "-M virt" in h.common.where.machine


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_handshakes_follow_from_the_probe_s_times_and_the_sessions(flavour: str) -> None:
    h = Handshakes.from_dict(one(HANDSHAKE, flavour).data)
    assert h.common.userland_key == f"image-{openwrt_sha256(flavour, ROOTFS)[:12]}"
    for g in ("x25519", "p256"):
        s = h.sessions[g]
        assert "Protocol version: TLSv1.3" in s and "Verification: OK" in s
        assert len(h.ms[g]) == h.repeats
        assert h.median_ms[g] == round(statistics.median(h.ms[g]), 3)
        assert h.common.metrics[f"handshake_{g}_ms"]["value"] == h.median_ms[g]
    assert ("x25519mlkem768" in h.ms) == (flavour == "openssl")
