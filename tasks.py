"""openwrt-wolf tasks. Thin by design: parse arguments, call openwrt_wolf, print.
Run through ./wolf (it prepares .venv), e.g. `./wolf size-report`, `./wolf test`."""

from __future__ import annotations

import os
import sys

from invoke import task

from openwrt_wolf.cli import guarded

# --- catalogue -------------------------------------------------------------------------


@task(
    help={
        "release": "OpenWrt release (25.12.5, 24.10.8, snapshot)",
        "tree": "an OpenWrt source tree to read devices from",
        "device": "with --tree: only these profiles (comma list, globs, catalogue aliases)",
        "target": "with --tree: targets to read (comma list, or all; default: the catalogue's)",
        "write": "with --tree: update data/devices.toml entries of the release from the tree",
    }
)
@guarded
def devices(c, release=None, tree=None, write=False, device=None, target=None):
    """List the device catalogue; with --tree, read devices from an OpenWrt tree."""
    from openwrt_wolf import devices_cmd

    devices_cmd.main(release=release, tree=tree, write=write, device=device, target=target)


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


@task(
    help={
        "device": "device profile or alias, e.g. tl-wr902ac",
        "image": "a sysupgrade image to split and check",
        "kernel": "the kernel OpenWrt appended (with --rootfs; works for deleted images)",
        "rootfs": "the squashfs root filesystem (with --kernel)",
        "release": "OpenWrt release (default: the stable one)",
        "check": "exit 1 when the image is too big",
        "json": "print the fit report as JSON instead of a table",
    }
)
@guarded
def fit(c, device, image=None, kernel=None, rootfs=None, release=None, check=False, json=False):
    """Does an image (or its kernel + rootfs) fit the device's flash? Exact bytes."""
    from openwrt_wolf import fit_cmd

    fit_cmd.main(
        device=device,
        image=image,
        kernel=kernel,
        rootfs=rootfs,
        release=release,
        check=check,
        as_json=json,
    )


# --- build (issue 3) -------------------------------------------------------------------


# --- patch set (issue 4) ---------------------------------------------------------------


# --- VM and memory (issue 5) -----------------------------------------------------------


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
    paths = " ".join(p for p in ("openwrt_wolf", "tests", "tasks.py", "bench") if os.path.exists(p))
    c.run(f"{sys.executable} -m ruff check {paths}")
    c.run(f"{sys.executable} -m ruff format --check {paths}")
    c.run(f"{sys.executable} -m mypy openwrt_wolf")
