"""openwrt-wolf tasks. Thin by design: parse arguments, call openwrt_wolf, print.
Run through ./wolf (it prepares .venv), e.g. `./wolf size-report`, `./wolf test`."""

from __future__ import annotations

import os
import sys

from invoke import task

from openwrt_wolf.cli import guarded

# --- catalogue -------------------------------------------------------------------------


@task(help={"release": "OpenWrt release (25.12.5, 24.10.8, snapshot)"})
@guarded
def devices(c, release=None, tree=None, write=False):
    """List the device catalogue; with --tree, read devices from an OpenWrt tree."""
    from openwrt_wolf import devices_cmd

    devices_cmd.main(release=release, tree=tree, write=write)


@task
@guarded
def hosttools(c, group="test", install=False):
    """List the host tools a job needs and their Debian packages; --install installs them."""
    from openwrt_wolf import hosttools as ht

    for t in ht.tools_for(group):
        print(f"{'ok     ' if t.present() else 'MISSING'} {t.name:24} {t.package:24} {t.why}")
    if install:
        ht.ensure(group)


# --- size report (issue 2) -------------------------------------------------------------


# --- build (issue 3) -------------------------------------------------------------------


# --- patch set (issue 4) ---------------------------------------------------------------


# --- VM and memory (issue 5) -----------------------------------------------------------


@task(
    help={
        "image": "malta kernel ELF, e.g. openwrt-malta-be-vmlinux-initramfs.elf",
        "ssh": "boot to the ssh state and print the ssh line (image needs dropbear)",
        "rootfs": "a rootfs image (.img or .img.gz) attached as /dev/sda",
        "initrd": "an initramfs for a kernel without a built-in one",
        "append": "kernel command line (OpenWrt's kernels need none)",
        "memory": "guest RAM in MB (default 128)",
    }
)
@guarded
def vm(c, image, ssh=False, rootfs=None, initrd=None, append=None, memory=0):
    """Boot a malta image in QEMU with its serial console on this terminal (Ctrl-] quits)."""
    from pathlib import Path

    from openwrt_wolf import memory as mem
    from openwrt_wolf.vm.interactive import session, write_out
    from openwrt_wolf.vm.machine import VM

    spec = mem.spec_for(
        Path(image),
        memory_mb=int(memory),
        rootfs=Path(rootfs) if rootfs else None,
        initrd=Path(initrd) if initrd else None,
        append=append,
    )
    with VM(spec, echo=write_out) as machine:
        session(machine, ssh=ssh)


@task(
    help={
        "device": "malta-be or malta-le (image from the newest build record)",
        "flavour": "TLS flavour of that build: mbedtls, wolfssl, openssl",
        "image": "a malta kernel ELF to measure instead of a build",
        "release": "OpenWrt release of the build record",
        "boots": "number of boots (default 3)",
        "idle": "seconds idle after boot before reading memory (default 10)",
        "memory": "guest RAM in MB (default 128)",
        "rootfs": "a rootfs image attached as /dev/sda",
        "initrd": "an initramfs for a kernel without a built-in one",
        "append": "kernel command line",
        "store": "results store directory",
    }
)
@guarded
def measure_memory(
    c, device=None, flavour=None, image=None, release=None, boots=3, idle=10.0, memory=0,
    rootfs=None, initrd=None, append=None, store=None,
):  # fmt: skip
    """Boot a malta image N times and record free memory at idle (kind "memory")."""
    from openwrt_wolf import memory_cmd

    memory_cmd.main(
        device=device, flavour=flavour, image=image, release=release, boots=int(boots),
        idle=float(idle), memory=int(memory), rootfs=rootfs, initrd=initrd, append=append,
        store=store,
    )  # fmt: skip


# --- router (issue 6) ------------------------------------------------------------------


# --- footprint lab (issue 7) -----------------------------------------------------------


# --- development -----------------------------------------------------------------------


@task(help={"k": "only tests matching this expression", "serial": "no pytest-xdist"})
@guarded
def test(c, k=None, serial=False):
    """Run the test suite (installs the host tools it needs on first use)."""
    from openwrt_wolf import hosttools as ht

    ht.ensure("test")
    args = [sys.executable, "-m", "pytest", "-q"]
    if not serial:
        args += ["-n", "auto"]
    if k:
        args += ["-k", k]
    os.execv(sys.executable, args)


@task
def lint(c):
    """ruff (lint + format check) and mypy over openwrt_wolf."""
    c.run(f"{sys.executable} -m ruff check openwrt_wolf tests tasks.py bench")
    c.run(f"{sys.executable} -m ruff format --check openwrt_wolf tests tasks.py bench")
    c.run(f"{sys.executable} -m mypy openwrt_wolf")
