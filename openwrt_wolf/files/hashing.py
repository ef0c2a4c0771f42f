"""File digests: images and downloads are checked by sha256, read in 1 MiB pieces; a
directory (a build's FILES= overlay) by one sha256 of what it holds."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

from ..errors import WolfError


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


# A directory as it is (a build's FILES= overlay): what the ImageBuilder copies into the
# rootfs with `cp -fpR`, which follows no link and opens no FIFO or device.
MAX_TREE_BYTES = 1 << 30  # no router's flash holds a GiB; a 20 GB sparse file is refused
MAX_TREE_ENTRIES = 100_000
_KINDS = ((stat.S_ISDIR, "d"), (stat.S_ISREG, "f"), (stat.S_ISLNK, "l"), (stat.S_ISCHR, "c"),
          (stat.S_ISBLK, "b"), (stat.S_ISFIFO, "p"), (stat.S_ISSOCK, "s"))  # fmt: skip


Entry = Callable[[str, os.stat_result, str | None], None]


def dir_sha256(top: Path, what: str, check: Entry | None = None) -> str:
    """One sha256 for the tree below ``top``, nothing followed or opened but regular files:
    per entry, sorted by its path's bytes, ``<kind> <mode> <digest> <path>`` — kind d, f,
    l, c, b, p or s; digest the sha256 of a file's content or of a link's target, a device's
    numbers, else ``-``. A link out of the tree is its target's text; a FIFO is never read.
    ``check(path below top, lstat, link target or None)`` sees every entry first."""
    lines: list[bytes] = []
    total = 0

    def refuse(e: OSError) -> NoReturn:
        raise WolfError(f"{what} {e.filename}: {e.strerror}") from None

    for p in _walk(str(top), refuse):
        rel = os.fsencode(os.path.relpath(p, top))
        try:
            st = os.lstat(p)
            kind = next(k for test, k in _KINDS if test(st.st_mode))
            target = os.readlink(p) if kind == "l" else None
            if check is not None:
                check(os.fsdecode(rel), st, target)
            if kind == "f":
                total += st.st_size
                if total > MAX_TREE_BYTES:
                    raise WolfError(f"{what} {top}: more than {MAX_TREE_BYTES >> 30} GiB of "
                                    "files, more than a router's flash holds")  # fmt: skip
                digest = _regular_sha256(p)
            elif target is not None:
                digest = hashlib.sha256(os.fsencode(target)).hexdigest()
            elif kind in "cb":
                digest = f"{os.major(st.st_rdev)},{os.minor(st.st_rdev)}"
            else:
                digest = "-"
        except OSError as e:
            refuse(e)
        lines.append(f"{kind} {stat.S_IMODE(st.st_mode):o} {digest} ".encode() + rel + b"\n")
        if len(lines) > MAX_TREE_ENTRIES:
            raise WolfError(f"{what} {top}: more than {MAX_TREE_ENTRIES:,} files")
    h = hashlib.sha256()
    for line in sorted(lines, key=lambda ln: ln.split(b" ", 3)[3]):
        h.update(line)
    return h.hexdigest()


def _walk(top: str, refuse: Callable[[OSError], NoReturn]) -> Iterator[str]:
    """Every path below ``top``, links not followed; a loop of its own (os.walk recurses:
    an overlay 1,100 folders deep was a RecursionError)."""
    todo = [top]
    while todo:
        d = todo.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            refuse(e)
        for entry in entries:
            yield entry.path
            if entry.is_dir(follow_symlinks=False):
                todo.append(entry.path)


def _regular_sha256(path: str) -> str:
    """A regular file's sha256, opened so that a link or FIFO put there meanwhile is not
    followed or waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "changed while it was read", path)
        h = hashlib.sha256()
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
