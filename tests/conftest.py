"""Shared fixtures. Tests that need a host tool skip on a developer's machine without it, but
fail under CI=true: nothing real is silently skipped in CI."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that need the stand-in kit (a cold build of 10-25 min on 2 cores) after the
    others: xdist hands the largest xdist_group first (the build matrix, which builds the kit),
    then the tests in this order, so the other worker runs the rest of the suite meanwhile
    instead of waiting on the kit's lock (20 min of a cold run's 66 before)."""
    items.sort(key=lambda i: "standin_kit" in getattr(i, "fixturenames", ()))


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
    start, cpu = time.monotonic(), _cpu()
    yield
    took = time.monotonic() - start
    say(f"ready: {what.split(' (')[0]} ({took:.0f} s)")
    clock = os.environ.get("WOLF_SUITE_CLOCK")  # bench/suite_times.py reads these lines
    if clock:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        row = {"prepared": what.split(" (")[0], "wall": took, "cpu": _cpu() - cpu, "worker": worker}
        with (Path(clock) / f"{worker}.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")


def _cpu() -> float:
    """CPU seconds of this process and the children it waited for (getrusage)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run_shared(factory: pytest.TempPathFactory) -> Path:
    """A directory every pytest-xdist worker of this test run has in common (their base temps'
    parent, new for each run); without xdist, the run's own base temp."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]) -> Path:
    """run_shared()/name, filled by make(dir) once per test run: the first worker to ask makes
    it under a lock, the others wait for it and reuse it (a session fixture is otherwise made
    again by each worker). A make that fails marks nothing done: the next asker starts anew."""
    from openwrt_wolf.files.locks import locked

    top = run_shared(factory) / name
    with locked(top.parent / f"{name}.lock"):
        if not (top / ".done").is_file():
            shutil.rmtree(top, ignore_errors=True)
            top.mkdir(parents=True)
            make(top)
            (top / ".done").write_text("")
    return top


def private_copy(shared: Path, into: Path) -> Path:
    """A worker's own copy of a made_once directory, for tests that build in it (a build
    writes into its ImageBuilder tree; another worker's must not be seen there)."""
    shutil.copytree(shared, into, symlinks=True, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".done"))  # fmt: skip
    return into


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


def upstream_source(name: str) -> Path:
    """A pinned upstream tree (data/upstream.toml) through the project's fetcher: a mirror
    directory, the cache, or a download, verified. Skipped only when neither a mirror nor the
    network has it (a failure under CI=true); a file that fails verification is a failure."""
    from openwrt_wolf.host import upstream

    try:
        return upstream.source_dir(name)
    except upstream.Unavailable as e:
        missing = str(e)
    unavailable(missing)  # outside the except block: one line, no chained traceback
    raise AssertionError("unreachable: unavailable() skips or fails")


def userland_sources() -> None:
    """The pinned sources OpenWrt's userland (json-c, libubox, ustream-ssl, uclient, uhttpd,
    px5g from the tree) builds from, fetched before a build needs them: a missing one skips
    the test (fails in CI) with its one line instead of failing the build."""
    from openwrt_wolf.footprint import userland

    for name in userland.COMPONENTS:
        upstream_source(name)
    _openwrt_tree(userland.release())


def free_port() -> int:
    """A local TCP port nothing listens on (for a server to take, or refused connections)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def offline_upstream(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    """The upstream fetcher with no mirror and no network: no mirror directory or URL, a
    private cache, and every pin's public URL on a closed local port (its path kept)."""
    import dataclasses

    from openwrt_wolf.host import upstream

    base = f"http://127.0.0.1:{free_port()}"
    offline = {
        n: dataclasses.replace(p, urls=tuple(base + "/" + u.split("/", 3)[3] for u in p.urls))
        for n, p in upstream.pins().items()
    }
    monkeypatch.setattr(upstream, "pins", lambda: offline)
    monkeypatch.setenv(upstream.SHARED_ENV, str(cache / "no-shared"))
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(cache))
    for var in (upstream.SOURCES_ENV, upstream.SOURCES_URL_ENV):
        monkeypatch.delenv(var, raising=False)
    for var in [v for v in os.environ if v.startswith(upstream.TREE_ENV)]:
        monkeypatch.delenv(var)


