"""Where builds run: the unpacked ImageBuilder or SDK (a local path, or the release archive
downloaded and unpacked into the cache), its working copies for parallel profiles, and the lock
that keeps two runs out of one tree."""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path
from typing import Any

from .. import paths
from ..catalogue import releases
from ..errors import WolfError
from ..files import outputs
from ..files.locks import locked
from ..trust import untrusted
from . import download
from . import sdk as sdk_mod
from .imagebuilder import ImageBuilder
from .jobs import Options


def obtain_tree(
    kind: str, local: Path | None, target: str, opts: Options, con: Any
) -> tuple[Path, str, str | None]:
    """An unpacked ImageBuilder or SDK ("imagebuilder"/"sdk"): the --imagebuilder/--sdk path,
    or the release's archive downloaded (mirror, sha256sums) and unpacked into the cache.
    Either must be of the request's release (include/version.mk)."""
    from .basefeed import check_release

    if local:
        top = Path(local).expanduser().resolve()
        if not top.is_dir():
            raise WolfError(f"--{kind} {top} is not a directory")
        check_release(top, f"--{kind}", releases.get(opts.release).name)
        return top, str(top), None
    top, name, sha = _downloaded(kind, target, opts, con)
    check_release(top, f"the {kind} {name}", releases.get(opts.release).name)
    return top, name, sha


def _downloaded(kind: str, target: str, opts: Options, con: Any) -> tuple[Path, str, str | None]:
    rel = releases.get(opts.release).name
    src = download.Source(opts.mirror)
    t, s = target.split("/")
    into = paths.cache_dir() / kind / rel / f"{t}-{s}"
    try:
        archive = download.resolve(kind, rel, target, src)
    except download.Unreachable as e:
        cached = download.cached_tree(into)
        if cached is None:
            raise
        con.print(
            f"note: {e.message}; building offline from the cached {cached[1]} (its sha256sums "
            "could not be refreshed)",
            markup=False,
            soft_wrap=True,
        )
        return cached
    con.print(f"{kind} {archive.name} from {src.base}")
    path = download.fetch(archive)
    return download.extract(path, into, archive.sha256), archive.name, archive.sha256


def obtain_imagebuilder(
    target: str, opts: Options, con: Any
) -> tuple[ImageBuilder, str, str | None]:
    top, name, sha = obtain_tree("imagebuilder", opts.imagebuilder, target, opts, con)
    return ImageBuilder(top), name, sha


def obtain_sdk(target: str, opts: Options, con: Any) -> tuple[sdk_mod.SDK, str, str | None]:
    top, name, sha = obtain_tree("sdk", opts.sdk, target, opts, con)
    return sdk_mod.SDK(top), name, sha


def slot_dirs(ib: ImageBuilder, n: int, *, copies_only: bool = False) -> list[Path]:
    """Working copies for parallel profiles: the tree itself plus n-1 copies (kept in the
    cache and refreshed when the source tree changes). ``copies_only``: n copies and not the
    tree, which must not collect the SDK's local packages."""
    slots = [] if copies_only else [ib.top]
    stamp_src = tree_stamp(ib.top)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", str(ib.top))[-100:]
    root = paths.cache_dir() / "slots" / (f"sdk-{name}" if copies_only else name)
    for i in range(0 if copies_only else 1, n):
        d = root / f"slot-{i}"
        stamp = d / ".openwrt-wolf-slot"
        if not (stamp.exists() and stamp.read_text() == stamp_src):
            shutil.rmtree(d, ignore_errors=True)
            tmp = d.with_name(d.name + ".copying")
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                with outputs.work(tmp):
                    shutil.copytree(ib.top, tmp, symlinks=True)
                    (tmp / ".openwrt-wolf-slot").write_text(stamp_src)
                    outputs.publish(tmp, d)
            except OSError as e:
                if e.errno == 28:
                    raise download.disk_full(tmp, e) from None
                raise
        slots.append(d)
    return slots


# what download.extract writes: "<archive name> <its sha256>\n" (the sha256 may be absent),
# the name one of data/imagebuilders.toml's
_MARK = re.compile(
    r"openwrt-(imagebuilder|sdk)-[A-Za-z0-9._+-]{1,200}\.tar\.(zst|xz)( [0-9a-f]{64})?\n"
)


def tree_stamp(top: Path) -> str:
    """What the working copies are made from: the stamp download.extract left beside a tree
    it unpacked, else the tree's path and its Makefile's time."""
    mark = top.parent / download.EXTRACTED_MARK
    try:
        # beside an --imagebuilder tree it is the user's file: a FIFO hung the build, a link
        # to /dev/zero ended in MemoryError, any other file's bytes became our stamp
        text = untrusted.read_bytes(mark, "", 512).decode()
    except (WolfError, UnicodeError):  # none, or not a small regular file: not our stamp
        text = ""
    if _MARK.fullmatch(text):
        return text
    st = (top / "Makefile").stat()
    return f"{top}:{st.st_mtime_ns}"


def tree_lock(path: Path) -> contextlib.AbstractContextManager[None]:
    """Another openwrt-wolf run must not build in the same tree at the same time."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", str(path))[-120:]
    return locked(paths.cache_dir() / "locks" / f"{name}.lock")
