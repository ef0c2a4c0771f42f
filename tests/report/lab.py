"""A results store with builds of two releases, a footprint, memory and perf records, made
of real images: squashfs (mksquashfs), uImage kernels (mkimage) and sysupgrade files
assembled as include/image-commands.mk describes (append-kernel | pad-to 64k |
append-rootfs | pad-rootfs). The oracles are those files (stat, unsquashfs -s, xz -9e) and
the values the records were written with — never a number the report code produced."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from openwrt_wolf.firmware import artifacts
from openwrt_wolf.results.store import FileStore, Record

from ..conftest import need_tools
from ..records import build_data, footprint_data, memory_data
from ..sqfs_kit import (
    FLAVOUR_LIBS,
    GLUE,
    ath79_sysupgrade,
    make_tree,
    mksquashfs,
    profiles_json,
    uimage_kernel,
    unsquashfs_size,
    xz9e_size,
)

AR300 = "glinet_gl-ar300m16"
IMAGE_SIZE = 16_384_000  # 16000k (openwrt-facts.md)
BLOCK = 65536
MARKER = 4  # padjffs2's de ad c0 de after the last block
NEW, OLD = "25.12.5", "24.10.8"
KERNEL = {
    (OLD, "mbedtls"): 1_800_000,
    (OLD, "wolfssl"): 1_800_000,
    (NEW, "mbedtls"): 1_900_000,
    (NEW, "wolfssl"): 1_900_000,
    (NEW, "openssl"): 15_800_000,  # with its rootfs over IMAGE_SIZE: OpenWrt deletes it
}
CREATED = {OLD: "2026-10-01T08:00:00Z", NEW: "2026-11-01T08:00:00Z"}
FOOTPRINT = {"mbedtls": 232_316, "wolfssl": 241_940, "openssl": 1_243_648}  # xz, as recorded
MEMFREE = {"mbedtls": 61_234, "wolfssl": 62_010, "openssl": 58_877}  # kB, median
HANDSHAKES = {"mbedtls": 41.5, "wolfssl": 57.25, "openssl": 38.0}  # TLS 1.3 /s
HEAP_PEAK = {"mbedtls": 38_912, "wolfssl": 21_504, "openssl": 101_376}  # B


@dataclass
class Oracle:
    image: int  # stat of the assembled sysupgrade file
    erase_blocks: int  # (file - marker) / 64 KiB: the file is block-padded
    margin: int  # IMAGE_SIZE - file (the size check-size compares)
    headroom: int  # bytes the rootfs file may grow with the image kept (below)
    fits: bool
    kept: bool  # the file is in the output directory (else OpenWrt deleted it)
    rootfs: int  # unsquashfs -s
    tls_xz: int  # xz -9e of each TLS file, summed


@dataclass
class Lab:
    base: Path
    store: Path
    oracle: dict[tuple[str, str], Oracle] = field(default_factory=dict)


def make(base: Path) -> Lab:
    need_tools("mksquashfs", "unsquashfs", "xz", "mkimage")
    lab = Lab(base, base / "results")
    st = FileStore(lab.store)
    for i, ((rel, flav), ksize) in enumerate(sorted(KERNEL.items())):
        out = base / rel / flav / "bin/targets/ath79/generic"
        out.mkdir(parents=True)
        tree = make_tree(
            base / rel / flav / "root", flav, seed=20 + i, packages="apk" if rel == NEW else "opkg"
        )
        rootfs = mksquashfs(tree, out / "root.squashfs")
        kernel = uimage_kernel(out / f"{AR300}-kernel.bin", ksize, seed=i)
        name = f"openwrt-{rel}-ath79-generic-{AR300}-squashfs-sysupgrade.bin"
        img = ath79_sysupgrade(kernel, rootfs, base / rel / flav / name)
        size = img.stat().st_size
        kept = size <= IMAGE_SIZE
        if kept:
            shutil.move(img, out / name)
        entry: dict[str, object] = {"type": "sysupgrade", "name": name}
        if rel == NEW:  # 25.12 lists sizes and limits; 24.10 has neither
            entry["size"] = size
            spec = {
                AR300: {
                    "images": [entry] if kept else [],
                    "file_size_limits": {"image": IMAGE_SIZE},
                }
            }
        else:
            spec = {AR300: {"images": [entry]}}
        profiles_json(out / "profiles.json", rel, "ath79/generic", spec)
        libs = {**FLAVOUR_LIBS[flav], **GLUE}
        # pad-to 64k after the kernel, pad-rootfs to 64k + marker: the image stays within
        # IMAGE_SIZE while kernel (padded) + rootfs fill at most the whole blocks below it
        whole = (IMAGE_SIZE - MARKER) // BLOCK * BLOCK
        padded_kernel = -(-kernel.stat().st_size // BLOCK) * BLOCK
        lab.oracle[(rel, flav)] = Oracle(
            image=size,
            erase_blocks=(size - MARKER) // BLOCK,
            margin=IMAGE_SIZE - size,
            headroom=whole - padded_kernel - rootfs.stat().st_size,
            fits=kept,
            kept=kept,
            rootfs=unsquashfs_size(rootfs),
            tls_xz=sum(xz9e_size((tree / p.lstrip("/")).read_bytes()) for p in libs),
        )
        (a,) = artifacts.measure_dir(out)
        st.put(
            Record(
                "build",
                f"{rel}-{flav}",
                rel,
                AR300,
                flav,
                build_data([], output=a, device=AR300, flavour=flav, release=rel),
                created=CREATED[rel],
            )
        )
    for flav, xz in FOOTPRINT.items():
        st.put(
            Record(
                "footprint",
                f"fp-{flav}",
                NEW,
                None,
                flav,
                footprint_data(flav, version="x", installed=xz * 3, xz=xz, squashfs_cost=xz + 1),
                created="2026-11-02T08:00:00Z",
            )
        )
    for flav, kb in MEMFREE.items():
        st.put(
            Record(
                "memory",
                f"mem-{flav}",
                NEW,
                AR300,
                flav,
                memory_data(kb, target="router"),
                created="2026-11-03T08:00:00Z",
            )
        )
    for flav in HANDSHAKES:
        metrics = {
            "handshakes_tls13": {"value": HANDSHAKES[flav], "unit": "1/s"},
            "heap_peak_handshake": {"value": HEAP_PEAK[flav], "unit": "B"},
        }
        st.put(
            Record(
                "perf",
                f"perf-{flav}",
                NEW,
                "malta-be",
                flav,
                {"target": "vm", "emulated": True, "metrics": metrics},
                created="2026-11-04T08:00:00Z",
            )
        )
    return lab