def _openwrt_tree(release: str) -> Path:
    from openwrt_wolf.host import upstream

    try:
        return upstream.openwrt_tree(release)
    except upstream.Unavailable as e:
        missing = str(e)
    unavailable(missing)
    raise AssertionError("unreachable: unavailable() skips or fails")


@pytest.fixture(scope="session")
def openwrt_tree_25125() -> Path:
    """OpenWrt v25.12.5 (read-only: copy before changing it): $OPENWRT_TREE, else the pinned
    tree through the fetcher (upstream_source)."""
    return _openwrt_tree("25.12.5")


@pytest.fixture(scope="session")
def openwrt_tree_24108() -> Path:
    """OpenWrt v24.10.8, as openwrt_tree_25125 ($OPENWRT_TREE_24_10_8 instead of $OPENWRT_TREE)."""
    return _openwrt_tree("24.10.8")


@pytest.fixture(scope="session")
def openwrt_tools(openwrt_tree_25125: Path) -> OpenWrtTools:
    """OpenWrt's host image tools (mksquashfs4, padjffs2, fwtool, firmware-utils) built once
    from the pinned upstream sources into the cache, as `invoke openwrt-tools` builds them."""
    from openwrt_wolf.host import hosttools
    from openwrt_wolf.host import openwrt_tools as ot

    need_tools(*(t.name for t in hosttools.tools_for("openwrt-tools")))
    for name in ot.SNAPSHOTS:
        upstream_source(name)
    return ot.ensure()


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
    from openwrt_wolf.files.locks import locked
    from tests.standin import kit

    need_tools(*KIT_TOOLS)
    userland_sources()
    upstream_source("apk-tools")
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


MIRROR_TARGETS = ("ath79/generic", "ramips/mt76x8")
MIRROR_TOOLS = ("make", "mksquashfs", "unsquashfs", "mkimage", "zstd")


@pytest.fixture(scope="session")
def standin_mirror(
    tmp_path_factory: pytest.TempPathFactory,
    openwrt_tree_25125: Path,
    openwrt_tools: OpenWrtTools,
    standin_kit: Kit,
) -> Path:
    """The 25.12.5 stand-in download server for ath79/generic and ramips/mt76x8
    (make_standin.make_server: the ImageBuilders and SDKs packed, with their trees in .trees),
    assembled once per test run for every worker (tests/build, tests/queue, the what-if lab,
    the stand-in buildroot). Read it or copy it (private_copy): never build in it."""
    from tests.standin import make_standin

    need_tools(*MIRROR_TOOLS)

    def make(top: Path) -> None:
        with preparing("the stand-in ImageBuilder mirror for ath79/generic and ramips/mt76x8"):
            make_standin.make_server(top, MIRROR_TARGETS, tree=openwrt_tree_25125,
                                     tools=openwrt_tools, kit=standin_kit)  # fmt: skip

    return made_once(tmp_path_factory, "standin-mirror-25.12.5", make)


@pytest.fixture(scope="session")
def standin_mirror_2410(
    tmp_path_factory: pytest.TempPathFactory, openwrt_tree_24108: Path, openwrt_tools: OpenWrtTools
) -> Path:
    """The 24.10.8 (opkg) stand-in download server for ath79/generic, once per test run
    (tests/build/test_build_2410.py, the what-if lab's 24.10 builds). Read or copy it."""
    from tests.standin import make_standin

    need_tools(*MIRROR_TOOLS, "gcc")

    def make(top: Path) -> None:
        with preparing("the stand-in 24.10.8 ImageBuilder (opkg) from the v24.10.8 tree, ~40 s"):
            make_standin.make_server(top, ("ath79/generic",), "24.10.8", tree=openwrt_tree_24108,
                                     tools=openwrt_tools)  # fmt: skip

    return made_once(tmp_path_factory, "standin-mirror-24.10.8", make)


def standin_ib(mirror: Path, target: str, release: str = "25.12.5") -> Path:
    """The stand-in ImageBuilder tree of a make_server mirror (its .trees)."""
    t, s = target.split("/")
    return mirror / ".trees" / f"openwrt-imagebuilder-{release}-{t}-{s}.Linux-x86_64"
