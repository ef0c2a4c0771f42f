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


@task(
    help={
        "tree": "OpenWrt tree (git checkout or plain directory)",
        "check": "only check that every series applies; change nothing",
        "revert": "revert the applied series",
        "status": "list applied/unapplied patches per series",
        "patches": "patches directory (default: this project's patches/)",
    }
)
@guarded
def patch(c, tree=None, check=False, revert=False, status=False, patches=None):
    """Apply the USE_WOLFSSL patch set (patches/series and per-feed series) to an OpenWrt tree."""
    from openwrt_wolf import patch_cmd

    patch_cmd.main(tree, check=check, revert=revert, status=status, patches=patches)


@task(
    help={
        "tree": "pristine OpenWrt v25.12.5 tree (read only; a patched copy is made)",
        "targets": "comma-separated targets, or all (default ath79/generic,ramips/mt76x8,malta/be)",
        "store": "results store directory",
    }
)
@guarded
def patch_defaults(c, tree=None, targets=None, store=None):
    """Compare each profile's default packages: pristine vs. patched, USE_WOLFSSL off and on."""
    from openwrt_wolf import patch_cmd

    if patch_cmd.defaults_main(tree, targets, store):
        raise SystemExit(1)


@task(
    help={
        "lib": "a built libwolfssl.so (e.g. the footprint lab's minimal build)",
        "store": "results store directory",
    }
)
@guarded
def wolfssl_symbols(c, lib=None, store=None):
    """Does libwolfssl.so export every wolfSSL symbol the USE_WOLFSSL packages import?"""
    from openwrt_wolf import patch_cmd

    if patch_cmd.symbols_main(lib, store):
        raise SystemExit(1)


@task(
    help={
        "wolfssl": "a configured wolfSSL source tree (wolfssl/options.h of the minimal config)",
        "ustream": "openwrt/ustream-ssl sources",
        "hostap": "hostap sources (the commit OpenWrt builds)",
        "openwrt": "an OpenWrt tree (px5g-wolfssl, uencrypt)",
        "libubox": "a directory holding libubox/*.h",
        "write": "replace the symbol lists in data/wolfssl_consumers.toml",
    }
)
@guarded
def wolfssl_consumers(
    c, wolfssl=None, ustream=None, hostap=None, openwrt=None, libubox=None, write=False
):
    """Re-derive the wolfSSL symbols each USE_WOLFSSL package imports, from its sources."""
    from openwrt_wolf import patch_cmd

    patch_cmd.consumers_main(
        wolfssl, ustream=ustream, hostap=hostap, openwrt=openwrt, libubox=libubox, write=write
    )


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
    c.run(f"{sys.executable} -m ruff check openwrt_wolf tests tasks.py bench")
    c.run(f"{sys.executable} -m ruff format --check openwrt_wolf tests tasks.py bench")
    c.run(f"{sys.executable} -m mypy openwrt_wolf")
