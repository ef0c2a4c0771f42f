#!/usr/bin/env python3
"""Bench: bad inputs per task family, run as a user would (`invoke TASK ...` in a fresh
process). After each family it prints how many ended in a Python traceback (goal 0), in no
one-line `error:` (goal 0), ran into the per-run time limit (goal 0), how many broke security
(goal 0: make code ran, a secret or a foreign file's bytes were printed, an injection survived
into a report) or gave a wrong result (goal 0), and what was left behind: partial files
(*.part, *.tmp, *.unpacking, *.copying) in the cache, store and output directories, and
processes still running that were started by the runs (found by a marker in their
environment). The hostile-input families (issue 20) are generated in bench/hostile.py and,
with a victim directory, data-loss and leftover oracles, in bench/hostile_fs.py (crafted
packages through what-if, special inputs, --output targets, signals).

    .venv/bin/python bench/bad_inputs.py [--family build,fit] [--timeout 90] [--lab DIR]

Needs no network and no OpenWrt download: the inputs fail before any would start. The
families of bench/hostile_fs.py run what-if on a stand-in ImageBuilder build made from
../shared/openwrt ($OPENWRT_WOLF_SHARED) in a few minutes, or kept in --lab DIR."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ kits
import hostile
import hostile_bombs
import hostile_env
import hostile_fs
import hostile_git
import hostile_http
import hostile_links
import hostile_patches
import hostile_readers
from hostile import Probe

ROOT = Path(__file__).resolve().parent.parent
MARK = f"OPENWRT_WOLF_BENCH_{uuid.uuid4().hex[:12]}"
PARTIAL = (".part", ".tmp", ".unpacking", ".copying")


@dataclass
class Family:
    name: str
    runs: list[list[str]] | list[Probe]
    tracebacks: int = 0
    no_error_line: int = 0
    hung: int = 0
    security: int = 0
    wrong: int = 0
    data_loss: int = 0
    left: int = 0
    examples: list[str] = field(default_factory=list)


def _vm_files(w: Path) -> tuple[Path, Path]:
    """A MIPS ELF header the VM tasks accept, and a gzip stream of 1.1 GiB of zeros (1 MiB)."""
    import zlib

    elf, bomb = w / "malta.elf", w / "bomb.img.gz"
    if not elf.exists():
        hdr = bytearray(52)
        hdr[:7] = b"\x7fELF\x01\x02\x01"
        hdr[16:20] = (2).to_bytes(2, "big") + (8).to_bytes(2, "big")
        elf.write_bytes(bytes(hdr))
    if not bomb.exists():
        z, block = zlib.compressobj(9, zlib.DEFLATED, 31), bytes(16 << 20)
        with bomb.open("wb") as fh:
            for _ in range(70):
                fh.write(z.compress(block))
            fh.write(z.flush())
    return elf, bomb


def families(w: Path) -> list[Family]:
    """Bad inputs. ``w`` holds the prepared bad files."""
    dev, fifo, big, empty, rnd = "/dev/zero", w / "fifo", w / "big.bin", w / "empty", w / "rnd"
    d, hung = w / "dir", w / "hung-ib"
    kh, store = w / "known_hosts", w / "badstore"
    bad_store = ["--store", str(store)]
    elf, bomb = _vm_files(w)
    b = ["build", "--no-report"]
    return [
        Family(
            "build",
            [
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "-j", "abc"],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "-j", "0"],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "-j", "-3"],
                [*b, "-f", "nosuch", "-d", "tl-wr902ac"],
                [*b, "-f", "mbedtls", "-d", "nosuch"],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--release", "0.1"],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--backend", "nosuch"],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--imagebuilder", "/nonexistent"],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--imagebuilder", dev],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--imagebuilder", str(d)],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--imagebuilder", str(hung)],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--mirror", "http://127.0.0.1:9"],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--mirror", "/nonexistent"],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--mirror", str(d)],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--tree", "/nonexistent"],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--sdk", str(fifo)],
                [*b, "-f", "mbedtls", "-d", "tl-wr902ac", "--tree", str(d), "--mirror", str(d)],
                # the sdk backend with a tree as its base feed
                *(
                    [*b, "-f", "wolfssl", "-d", "tl-wr902ac", "--backend", "sdk", "--tree", t]
                    for t in (dev, str(fifo), str(d), "/nonexistent")
                ),
                [
                    *b,
                    "-f",
                    "wolfssl",
                    "-d",
                    "tl-wr902ac",
                    "--backend",
                    "imagebuilder",
                    "--tree",
                    str(d),
                ],
                # a feed path that would end scripts/feeds' shell quoting
                [
                    "build-config",
                    "-f",
                    "wolfssl",
                    "-d",
                    "tl-wr902ac",
                    "--what",
                    "feeds",
                    "--feed",
                    f"{d}';touch {w}/quoted;'",
                ],
                [*b, "-d", "tl-wr902ac"],
                [*b, "-f", "mbedtls"],
                [*b, "-f", "mbedtls", "-d", "malta-be"],
            ],
        ),
        Family(
            "size-report",
            [
                ["size-report", "--packages", "abc"],
                ["size-report", "--packages", "-1"],
                ["size-report", "--format", "nosuch"],
                ["size-report", "--output", str(d)],
                ["size-report", "--output", "/nonexistent/dir/report.md"],
                ["size-report", "--release", "0.1"],
                ["size-report", "--device", "nosuch", *bad_store],
                ["size-report", "--flavour", "nosuch", *bad_store],
                ["size-report", "--from", "/nonexistent"],
                ["size-report", "--from", dev],
                ["size-report", "--from", str(fifo)],
                ["size-report", "--from", str(empty)],
                ["size-report", "--from", str(d)],
                ["size-report", "--from", str(rnd)],
                ["size-report", "--store", str(empty)],
                ["size-report", "--store", dev],
                ["size-report", *bad_store],
                ["size-report", *bad_store, "--format", "csv"],
                ["size-report", *bad_store, "--format", "json", "--output", str(d / "x" / "y")],
                ["size-report", "--from", "nosuch=" + str(d)],
            ],
        ),
        Family(
            "fit",
            [
                ["fit", "--device", "tl-wr902ac", "--image", dev],
                ["fit", "--device", "tl-wr902ac", "--image", str(fifo)],
                ["fit", "--device", "tl-wr902ac", "--image", str(big)],
                ["fit", "--device", "tl-wr902ac", "--image", str(d)],
                ["fit", "--device", "tl-wr902ac", "--image", str(empty)],
                ["fit", "--device", "tl-wr902ac", "--image", str(rnd)],
                ["fit", "--device", "tl-wr902ac", "--image", "/nonexistent"],
                ["fit", "--device", "tl-wr902ac", "--kernel", dev, "--rootfs", str(fifo)],
                ["fit", "--device", "tl-wr902ac", "--kernel", str(rnd), "--rootfs", str(rnd)],
                ["fit", "--device", "tl-wr902ac", "--kernel", str(empty), "--rootfs", str(empty)],
                ["fit", "--device", "tl-wr902ac", "--kernel", str(rnd)],
                ["fit", "--device", "tl-wr902ac"],
                ["fit", "--image", str(rnd)],
                ["fit", "--device", "nosuch", "--image", str(rnd)],
                ["fit", "--device", "malta-be", "--image", str(rnd)],
                ["fit", "--device", "tl-wr902ac", "--release", "0.1", "--image", str(rnd)],
                ["fit", "--device", "tl-wr902ac", "--image", str(rnd), "--kernel", str(rnd)],
                ["fit", "--device", "glinet_gl-ar300m16", "--image", str(big)],
                ["fit", "--device", "tl-wr902ac-v3", "--image", str(fifo), "--json"],
                ["fit", "--device", "", "--image", str(rnd)],
            ],
        ),
        Family(
            "what-if",
            [
                ["what-if", "--image", dev, "--flavour", "wolfssl", "--packages", str(d)],
                ["what-if", "--image", str(fifo), "--flavour", "wolfssl", "--packages", str(d)],
                ["what-if", "--image", str(big), "--flavour", "wolfssl", "--packages", str(d)],
                ["what-if", "--image", str(rnd), "--flavour", "wolfssl", "--packages", str(d)],
                ["what-if", "--image", str(empty), "--flavour", "openssl", "--packages", str(d)],
                ["what-if", "--from", "/nonexistent", "--flavour", "wolfssl"],
                ["what-if", "--from", str(d), "--flavour", "gnutls"],
                ["what-if", "--from", str(d), "--image", str(rnd), "--flavour", "wolfssl"],
                ["what-if", "--image", str(rnd), "--flavour", "wolfssl", "--packages", dev],
                ["what-if", "--image", str(rnd)],
                # several directories (an ImageBuilder's and a mirror's feeds)
                ["what-if", "--image", str(rnd), "--flavour", "wolfssl", "--packages", ","],
                *(
                    [
                        "what-if",
                        "--image",
                        str(rnd),
                        "--flavour",
                        "wolfssl",
                        "--packages",
                        f"{d},{o}",
                    ]
                    for o in (fifo, dev, "/nonexistent")
                ),
            ],
        ),
        Family(
            "flash",
            [
                ["flash", "--device", "tl-wr902ac", "--host", "x", "--port", "abc"],
                ["flash", "--device", "tl-wr902ac", "--host", "x", "--port", "0"],
                ["flash", "--device", "tl-wr902ac", "--host", "x", "--wait-up", "nan"],
                ["flash", "--device", "tl-wr902ac", "--host", "x", "--wait-up", "abc"],
                ["flash", "--device", "tl-wr902ac"],
                ["flash", "--host", "127.0.0.1"],
                ["flash", "--device", "nosuch", "--host", "127.0.0.1"],
                ["flash", "--device", "tl-wr902ac", "--host", "127.0.0.1"],
                ["flash", "--device", "tl-wr902ac", "--host", "127.0.0.1", "--image", dev],
                ["flash", "--device", "tl-wr902ac", "--host", "127.0.0.1", "--image", str(fifo)],
                ["flash", "--device", "tl-wr902ac", "--host", "127.0.0.1", "--image", str(big)],
                ["flash", "--device", "tl-wr902ac", "--host", "127.0.0.1", "--image", str(rnd)],
                [
                    "flash",
                    "--device",
                    "tl-wr902ac",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "9",
                    "--image",
                    str(rnd),
                    "--known-hosts",
                    str(kh),
                ],
                [
                    "flash",
                    "--device",
                    "tl-wr902ac",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "9",
                    "--image",
                    str(rnd),
                    "--known-hosts",
                    str(d),
                ],
                [
                    "flash",
                    "--device",
                    "tl-wr902ac",
                    "--host",
                    "127.0.0.1",
                    "--key",
                    "/nonexistent",
                    "--image",
                    str(rnd),
                ],
                ["flash", "--device", "tl-wr902ac", "--host", "127.0.0.1", "--flavour", "nosuch"],
                [
                    "flash",
                    "--device",
                    "tl-wr902ac",
                    "--host",
                    "127.0.0.1",
                    "--flavour",
                    "wolfssl",
                    *bad_store,
                ],
                ["flash", "--device", "malta-be", "--host", "127.0.0.1", "--image", str(rnd)],
                ["flash", "--device", "tl-wr902ac", "--host", "", "--image", str(rnd)],
                [
                    "flash",
                    "--device",
                    "tl-wr902ac",
                    "--host",
                    "127.0.0.1",
                    "--key",
                    "k",
                    "--password",
                    "--image",
                    str(rnd),
                ],
            ],
        ),
        Family(
            "measure-memory",
            [
                ["measure-memory", "--boots", "abc"],
                ["measure-memory", "--boots", "0"],
                ["measure-memory", "--boots", "-2"],
                ["measure-memory", "--idle", "nan"],
                ["measure-memory", "--idle", "inf"],
                ["measure-memory", "--idle", "-1"],
                ["measure-memory", "--idle", "abc"],
                ["measure-memory", "--memory", "abc"],
                ["measure-memory", "--image", dev],
                ["measure-memory", "--image", str(fifo)],
                ["measure-memory", "--image", "/nonexistent"],
                ["measure-memory", "--image", str(rnd)],
                ["measure-memory", "--host", ""],
                ["measure-memory", "--host", "127.0.0.1", "--port", "abc"],
                ["measure-memory", "--host", "127.0.0.1", "--image", str(rnd)],
                ["measure-memory", "--device", "nosuch", "--flavour", "mbedtls"],
                ["measure-memory", "--device", "malta-be", "--flavour", "nosuch"],
                ["measure-memory", "--key", "/nonexistent"],
                ["measure-memory", "--host", "127.0.0.1", "--wait-up", "inf"],
                ["measure-memory"],
            ],
        ),
        Family(
            "other tasks",
            [
                ["hosttools", "--group", "nosuch"],
                ["devices", "--release", "0.1"],
                ["devices", "--tree", "/nonexistent"],
                ["devices", "--tree", str(fifo)],
                ["patch"],
                ["patch", "--tree", "/nonexistent"],
                ["patch", "--tree", str(d), "--patches", str(fifo)],
                ["patch-defaults", "--tree", str(empty)],
                ["wolfssl-symbols"],
                ["wolfssl-symbols", "--lib", dev],
                ["wolfssl-symbols", "--lib", str(fifo)],
                ["wolfssl-symbols", "--lib", str(rnd)],
                ["footprint", "--arch", "mips_99kc"],
                ["footprint", "--library", "nosuch"],
                ["footprint", "--config", "nosuch"],
                ["footprint", "--version", "wolfssl=abc"],
                ["build-config", "--flavour", "wolfssl", "--device", "tl-wr902ac", "--what", "x"],
                ["build-config", "--flavour", "nosuch", "--device", "tl-wr902ac"],
                ["vm", "--image", dev],
                ["vm", "--image", str(fifo)],
            ],
        ),
        Family(
            "vm disks",  # a rootfs image the task copies into a disk of its own (private_disk)
            [
                ["measure-memory", "--image", str(elf), "--rootfs", str(fifo)],
                ["measure-memory", "--image", str(elf), "--rootfs", dev],
                ["measure-memory", "--image", str(elf), "--rootfs", str(d)],
                ["measure-memory", "--image", str(elf), "--rootfs", str(empty)],
                ["measure-memory", "--image", str(elf), "--rootfs", str(bomb)],
                ["measure-memory", "--image", str(elf), "--root", "disk"],
                ["measure-memory", "--image", str(elf), "--root", "flash"],
                ["vm", "--image", str(elf), "--rootfs", str(bomb)],
                ["vm", "--image", str(elf), "--rootfs", str(fifo)],
            ],
        ),
        Family("wifi image", _wifi_image(w, elf, bomb)),
        Family("arm64", _arm64(w, rnd, fifo, big)),
        Family("fetch origins", _fetch_origins(w)),
    ]


def _fetch_origins(w: Path) -> list[list[str]]:
    """Issue 33's one fetcher (files/fetch.py) behind `build --mirror DIR`: a mirror whose
    sha256sums names the ImageBuilder but whose archive there is a FIFO, /dev/zero, a
    directory, a link out of the mirror to a secret, or other bytes. Never read for ever,
    never copied into the cache: one line each."""
    ib = "openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64.tar.zst"
    secret = w / "fetch-secret"
    secret.write_text("not for the cache\n")
    out = []
    for kind in ("fifo", "zero", "dir", "link-out", "other-bytes"):
        top = w / f"mirror-{kind}"
        tdir = top / "releases" / "25.12.5" / "targets" / "ath79" / "generic"
        if not tdir.is_dir():
            tdir.mkdir(parents=True)
            (tdir / "sha256sums").write_text(f"{'0' * 64} *{ib}\n")
            a = tdir / ib
            if kind == "fifo":
                os.mkfifo(a)
            elif kind == "zero":
                a.symlink_to("/dev/zero")
            elif kind == "dir":
                a.mkdir()
            elif kind == "link-out":
                a.symlink_to(secret)
            else:
                a.write_bytes(os.urandom(4096))
        out.append(["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--mirror",
                    str(top)])  # fmt: skip
    return out


def _arm64(w: Path, rnd: Path, fifo: Path, big: Path) -> list[list[str]]:
    """Issue 34's inputs: the Pi 5's and armsr's partitions, an arm64 Image header over
    garbage (QEMU's virt machine starts it; nothing reaches the console: one line when the
    booting state times out), the AArch64 lab's options."""
    image = w / "arm64.img"
    if not image.exists():
        head = bytearray(os.urandom(4096))
        head[0x38:0x3C] = b"ARMd"
        image.write_bytes(bytes(head))
    armsr = w / "armsr-out"  # an armsr output directory whose disk image and rootfs piece are
    if not armsr.exists():  # a FIFO and /dev/zero (the fit reads both since 9f5e9ae)
        armsr.mkdir()
        pre = "openwrt-armsr-armv8-generic"
        os.mkfifo(armsr / f"{pre}-squashfs-combined-efi.img.gz")
        (armsr / f"{pre}-squashfs-rootfs.img.gz").symlink_to("/dev/zero")
        imgs = [{"type": "combined-efi", "filesystem": "squashfs", "sha256": "0" * 64,
                 "name": f"{pre}-squashfs-combined-efi.img.gz"},
                {"type": "rootfs", "filesystem": "squashfs", "sha256": "0" * 64,
                 "name": f"{pre}-squashfs-rootfs.img.gz"}]  # fmt: skip
        (armsr / "profiles.json").write_text(json.dumps({
            "metadata_version": 1, "target": "armsr/armv8", "version_code": "r0",
            "version_number": "25.12.5", "source_date_epoch": 1,
            "profiles": {"generic": {"image_prefix": pre, "images": imgs}}}))  # fmt: skip
    return [
        ["fit", "--device", "rpi-5", "--image", str(rnd)],
        ["fit", "--device", "rpi-5", "--kernel", str(rnd), "--rootfs", str(rnd)],
        ["fit", "--device", "armsr-armv8", "--kernel", str(big), "--rootfs", str(fifo)],
        ["measure-memory", "--device", "rpi-5", "--flavour", "mbedtls"],
        ["measure-memory", "--device", "armsr-armv8", "--flavour", "mbedtls"],
        ["measure-memory", "--image", str(image), "--boots", "1", "--idle", "1"],
        ["vm", "--image", str(image), "--rootfs", str(fifo)],
        ["perf", "--target", "qemu", "--arch", "../../etc"],
        ["perf", "--target", "qemu", "--arch", "aarch64_cortex-a76", "--cpu-crypto", "$(id)"],
        ["perf", "--target", "router", "--host", "127.0.0.1", "--arch", "aarch64_cortex-a76"],
        ["perf", "--target", "qemu", "--cpu-crypto", "off"],
        ["devices", "--tree", str(fifo), "--target", "armsr,bcm27xx"],
        ["perf", "--target", "vm", "--test", "instructions", "--image", str(image)],
        ["perf", "--target", "router", "--host", "127.0.0.1", "--test", "instructions"],
        ["perf", "--target", "qemu", "--test", "instructions,$(id)"],
        ["patch", "--tree", str(fifo), "--check"],
        ["size-report", "--from", f"wolfssl={armsr}"],
    ]


