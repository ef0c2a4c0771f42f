"""Reading a user-given firmware file without trusting it: only regular files (a FIFO would
hang, /dev/zero never ends), only sizes a flash chip could hold, read in pieces up to that."""

from __future__ import annotations

import os
import stat
from pathlib import Path

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


def read_file(path: Path, what: str = "image", limit: int = MAX_IMAGE) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; WolfError (one line) else."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise WolfError(f"{what} {path} does not exist") from None
    except OSError as e:
        raise WolfError(f"cannot read {what} {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise WolfError(
            f"{what} {path} is {_kind(st.st_mode)}, not a file", hint="give the image file itself"
        )
    if st.st_size > limit:
        raise WolfError(
            f"{what} {path} has {st.st_size:,} bytes, more than any flash this checks "
            f"({limit:,} B)",
            hint="is it the sysupgrade image of the device?",
        )
    try:
        # O_NONBLOCK: should the path become a FIFO after the stat, open must not hang on it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise WolfError(f"cannot read {what} {path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WolfError(f"{what} {path} changed into {_kind(os.fstat(fd).st_mode)}")
        parts, total = [], 0
        while chunk := fh.read(CHUNK):
            total += len(chunk)
            if total > limit:  # it grew while we read
                raise WolfError(f"{what} {path} grew past {limit:,} bytes while being read")
            parts.append(chunk)
    return b"".join(parts)
