"""Shared fixtures. Tests that need a host tool skip on a developer's machine without it, but
fail under CI=true: nothing real is silently skipped in CI."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from openwrt_wolf.host.openwrt_tools import OpenWrtTools
    from tests.standin.kit import Kit

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
_config: pytest.Config | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _config
    _config = config


@contextlib.contextmanager
def preparing(what: str) -> Iterator[None]:
    """Say on the terminal what a long fixture prepares, past pytest's capture (also in
    pytest-xdist workers, whose stderr is the terminal's), so a cold run is never silent."""
    cap = _config.pluginmanager.getplugin("capturemanager") if _config else None

    def say(line: str) -> None:
        with cap.global_and_fixture_disabled() if cap else contextlib.nullcontext():
            sys.stderr.write(f"\n{line}\n")
            sys.stderr.flush()

    say(f"preparing: {what}")
    start = time.monotonic()
    yield
    say(f"ready: {what.split(' (')[0]} ({time.monotonic() - start:.0f} s)")


def need_tools(*names: str) -> None:
    """Skip (or, in CI, fail) unless every named command or file is present."""
    absent = [n for n in names if not (os.path.exists(n) if n.startswith("/") else shutil.which(n))]
    if not absent:
        return
    unavailable(f"needs host tools: {', '.join(absent)} (./wolf hosttools --install)")


def unavailable(msg: str) -> None:
    """Something a test needs is not here: skip on a developer's machine, fail in CI."""
    if IN_CI:
        pytest.fail(f"CI=true and {msg}", pytrace=False)
    pytest.skip(msg)


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "results"


def _openwrt_tree(release: str) -> Path:
    from openwrt_wolf.errors import WolfError
    from openwrt_wolf.host import upstream

    try:
        return upstream.openwrt_tree(release)
    except WolfError as e:
        unavailable(f"needs an OpenWrt {release} tree: {e}")
        raise  # unreachable: unavailable() skips or fails


@pytest.fixture(scope="session")
def openwrt_tree_25125() -> Path:
    """OpenWrt v25.12.5 (read-only: copy before changing it): $OPENWRT_TREE, else the shared
    snapshot extracted into the cache; skipped without either, a failure under CI=true."""
    return _openwrt_tree("25.12.5")


@pytest.fixture(scope="session")
def openwrt_tree_24108() -> Path:
    """OpenWrt v24.10.8, as openwrt_tree_25125 ($OPENWRT_TREE_24_10_8 instead of $OPENWRT_TREE)."""
    return _openwrt_tree("24.10.8")


@pytest.fixture(scope="session")
def openwrt_tools(openwrt_tree_25125: Path) -> OpenWrtTools:
    """OpenWrt's host image tools (mksquashfs4, padjffs2, fwtool, firmware-utils) built once
    from the shared upstream snapshots into the cache, as `invoke host-tools` builds them."""
    from openwrt_wolf.errors import WolfError
    from openwrt_wolf.host import hosttools
    from openwrt_wolf.host import openwrt_tools as ot

    need_tools(*(t.name for t in hosttools.tools_for("openwrt-tools")))
    try:
        return ot.ensure()
    except WolfError as e:  # the upstream snapshots are not on this machine
        unavailable(f"needs OpenWrt's host tools: {e}")
        raise  # unreachable: unavailable() skips or fails


# what the 25.12 stand-ins are made with (tests/standin/kit.py): apk-tools for the host (meson),
# the TLS packages' MIPS builds (the footprint lab and userland: cross gcc, cmake, autotools)
KIT_TOOLS = ("meson", "ninja", "pkg-config", "openssl", "patch", "cmake", "autoreconf",
             "libtoolize", "perl", "make", "gcc", "mips-linux-gnu-gcc", "mips-linux-gnu-strip",
             "/usr/include/openssl/evp.h", "/usr/mips-linux-gnu/include/stdio.h", "fakeroot",
             "gawk")  # fmt: skip


@pytest.fixture(scope="session")
def standin_kit(tmp_path_factory: pytest.TempPathFactory, openwrt_tree_25125: Path) -> Kit:
    """apk-tools 3.0.5 (host), the test's signing key and the TLS packages' payloads (the
    footprint lab's MIPS builds): built once per machine (cached), shared by the xdist workers."""
    from openwrt_wolf.errors import WolfError
    from openwrt_wolf.locks import locked
    from tests.standin import kit

    need_tools(*KIT_TOOLS)
    top = tmp_path_factory.getbasetemp().parent / "standin-kit"
    top.mkdir(exist_ok=True)
    with (
        locked(top / ".lock"),
        preparing(
            "apk-tools and the TLS packages' MIPS builds for the 25.12 stand-in (cold: 10-25 min "
            "on 2 cores, shared with tests/footprint; cached afterwards)"
        ),
    ):
        try:
            return kit.make_kit(top)
        except WolfError as e:
            unavailable(f"the stand-in kit: {e}")
            raise
