"""Reading a user-given firmware file without trusting it: only regular files (a FIFO would
hang, /dev/zero never ends), only sizes a flash chip could hold, read in pieces up to that."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from ...errors import WolfError

# No OpenWrt sysupgrade or factory image comes near this (NOR flash is 4–32 MiB, NAND
# sysupgrade tars a few dozen MiB); it keeps a wrong file from filling the RAM.
MAX_IMAGE = 256 << 20
CHUNK = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_file(
    path: Path, what: str = "image", hint: str = "give the image file itself"
) -> BinaryIO:
    """A regular file opened for reading; WolfError (one line) for anything else. Opened with
    O_NONBLOCK and checked with fstat, so a FIFO (or a path that becomes one) never blocks
    the open and a device, followed through a symlink, is refused before a byte is read."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise WolfError(f"{what} {path} does not exist") from None
    except OSError as e:
        raise WolfError(f"cannot read {what} {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise WolfError(f"{what} {path} is {_kind(st.st_mode)}, not a file", hint=hint)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise WolfError(f"cannot read {what} {path}: {e.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise WolfError(f"{what} {path} changed into {_kind(mode)}")
    return os.fdopen(fd, "rb")


def read_file(path: Path, what: str = "image", limit: int = MAX_IMAGE) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; WolfError (one line) else."""
    with open_file(path, what) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise WolfError(
                f"{what} {path} has {size:,} bytes, more than any flash this checks ({limit:,} B)",
                hint="is it the sysupgrade image of the device?",
            )
        parts, total = [], 0
        while chunk := fh.read(CHUNK):
            total += len(chunk)
            if total > limit:  # it grew while we read
                raise WolfError(f"{what} {path} grew past {limit:,} bytes while being read")
            parts.append(chunk)
    return b"".join(parts)
