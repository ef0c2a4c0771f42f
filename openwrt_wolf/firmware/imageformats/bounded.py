"""Reading a user-given firmware file without trusting it: only regular files (a FIFO would
hang, /dev/zero never ends), only sizes a flash chip could hold, read in pieces up to that
(untrusted.read_bytes)."""

from __future__ import annotations

from pathlib import Path

from ...trust import untrusted

# No OpenWrt sysupgrade or factory image comes near this (NOR flash is 4–32 MiB, NAND
# sysupgrade tars a few dozen MiB); it keeps a wrong file from filling the RAM.
MAX_IMAGE = 256 << 20


def read_file(path: Path, what: str = "image", limit: int = MAX_IMAGE) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; WolfError (one line) else."""
    return untrusted.read_bytes(
        path,
        what,
        limit,
        hint="give the image file itself",
        holds="any flash this checks",
        big_hint="is it the sysupgrade image of the device?",
    )
