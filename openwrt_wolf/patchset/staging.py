"""The tree's side of the patch engine: a series' files found in the tree without following a
link, copied to a staging directory where git applies the series, and put back.

- A path (a plain path, patchset/diff.py) is looked up part by part with lstat from the
  series' directory: a symbolic link on the way, a file where a directory belongs, or a FIFO,
  socket, device or directory where a file belongs is one error line before anything is read
  or written, so nothing outside that directory is reached through a link of the tree's.
- A file is copied as its bytes (at most MAX_FILE) and mode; a symbolic link as a link with
  the same target, never followed: a link to /etc/shadow stays a link, its target unread.
- Putting back checks every path first, then writes each changed file as a new file renamed
  over the old one and each link as a new link renamed over it (outputs.py), and unlinks what
  the series deleted: nothing is written through a link or outside the series' directory.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from ..errors import WolfError
from ..files import outputs
from ..trust import untrusted
from .diff import tree_path

MAX_FILE = 64 << 20  # a file a patch changes: OpenWrt's Makefiles, scripts and configs are kB


def lstat(path: Path, where: str) -> os.stat_result | None:
    """lstat of path, None when it is not there, an error line else."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise WolfError(f"{where}: {untrusted.os_reason(e)}") from None


def _walk(root: Path, rel: str, where: str, *, dirs: bool = False) -> os.stat_result | None:
    """lstat of root/rel, every part before the last (with ``dirs`` the last too) a directory
    and no link, else an error line naming it; None when a part is not there."""
    parts = rel.split("/")
    here = root
    for i, part in enumerate(parts):
        here = here / part
        st = lstat(here, f"{where}: {rel}")
        last = i == len(parts) - 1
        if st is None or (last and not dirs):
            return st
        on_way = "/".join(parts[: i + 1])
        if stat.S_ISLNK(st.st_mode):
            path = f"{rel}: {on_way}" if rel != on_way else on_way
            raise WolfError(
                f"{where}: {path} is a symbolic link; the patch engine does not write "
                "through links",
                hint="make it a directory of the tree (a src-link feed: patch its own checkout)",
            )
        if not stat.S_ISDIR(st.st_mode):
            raise WolfError(f"{where}: {rel}: {on_way} is {untrusted.kind_of(st.st_mode)}, "
                            "not a directory")  # fmt: skip
        if last:
            return st
    return None  # not reached: split gives one part at least


def entry(root: Path, rel: str, where: str) -> os.stat_result | None:
    """lstat of ``rel`` below root, no link and nothing but directories on the way; None when
    it is not there. A regular file or a symbolic link; anything else is WolfError."""
    st = _walk(root, tree_path(rel, where), where)
    if st is None or stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
        return st
    raise WolfError(f"{where}: {rel} is {untrusted.kind_of(st.st_mode)} in the tree, "
                    "not a file", hint="a patch changes regular files")  # fmt: skip


def series_root(tree: Path, subdir: str) -> Path | None:
    """The directory a series applies to (the tree, or a feed's directory under it), None when
    it is not there; a link or a file on the way or there is WolfError."""
    if not subdir:
        return tree
    return None if _walk(tree, subdir, str(tree), dirs=True) is None else tree / subdir


def _read(path: Path, where: str) -> bytes:
    return untrusted.read_bytes(path, where, MAX_FILE, holds="a file a patch changes holds")


def _link_digest(target: str) -> str:
    return "symlink:" + hashlib.sha256(os.fsencode(target)).hexdigest()


def digest(root: Path, rel: str, where: str) -> str | None:
    """sha256 of a file's bytes, "symlink:" + sha256 of a link's target; None when absent."""
    st = entry(root, rel, where)
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        return _link_digest(os.readlink(root / rel))
    return hashlib.sha256(_read(root / rel, f"{where}: file")).hexdigest()


def copy_out(root: Path, files: list[str], stage: Path, where: str, *, links: bool = True) -> None:
    """The series' files as they are in the tree, into the empty directory stage. ``links``
    False: a link is refused (quilt's diff would follow it)."""
    for rel in files:
        st = entry(root, rel, where)
        if st is None:
            continue
        dst = stage / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if stat.S_ISLNK(st.st_mode):
            if not links:
                raise WolfError(f"{where}: {rel} is a symbolic link in the tree",
                                hint="--refresh diffs regular files only")  # fmt: skip
            os.symlink(os.readlink(root / rel), dst)
        else:
            dst.write_bytes(_read(root / rel, f"{where}: file"))
            dst.chmod(stat.S_IMODE(st.st_mode) & 0o777)


def install(stage: Path, root: Path, files: list[str], where: str) -> dict[str, str]:
    """The staged result into the tree; the digest of every file the series leaves there."""
    plan: list[tuple[str, os.stat_result | None, os.stat_result | None]] = []
    for rel in files:  # every path checked before the first write
        was = entry(root, rel, where)
        try:
            now: os.stat_result | None = os.lstat(stage / rel)
        except FileNotFoundError:
            now = None
        if now is not None and not (stat.S_ISREG(now.st_mode) or stat.S_ISLNK(now.st_mode)):
            raise WolfError(f"{where}: {rel} became {untrusted.kind_of(now.st_mode)}")
        plan.append((rel, was, now))
    hashes: dict[str, str] = {}
    for rel, was, now in plan:
        dst = root / rel
        if now is None:
            if was is not None:
                os.unlink(dst)  # the entry itself: a link goes, its target stays
                _prune_empty(dst.parent, root)  # a revert leaves no directory a patch created
            continue
        if stat.S_ISLNK(now.st_mode):
            target = os.readlink(stage / rel)
            hashes[rel] = _link_digest(target)
            if was is None or not stat.S_ISLNK(was.st_mode) or os.readlink(dst) != target:
                outputs.replace_link(dst, target)
            continue
        data = (stage / rel).read_bytes()  # written by git in our own directory
        mode = stat.S_IMODE(now.st_mode) & 0o777
        hashes[rel] = hashlib.sha256(data).hexdigest()
        same = (
            was is not None
            and stat.S_ISREG(was.st_mode)
            and stat.S_IMODE(was.st_mode) & 0o777 == mode
            and digest(root, rel, where) == hashes[rel]
        )
        if not same:
            outputs.replace_bytes(dst, data, mode=mode)
    return hashes


def _prune_empty(d: Path, root: Path) -> None:
    while d != root and d.is_relative_to(root):
        try:
            if not stat.S_ISDIR(os.lstat(d).st_mode) or any(d.iterdir()):
                return
            d.rmdir()
        except OSError:
            return
        d = d.parent
