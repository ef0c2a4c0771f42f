"""OpenWrt's own host image tools, built once from the upstream sources at hand.

OpenWrt makes its images with tools it builds for the host (tools/ in the tree, installed
in $(STAGING_DIR_HOST)/bin). We build the same ones from ../shared/openwrt (host/upstream.py)
at the commits OpenWrt 25.12.5 pins, the way its tools/*/Makefile build them:

- firmware-utils (tools/firmware-utils): the whole CMake project, -O2 as HOST_CFLAGS;
- squashfs-tools 4.7.4 (tools/squashfs4): the tree's patches applied, then
  `make LZ4_SUPPORT=0 LZO_SUPPORT=0 ZSTD_SUPPORT=0 GZIP_SUPPORT=1 XZ_SUPPORT=1
  LZMA_XZ_SUPPORT=1 XZ_EXTENDED_OPTIONS=1 mksquashfs unsquashfs`, installed as mksquashfs4
  and unsquashfs4 (only this build accepts `-Xpreset 9 -Xe -Xlc 0 -Xlp 2 -Xpb 2`);
- padjffs2 from the tree's tools/padjffs2/src (its own Makefile);
- fwtool (package/system/fwtool builds it for the host with CMake).

OpenWrt's `lzma` (tools/lzma, LZMA SDK 4.65) is downloaded from OpenWrt's mirror and is
not at hand, so it is not built here (docs/build.md says what stands in for it).

The result is cached in $OPENWRT_WOLF_CACHE/openwrt-tools/<key>/bin, keyed by the sources,
built under a lock in a temporary directory and renamed into place, so parallel test
workers and helpers build it once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import WolfError
from ..files import locks, outputs
from ..paths import cache_dir
from . import hosttools, upstream

RELEASE = "25.12.5"  # the tree whose tools/ Makefiles, patches and padjffs2 we build
# bump when the build commands below change, so cached builds are redone
_RECIPE = "1"
# squashfs4's Host/Compile options (tools/squashfs4/Makefile)
SQUASHFS_OPTIONS = (
    "LZ4_SUPPORT=0",
    "LZO_SUPPORT=0",
    "ZSTD_SUPPORT=0",
    "GZIP_SUPPORT=1",
    "XZ_SUPPORT=1",
    "LZMA_XZ_SUPPORT=1",
    "XZ_EXTENDED_OPTIONS=1",
)
HOST_CFLAGS = "-O2"  # include/host-build.mk's HOST_CFLAGS, without the staging include dir
_BUILD_TIMEOUT = 1800.0
SNAPSHOTS = ("firmware-utils", "squashfs-tools", "fwtool")  # data/upstream.toml
# the tools OpenWrt's image recipes of the catalogued devices run (include/image*.mk)
IMAGE_TOOLS = ("mksquashfs4", "unsquashfs4", "padjffs2", "fwtool", "tplink-safeloader",
               "mktplinkfw", "mktplinkfw2")  # fmt: skip


@dataclass(frozen=True)
class OpenWrtTools:
    """OpenWrt's host tools: bin_dir plays $(STAGING_DIR_HOST)/bin."""

    bin_dir: Path
    sources: tuple[str, ...]  # the upstream snapshots (name@commit) and the tree's tools/

    def tool(self, name: str) -> Path:
        path = self.bin_dir / name
        if not path.is_file():
            raise WolfError(
                f"OpenWrt host tool {name} is not in {self.bin_dir}",
                hint=f"tools there: {', '.join(self.names())}",
            )
        return path

    def names(self) -> list[str]:
        return sorted(p.name for p in self.bin_dir.iterdir() if p.is_file() and p.name[0] != ".")

    @property
    def mksquashfs4(self) -> Path:
        return self.tool("mksquashfs4")

    @property
    def unsquashfs4(self) -> Path:
        return self.tool("unsquashfs4")

    @property
    def padjffs2(self) -> Path:
        return self.tool("padjffs2")

    @property
    def fwtool(self) -> Path:
        return self.tool("fwtool")

    @property
    def tplink_safeloader(self) -> Path:
        return self.tool("tplink-safeloader")

    @property
    def mktplinkfw(self) -> Path:
        return self.tool("mktplinkfw")

    @property
    def mktplinkfw2(self) -> Path:
        return self.tool("mktplinkfw2")


@dataclass(frozen=True)
class _Sources:
    firmware_utils: Path
    squashfs_tools: Path
    fwtool: Path
    tree: Path

    def squashfs_patches(self) -> list[Path]:
        return sorted((self.tree / "tools/squashfs4/patches").glob("*.patch"))

    def padjffs2(self) -> Path:
        return self.tree / "tools/padjffs2/src"

    def key(self) -> str:
        """The cache key: the upstream snapshots (by sha256) and the tree's own inputs."""
        h = hashlib.sha256(_RECIPE.encode())
        for name in SNAPSHOTS:
            h.update(upstream.pin(name).sha256.encode() + b"\0")
        for f in [*self.squashfs_patches(), *sorted(self.padjffs2().iterdir())]:
            h.update(f.name.encode() + b"\0" + f.read_bytes())
        return h.hexdigest()[:16]


