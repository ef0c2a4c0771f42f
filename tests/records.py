"""Whole records for tests that need a store: built through the record's own model
(openwrt_wolf/results/), so a fixture cannot drift from what the writers store. The values
are the test's own (its oracle), never a figure the code under test computed."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from openwrt_wolf.results.artifacts import Artifacts
from openwrt_wolf.results.build import Artifact, BuildRecord, BuildRequest
from openwrt_wolf.results.footprint import XZ_SETTINGS, Footprint
from openwrt_wolf.results.memory import MemoryResult, Spread


def memory_data(
    memfree_kb: float,
    *,
    memavailable_kb: float | None = None,
    memtotal_kb: int = 57344,
    target: str = "vm",
    root: str | None = None,
    spread: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """A memory record's data (measure-memory's MemoryResult) with these medians."""
    lo, hi = spread or (round(memfree_kb), round(memfree_kb))
    summary = {
        "MemFree": Spread(memfree_kb, lo, hi),
        "MemTotal": Spread(memtotal_kb, memtotal_kb, memtotal_kb),
    }
    if memavailable_kb is not None:
        a = round(memavailable_kb)
        summary["MemAvailable"] = Spread(memavailable_kb, a, a)
    router = target == "router"
    return asdict(
        MemoryResult(
            memfree_kb=memfree_kb,
            memavailable_kb=memavailable_kb,
            memtotal_kb=memtotal_kb,
            qemu_memory_mb=None if router else 64,
            boots=3,
            settle="10 s idle",
            idle_s=10.0,
            image=None if router else "openwrt-malta-be-vmlinux-initramfs.elf",
            image_sha256=None if router else "0" * 64,
            rootfs=None,
            arch=None if router else "mips",
            kernel_release="6.12.94",
            openwrt_release="25.12.5",
            qemu=None if router else "qemu-system-mips",
            summary=summary,
            target=target,
            root=root if root or router else "initramfs",
        )
    )


def footprint_data(
    library: str,
    *,
    xz: int,
    installed: int,
    squashfs_cost: int,
    version: str = "5.9.2",
    config: str = "openwrt",
    arch: str = "mips_24kc",
    ecc: str | None = None,
) -> dict[str, Any]:
    """A footprint record's data (the footprint lab's Footprint) with these sizes."""
    return asdict(
        Footprint(
            library=library,
            title=library,
            version=version,
            release="25.12.5",
            arch=arch,
            config=config,
            config_title=config,
            ecc=ecc,
            toolchain="mips-linux-gnu 12.2.0",
            float_abi="soft",
            source_file=f"{library}-{version}.tar.gz",
            source_sha256="0" * 64,
            options=[],
            cflags=["-Os"],
            ldflags=[],
            files=[],
            installed=installed,
            xz=xz,
            xz_settings=XZ_SETTINGS,
            squashfs_cost=squashfs_cost,
            squashfs_block=262144,
            text=installed,
            data=0,
            bss=0,
            build_seconds=1.0,
            cache_key="0" * 16,
            commands=[],
            log="",
        )
    )


def build_data(
    files: list[dict[str, Any]],
    fit: dict[str, Any] | None = None,
    *,
    output: Artifacts | None = None,
    device: str,
    flavour: str = "mbedtls",
    release: str = "25.12.5",
    manifest: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A build record's data (results/build.py BuildRecord) listing these files: with
    ``output`` (the measured Artifacts) a version 2 record as a build writes it now; with
    ``fit`` (a whole FitReport dict, or one written before rootfs_room) a version 1 record as
    an older store holds it (the file list and the fit, no output)."""
    request = BuildRequest(release, "ath79/generic", device, flavour, (), "none", "imagebuilder")
    placeholder = Artifacts(profile=device, source="", layout="")
    d = asdict(
        BuildRecord(
            request=request,
            key=request.key(),
            backend="imagebuilder",
            release=release,
            release_commit="",
            device=device,
            flavour=flavour,
            builder="openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64.tar.zst",
            builder_sha256=None,
            packages_value="",
            library_versions={},
            manifest=manifest or {},
            commands=[],
            phases={},
            make_seconds=0.0,
            log="",
            artifacts=[Artifact(**f) for f in files],
            output=output or placeholder,
            openwrt_warnings=[],
            image_deleted=not any(f["type"] == "sysupgrade" for f in files),
        )
    )
    if output is not None:
        d["output"] = output.to_dict()
        return d
    assert fit is not None, "a version 1 record has a fit"
    del d["output"], d["version"]
    return {**d, "fit": fit}


def openwrt_sha256(sums: Path, name: str) -> str:
    """What OpenWrt's own sha256sums (lines `<digest> *<file>`) of a committed run says of a
    file: the records of real images are checked against it."""
    for line in sums.read_text().splitlines():
        digest, _, file = line.partition(" *")
        if file == name:
            return digest
    raise AssertionError(f"{name} not in {sums}")