def _wifi_image(w: Path, elf: Path, bomb: Path) -> list[list[str]]:
    """`perf --test wifi|memory --rootfs`: a package directory and a wpad build of special
    files (a FIFO index, 20,001 files, a FIFO, /dev/zero and a 4 GiB sparse file as
    hostapd_cli), a FIFO rootfs, a gzip bomb or /dev/zero as the kernel, each refused in one
    line before any boot; nothing read whole, nothing waited on."""
    top = w / "wifi"
    pk = {n: top / n for n in ("fifo-index", "many", "ok", "wpad-fifo", "wpad-dev", "wpad-big")}
    if not top.exists():
        for d in pk.values():
            d.mkdir(parents=True)
        os.mkfifo(pk["fifo-index"] / "packages.adb")
        for i in range(20001):
            (pk["many"] / f"p{i}.apk").touch()
        (pk["many"] / "packages.adb").write_bytes(b"ADB")
        (pk["ok"] / "packages.adb").write_bytes(b"ADB")
        (pk["ok"] / "wpad-basic-wolfssl-2025.08.26~ca266cc2-r1.apk").write_bytes(b"apk")
        for name in ("wpad-fifo", "wpad-dev", "wpad-big"):
            (pk[name] / "hostapd").mkdir()
        os.mkfifo(pk["wpad-fifo"] / "hostapd" / "hostapd_cli")
        (pk["wpad-dev"] / "hostapd" / "hostapd_cli").symlink_to("/dev/zero")
        with (pk["wpad-big"] / "hostapd" / "hostapd_cli").open("wb") as fh:
            fh.truncate(4 << 30)
        (top / "toolchain" / "bin").mkdir(parents=True)  # passes --toolchain's check (a *-gcc)
        (top / "toolchain" / "bin" / "mips-openwrt-linux-musl-gcc").touch()
    base = ["perf", "--target", "vm", "--test", "wifi", "--flavour", "wolfssl", "--image",
            str(elf), "--toolchain", str(top / "toolchain")]  # fmt: skip
    ok = ["--packages", str(pk["ok"])]
    mem = ["perf", "--target", "vm", "--test", "memory", "--flavour", "mbedtls", "--toolchain",
           str(top / "toolchain")]  # fmt: skip
    return [
        [*base, "--rootfs", str(w / "fifo"), *ok],
        [*base, "--rootfs", "/dev/zero", *ok],
        [*base, "--rootfs", str(bomb), "--packages", str(w / "fifo")],
        [*base, "--rootfs", str(bomb), "--packages", str(pk["fifo-index"])],
        [*base, "--rootfs", str(bomb), "--packages", str(pk["many"])],
        [*base, "--rootfs", str(bomb), *ok, "--wpad-build", str(pk["wpad-fifo"])],
        [*base, "--rootfs", str(bomb), *ok, "--wpad-build", str(pk["wpad-dev"])],
        [*base, "--rootfs", str(bomb), *ok, "--wpad-build", str(pk["wpad-big"])],
        [*base, "--rootfs", str(bomb), *ok, "--wpad-build", "/dev/zero"],
        # the Memory test in a real image takes the same --image/--rootfs
        [*mem, "--image", str(elf), "--rootfs", str(w / "fifo")],
        [*mem, "--image", str(bomb), "--rootfs", str(bomb)],
        [*mem, "--image", "/dev/zero", "--rootfs", str(bomb)],
    ]


