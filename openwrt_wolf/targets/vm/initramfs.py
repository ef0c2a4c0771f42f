"""An initramfs writer: cpio "newc" (the format the kernel's initramfs unpacker reads) plus gzip,
in pure Python, so building a test root needs neither a cpio binary nor root (device nodes are
just header fields)."""

from __future__ import annotations

import gzip
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ...errors import WolfError
from ...files import outputs

_MAGIC = b"070701"

# A test guest's /init runs as PID 1 with busybox's ash: the start mounts what busybox's
# programs need; the end is what the boot state machine waits for on the console
# (machine.py: "Please press Enter", then a root@<host>:<dir># prompt). busybox's
# reboot/poweroff/halt signal PID 1 (TERM/USR2/USR1), as they do procd. The shell runs in the
# background so that `wait` returns when such a signal comes and the trap runs.
_INIT_START = r"""#!/bin/sh
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /tmp /var/run /root
hostname {host}
"""
_INIT_END = r"""trap 'sync; reboot -f' TERM
trap 'sync; poweroff -f' USR2
trap 'sync; halt -f' USR1
while :; do
    echo "Please press Enter to activate this console."
    read -r _
    HOME=/root PS1='root@{host}:\w# ' ENV= /bin/sh </dev/console >/dev/console 2>&1 &
    wait $!
done
"""


def init_script(host: str, body: str) -> str:
    """A test guest's /init: the common start, ``body`` (its own steps), the console loop."""
    return _INIT_START.replace("{host}", host) + body + _INIT_END.replace("{host}", host)


@dataclass(frozen=True)
class Entry:
    name: str  # relative path without a leading slash, e.g. "bin/busybox"
    mode: int  # file type and permission bits (stat.S_IFREG | 0o755, ...)
    data: bytes = b""  # file contents, or the target of a symlink
    rdev: tuple[int, int] = (0, 0)  # major, minor of a device node


def _pad4(n: int) -> bytes:
    return b"\0" * (-n % 4)


class Archive:
    """Entries in order; parents must be added before their children (the kernel creates
    nothing implicitly)."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._names: set[str] = set()

    def _add(self, entry: Entry) -> None:
        name = str(PurePosixPath(entry.name.lstrip("/")))
        if name in self._names:
            raise WolfError(f"initramfs: {name} added twice")
        parent = str(PurePosixPath(name).parent)
        if parent != "." and parent not in self._names:
            raise WolfError(f"initramfs: {name} added before its directory {parent}")
        self._names.add(name)
        self.entries.append(Entry(name, entry.mode, entry.data, entry.rdev))

    def dir(self, name: str, mode: int = 0o755) -> None:
        self._add(Entry(name, stat.S_IFDIR | mode))

    def dirs(self, *names: str) -> None:
        for n in names:
            self.dir(n)

    def file(self, name: str, data: bytes | str, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        self._add(Entry(name, stat.S_IFREG | mode, raw))

    def copy(self, name: str, source: Path, mode: int | None = None) -> None:
        self.file(
            name, source.read_bytes(), stat.S_IMODE(source.stat().st_mode) if mode is None else mode
        )

    def symlink(self, name: str, target: str) -> None:
        self._add(Entry(name, stat.S_IFLNK | 0o777, target.encode()))

    def chardev(self, name: str, major: int, minor: int, mode: int = 0o600) -> None:
        self._add(Entry(name, stat.S_IFCHR | mode, rdev=(major, minor)))

    def to_cpio(self) -> bytes:
        out = bytearray()
        for ino, e in enumerate([*self.entries, Entry("TRAILER!!!", 0)], start=1):
            name = e.name.encode() + b"\0"
            trailer = e.name == "TRAILER!!!"
            fields = (
                0 if trailer else ino,
                e.mode,
                0,  # uid: root, like OpenWrt's -root-owned images
                0,  # gid
                2 if stat.S_ISDIR(e.mode) else 1,
                0,  # mtime: fixed, so the same inputs give the same bytes
                len(e.data),
                0,
                0,
                e.rdev[0],
                e.rdev[1],
                len(name),
                0,  # check: only used by the "crc" format
            )
            header = _MAGIC + b"".join(b"%08X" % f for f in fields)
            out += header + name + _pad4(len(header) + len(name))
            out += e.data + _pad4(len(e.data))
        return bytes(out)

    def write(self, path: Path) -> Path:
        """Write the gzip-compressed archive atomically."""
        blob = gzip.compress(self.to_cpio(), compresslevel=6, mtime=0)
        path.parent.mkdir(parents=True, exist_ok=True)
        outputs.replace_bytes(path, blob, mode=0o644)
        return path
