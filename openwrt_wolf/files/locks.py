"""Exclusive lock files: one downloader, builder or apt run per cache entry or tree, also
across processes (pytest-xdist workers, two shells); and run directories that a later run
removes when their owner died."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import WolfError
from ..paths import writable_dir


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the lock file ``path``. Its folder is under the cache or a tree, both untrusted:
    a folder that is a file or a dangling link, a lock that is a FIFO (opening it for
    writing would wait for a reader for ever) or a link is one error line."""
    writable_dir(path.parent, "lock folder")
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        raise WolfError(f"lock file {path} cannot be opened: {e.strerror}",
                        hint="remove it; the next run makes it again") from None  # fmt: skip
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WolfError(f"lock file {path} is not a regular file",
                            hint="remove it; the next run makes it again")  # fmt: skip
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


RUN_MARK = ".openwrt-wolf-run"  # in a run directory made by work_dir
LEGACY_AGE = 24 * 3600.0  # a run directory of an older version (no mark) counts as dead after


@contextlib.contextmanager
def work_dir(top: Path, prefix: str) -> Iterator[Path]:
    """A private directory under top for one run, removed when it ends. A run holds a lock
    on its directory for as long as it lives, so the one a killed run (SIGKILL, a power cut)
    left behind is found by the next run, whose lock on it succeeds, and removed; a live
    run's directory never is."""
    writable_dir(top, "run folder")
    with locked(top / ".runs.lock"):  # no run is between making and locking its directory
        for old in top.glob(f"{prefix}*"):
            _remove_if_dead(old)
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=top))
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(fd, fcntl.LOCK_EX)
        (path / RUN_MARK).write_text(f"{os.getpid()}\n")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


def _remove_if_dead(path: Path) -> None:
    try:  # O_NOFOLLOW: a link planted in the cache is not followed, let alone removed
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # its run is alive
        os.close(fd)
        return
    try:
        marked = (path / RUN_MARK).is_file()
        if marked or time.time() - os.fstat(fd).st_mtime > LEGACY_AGE:
            shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(fd)