def hostile_families(w: Path) -> list[Family]:
    """Issue 20's families (bench/hostile.py); the store and the secret come from prepare()."""
    secret = (w / "secret").read_text().strip()
    redis_url = os.environ.get("OPENWRT_WOLF_BENCH_REDIS")
    return [
        Family("records", hostile.records_family(w)),
        Family("image records", hostile.records_family(w, 72, hostile.IMAGE_FIELDS, "img")),
        Family("build job records", hostile.records_family(w, 84, hostile.JOB_FIELDS, "job")),
        Family("store files", hostile.store_files_family(w)),
        Family("profiles.json", hostile.profiles_family(w, w / "secret", secret)),
        Family("baselines", hostile.baselines_family(w, hostile._store_with(w, "base", {}))),
        Family("make values", hostile.make_values_family(w)),
        Family("report escaping", hostile.report_injection_family(w)),
        Family("secrets", hostile.secrets_family(secret, redis_url)),
        Family("refused", hostile.refused_family()),
        Family("sources --tree", hostile.sources_tree_family(w)),
        Family("patches", hostile_patches.family(w)),
        Family("image readers", hostile_readers.images_family(w)),
        Family("tree readers", hostile_readers.trees_family(w)),
        Family("git repositories", hostile_git.family(w)),
        *(Family(name, probes) for name, probes in hostile_links.families(w)),
        Family("archive bombs", hostile_bombs.family(w)),
        Family("HTTP mirror", hostile_http.family(w)),
    ]