def _sources() -> _Sources:
    tree = upstream.openwrt_tree(RELEASE)
    src = _Sources(
        upstream.source_dir("firmware-utils"),
        upstream.source_dir("squashfs-tools"),
        upstream.source_dir("fwtool"),
        tree,
    )
    if not src.padjffs2().is_dir() or not (tree / "tools/squashfs4").is_dir():
        raise WolfError(
            f"{tree} has no tools/padjffs2/src or tools/squashfs4",
            hint=f"point $OPENWRT_TREE at an OpenWrt {RELEASE} tree",
        )
    return src


def _jobs() -> str:
    return str(max(1, min(4, os.cpu_count() or 1)))


def _cmake(src: Path, build: Path, log: Path) -> Path:
    proc.run(
        ["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=None",
         f"-DCMAKE_C_FLAGS={HOST_CFLAGS}"],
        timeout=_BUILD_TIMEOUT, logfile=log,
    )  # fmt: skip
    proc.run(["cmake", "--build", build, "-j", _jobs()], timeout=_BUILD_TIMEOUT, logfile=log)
    return build


def _install(files: list[Path], bin_dir: Path, rename: dict[str, str] | None = None) -> None:
    for f in files:
        dest = bin_dir / (rename or {}).get(f.name, f.name)
        shutil.copy2(f, dest)


def _executables(build: Path) -> list[Path]:
    return sorted(
        p for p in build.iterdir() if p.is_file() and os.access(p, os.X_OK) and "." not in p.name
    )


def _build_all(src: _Sources, work: Path, step: Callable[[str], None]) -> Path:
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True)
    log = work / "build.log"
    step("firmware-utils")
    _install(_executables(_cmake(src.firmware_utils, work / "firmware-utils", log)), bin_dir)
    step("squashfs-tools 4.7.4 (mksquashfs4, unsquashfs4)")
    sq = work / "squashfs-tools"
    shutil.copytree(src.squashfs_tools, sq, symlinks=True)
    for patch in src.squashfs_patches():
        proc.run(["patch", "-p1", "-i", patch], cwd=sq, timeout=120, logfile=log)
    proc.run(
        ["make", "-j", _jobs(), "-C", sq / "squashfs-tools", *SQUASHFS_OPTIONS,
         f"EXTRA_CFLAGS={HOST_CFLAGS}", "mksquashfs", "unsquashfs"],
        timeout=_BUILD_TIMEOUT, logfile=log,
    )  # fmt: skip
    _install(
        [sq / "squashfs-tools/mksquashfs", sq / "squashfs-tools/unsquashfs"],
        bin_dir,
        {"mksquashfs": "mksquashfs4", "unsquashfs": "unsquashfs4"},
    )
    step("padjffs2")
    pj = work / "padjffs2"
    shutil.copytree(src.padjffs2(), pj)
    proc.run(["make", "-C", pj], timeout=_BUILD_TIMEOUT, logfile=log)
    _install([pj / "padjffs2"], bin_dir)
    step("fwtool")
    _install([_cmake(src.fwtool, work / "fwtool", log) / "fwtool"], bin_dir)
    return bin_dir


def ensure(progress: Callable[[str], None] | None = None) -> OpenWrtTools:
    """OpenWrt's host image tools, built on first use (about 30 s of CPU) and cached."""
    src = _sources()
    names = (
        *(f"{n}@{upstream.pin(n).commit[:12]}" for n in SNAPSHOTS),
        f"{src.tree} (tools/padjffs2, tools/squashfs4/patches)",
    )
    top = cache_dir() / "openwrt-tools"
    dest = top / src.key()
    done = dest / "bin" / ".complete"
    if done.is_file():
        return OpenWrtTools(dest / "bin", names)
    hosttools.ensure("openwrt-tools")
    with locks.locked(top / f"{src.key()}.lock"):
        if done.is_file():  # another process built it while we waited
            return OpenWrtTools(dest / "bin", names)
        top.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=top, prefix=".build-") as tmp:
            work = Path(tmp)
            # a failing step raises CommandError with its output's tail and the log
            bin_dir = _build_all(src, work, progress or (lambda _s: None))
            (bin_dir / ".complete").write_text("\n".join(names) + "\n")
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir()
            outputs.publish(work / "bin", dest / "bin")
            outputs.publish(work / "build.log", dest / "build.log")
    return OpenWrtTools(dest / "bin", names)
