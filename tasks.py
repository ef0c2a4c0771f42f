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


# --- router (issue 6) ------------------------------------------------------------------


# --- footprint lab (issue 7) -----------------------------------------------------------


@task(
    help={
        "arch": "OpenWrt package architecture (data/footprint/arch.toml), default mips_24kc",
        "release": "OpenWrt release whose versions and options to build: 25.12.5 or snapshot",
        "library": "mbedtls,wolfssl,openssl or all (default all)",
        "config": "openwrt (package defaults), minimal (USE_WOLFSSL wolfSSL), small (OpenSSL), all",
        "ecc": "wolfSSL minimal ECC code: sp-p256 (default), generic, or all",
        "toolchain": "an OpenWrt SDK/toolchain directory or a *-gcc (default: Debian's cross gcc)",
        "smoke": "run a smoke program per library under qemu-user",
        "sources": "directories holding source tarballs (comma-separated)",
        "mirror": "base URLs of OpenWrt source mirrors to try (comma-separated)",
        "rebuild": "ignore cached builds",
        "markdown": "print the table as Markdown",
        "store": "results store directory",
        "version": "override a release's library version, e.g. wolfssl=5.9.2 (25.12.5's 5.9.1 "
        "is not in Debian)",
    }
)
@guarded
def footprint(c, arch="mips_24kc", release=None, library=None, config=None, ecc=None,
              toolchain=None, smoke=False, sources=None, mirror=None, rebuild=False,
              markdown=False, store=None, version=None):  # fmt: skip
    """Cross-build the TLS libraries at OpenWrt's settings and compare their flash cost."""
    from openwrt_wolf.footprint import cli

    cli.main(arch=arch, release=release, library=library, config=config, ecc=ecc,
             toolchain=toolchain, smoke=smoke, sources=sources, mirror=mirror, rebuild=rebuild,
             markdown=markdown, store=store, version=version)  # fmt: skip


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