def prepare(w: Path) -> None:
    os.mkfifo(w / "fifo")
    with (w / "big.bin").open("wb") as fh:
        fh.truncate(4 << 30)  # sparse
    (w / "empty").write_bytes(b"")
    (w / "rnd").write_bytes(os.urandom(1 << 20))
    (w / "dir").mkdir()
    (w / "hung-ib").mkdir()
    (w / "hung-ib" / "Makefile").write_text("info:\n\tsleep 3600\n")
    (w / "known_hosts").write_bytes(os.urandom(2048))
    bad = w / "badstore"
    (bad / "build").mkdir(parents=True)
    (bad / "build" / "list.json").write_text("[1, 2]")
    (bad / "build" / "nulldata.json").write_text(
        json.dumps(
            {
                "kind": "build",
                "key": "nulldata",
                "release": "25.12.5",
                "device": None,
                "flavour": None,
                "data": None,
                "created": None,
                "schema_version": 1,
            }
        )
    )
    (bad / "build" / "dir.json").mkdir()
    os.mkfifo(bad / "build" / "fifo.json")
    (bad / "build" / "bytes.json").write_bytes(b"\xff\xfe\x00")
    (w / "secret").write_text(f"SECRET-{uuid.uuid4().hex}\n")  # a file no output may show
    (w / "sentinels").mkdir()


def finding_of(probe: Probe, p: subprocess.CompletedProcess[str]) -> hostile.Finding | None:
    """The security and correctness oracles of a probe, after the run."""
    if probe.sentinel is not None and probe.sentinel.exists():
        return "security", f"make/shell code from the input ran (created {probe.sentinel})"
    for s in probe.secrets:
        if s in p.stdout or s in p.stderr:
            return "security", "a secret was printed"
    if probe.hostile:
        got = hostile.raw_controls(p)
        if got:
            return got
    return probe.check(p) if probe.check else None


def marked_processes() -> list[str]:
    """Processes whose environment carries this bench's marker: started by our runs."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if MARK.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                out.append(f"{pid} {Path(f'/proc/{pid}/comm').read_text().strip()}")
    return out


def partial_files(*dirs: Path) -> list[str]:
    return sorted(
        str(p) for d in dirs if d.exists() for p in d.rglob("*") if p.name.endswith(PARTIAL)
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", help="comma-separated family names (default all)")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds per run")
    ap.add_argument("--lab", help="keep the stand-in ImageBuilder build here (made if missing)")
    args = ap.parse_args()
    total_tb = total_left = total_hung = total_sec = total_wrong = total_loss = 0
    with tempfile.TemporaryDirectory(prefix="wolf-bad-") as tmp:
        w = Path(tmp)
        prepare(w)
        cache, st = w / "cache", w / "store"
        env = {
            **os.environ,
            MARK: "1",
            "OPENWRT_WOLF_CACHE": str(cache),
            "OPENWRT_WOLF_STORE": str(st),
            "OPENWRT_WOLF_TIMEOUT_INFO": "3",
        }
        env.pop("OPENWRT_WOLF_ROUTER_PASSWORD", None)
        wanted = set(args.family.split(",")) if args.family else None
        queue = contextlib.ExitStack()
        if (not wanted or "secrets" in wanted) and shutil.which("redis-server"):
            from tests.queue import redisd

            (w / "redis").mkdir()
            r = queue.enter_context(redisd.running(w / "redis"))
            os.environ["OPENWRT_WOLF_BENCH_REDIS"] = r.url(0)
        fams = [*families(w), *hostile_families(w)]
        if not wanted or wanted & set(hostile_fs.FAMILIES):
            made = hostile_fs.families(w, Path(args.lab) if args.lab else w / "lab")
            fams += [Family(name, probes) for name, probes in made]
        if not wanted or wanted & set(hostile_env.FAMILIES):
            made = hostile_env.families(w, Path(args.lab) if args.lab else w / "lab", env, wanted)
            fams += [Family(name, probes) for name, probes in made]
        for fam in fams:
            if wanted and fam.name not in wanted:
                continue
            t0 = time.monotonic()
            for run in fam.runs:
                probe = run if isinstance(run, Probe) else Probe(list(run), hostile=False)
                _one(fam, probe, {**env, **probe.env}, args.timeout)
            time.sleep(1)  # let any stray child show itself before counting
            procs = marked_processes()
            files = partial_files(cache, st, w / "dir")
            total_tb += fam.tracebacks
            total_hung += fam.hung
            total_sec += fam.security
            total_wrong += fam.wrong
            total_loss += fam.data_loss
            total_left += len(procs) + len(files) + fam.left
            print(
                f"{fam.name:16} {len(fam.runs)} inputs: {fam.tracebacks} tracebacks, "
                f"{fam.no_error_line} without an error line, {fam.hung} hung, "
                f"{fam.security} security, {fam.wrong} wrong results, {fam.data_loss} data "
                f"loss; leftovers: {len(files)} partial files, {fam.left} run directories, "
                f"{len(procs)} processes ({time.monotonic() - t0:.0f} s)",
                flush=True,
            )
            for ex in fam.examples + files + procs:
                print(f"    {ex}", flush=True)
        queue.close()
        hostile.chmod_back(w)
    print(
        f"total: {total_tb} tracebacks, {total_hung} hung, {total_sec} security, "
        f"{total_wrong} wrong results, {total_loss} data loss, {total_left} leftovers"
    )
    return (
        0 if total_tb + total_hung + total_sec + total_wrong + total_loss + total_left == 0 else 1
    )


def _one(fam: Family, probe: Probe, env: dict[str, str], timeout: float) -> None:
    """One run and its oracles, counted into fam."""
    if probe.setup is not None:
        probe.setup()
    p, sent = hostile_fs.run(probe, [*probe.prefix, sys.executable, "-m", "invoke", *probe.argv],
                             env, timeout)  # fmt: skip
    findings: list[hostile.Finding] = []
    if p is None:
        fam.hung += 1
        fam.examples.append(f"HUNG: {probe.text}")
    elif "Traceback" in p.stderr:
        fam.tracebacks += 1
        fam.examples.append(f"TRACEBACK: {probe.text}: {p.stderr.strip().splitlines()[-1]!r}")
    elif sent == signal.SIGTERM and p.returncode == 0:
        findings.append(("wrong", "SIGTERM while it ran, and exit status 0"))
    elif (
        p.returncode not in (0, 1)
        and not sent  # ended by the signal sent (before our handler, or SIGKILL)
        and not any(ln.startswith("error:") for ln in p.stderr.splitlines())
    ):
        fam.no_error_line += 1
        fam.examples.append(f"NO ERROR LINE (rc {p.returncode}): {probe.text}")
    if p is not None and (finding := finding_of(probe, p)):
        findings.append(finding)
    if probe.after is not None and (finding := probe.after()):
        findings.append(finding)
    for kind, text in findings:
        fam.security += kind == "security"
        fam.wrong += kind == "wrong"
        fam.data_loss += kind == "data loss"
        fam.left += kind == "leftover"
        fam.examples.append(f"{kind.upper()}: {probe.text}: {text}")


if __name__ == "__main__":
    raise SystemExit(main())
