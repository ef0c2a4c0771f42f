"""The tree digest of a source archive: one sha256 for the files it holds, whoever packed them.

The same commit comes as different bytes from different packers (`git archive | gzip -n -9`
beside us, GitHub's archive/codeload, gitweb's snapshot): other compression, another top
folder, other times and owners. Their trees are the same, so a pin records this digest
(docs/sources.md gives its definition and a shell command that computes it):

    for every regular file and symlink, its path without the archive's one top folder,
    sorted by the path's bytes, one line   "<mode> <sha256> <path>\\n"
      mode   100755 (a file with any execute bit), 100644 (any other file), 120000 (symlink)
      sha256 of the file's content, or of the symlink's target
    tree-sha256 = sha256 of those lines

Directories, owners, times, pax headers and the compression do not count (git records none
of them). Hard links, devices, FIFOs, absolute or `..` paths and a path given twice are refused:
`git archive` writes none, and an archive with them is not a plain source tree."""

from __future__ import annotations

import hashlib
import lzma
import os
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import WolfError
from ..files import archive as archives

MODE_FILE, MODE_EXEC, MODE_LINK = "100644", "100755", "120000"
CHUNK = 1 << 20


@dataclass(frozen=True)
class Bounds:
    """What a source archive may hold; each is checked before the data it bounds is read."""

    packed: int  # the archive file's bytes
    members: int
    member: int  # one file's declared size (a sparse file's is its full size)
    unpacked: int  # all files' declared sizes together, and the tar stream itself


# Measured on ../shared/openwrt: openwrt-25.12.5.tar.gz is 11.4 MB packed, 12,153 members,
# 54.7 MB of files (a tar stream of 64 MB, 5.6 times the packed bytes), the largest file
# 1.8 MB; 24.10.8 alike; every other pin is under 2.2 MB unpacked and 500 members. Bounds
# with a margin of 16 and more (packed: upstream.MAX_DOWNLOAD). A 197-byte .tar.gz holding
# a sparse file of 1 TiB, or 2,500,000 empty files in 18 MB, is refused at its header.
PIN = Bounds(packed=256 << 20, members=200_000, member=256 << 20, unpacked=1 << 30)
RATIO = 100  # unpacked per packed byte, past archives.RATIO_FLOOR: the pins' is 4.5 to 6
EXTENDED_MAX = 64 << 10  # a pax or GNU long-name header: a path (4,096), git's commit id


class _Refused(Exception):
    """A header refused before tarfile acts on it (said by tree_sha256 with the archive)."""


class _Checked(tarfile.TarInfo):
    """tarfile reads an extended header whole into memory and a sparse map into a list
    before it returns a member, and reads a sparse file's holes as zeros: refused first
    (`git archive` writes no sparse files; its extended headers are a path or a comment)."""

    def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise _Refused(f"member {self.name!r} is a sparse file")
        if self.type in _EXTENDED and self.size > EXTENDED_MAX:
            raise _Refused(f"an extended header of {self.size:,} bytes (at most {EXTENDED_MAX:,})")
        got: tarfile.TarInfo = super()._proc_member(tar)  # type: ignore[misc]
        return got

    def _proc_gnusparse_00(self, *_: object) -> None:
        raise _Refused("a sparse file (pax GNU.sparse 0.0)")

    def _proc_gnusparse_01(self, *_: object) -> None:
        raise _Refused("a sparse file (pax GNU.sparse 0.1)")

    def _proc_gnusparse_10(self, *_: object) -> None:
        raise _Refused("a sparse file (pax GNU.sparse 1.0)")


_EXTENDED = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
             tarfile.GNUTYPE_LONGLINK)  # fmt: skip


def _b(text: str) -> bytes:
    """A name as the archive's bytes (tarfile decodes undecodable bytes as surrogates)."""
    return text.encode("utf-8", "surrogateescape")


def _relative(name: str, where: str) -> tuple[str, str]:
    """(top folder, path below it) of a member name; refuses names that escape the tree."""
    p = PurePosixPath(name.removeprefix("./"))
    if p.is_absolute() or ".." in p.parts or "\n" in name:
        raise WolfError(f"{where}: refused member {name!r} (absolute, '..' or a newline)")
    if not p.parts:
        return "", ""
    return p.parts[0], "/".join(p.parts[1:])


def tree_sha256(archive: Path, bounds: Bounds | None = None) -> str:
    """The tree digest of a tar archive (.tar, .tar.gz, .tar.bz2, .tar.xz, .tar.zst): read as
    a stream, refused past ``bounds`` (default PIN) before the data beyond them is read."""
    bounds = bounds or PIN
    where = f"source archive {archive}"
    entries: dict[bytes, str] = {}
    tops: set[str] = set()
    limits = archives.Limits(total=bounds.unpacked, members=bounds.members, ratio=RATIO)
    # a FIFO, a device or a directory is one line before it is opened (trust/untrusted.py)
    with archives.decompressed(archive, limits, what="source archive") as stream:
        if (size := os.stat(archive).st_size) > bounds.packed:
            raise WolfError(f"{where} is {size:,} bytes, more than a pinned source's "
                            f"{bounds.packed:,}")  # fmt: skip
        try:
            with tarfile.open(fileobj=stream, mode="r|", tarinfo=_Checked) as tar:
                _digest_members(tar, where, bounds, entries, tops)
        except _Refused as e:
            raise WolfError(f"{where}: refused {e}") from None
        except (tarfile.TarError, EOFError, OSError, UnicodeError, zlib.error, lzma.LZMAError,
                RecursionError) as e:  # fmt: skip
            raise WolfError(f"{where}: not a readable tar archive ({e})") from None
    if len(tops) != 1 or not entries:
        raise WolfError(f"{where}: expected one top folder holding files, found {len(tops)}")
    h = hashlib.sha256()
    for key in sorted(entries):
        h.update(_b(entries[key]) + b"\n")
    return h.hexdigest()


def _digest_members(
    tar: tarfile.TarFile, where: str, bounds: Bounds, entries: dict[bytes, str], tops: set[str]
) -> None:
    """Each member's line into entries; every bound checked on its header, before its data."""
    count = declared = 0
    while (m := tar.next()) is not None:
        getattr(tar, "members").clear()  # noqa: B009  a stream keeps every header it read
        count += 1
        if count > bounds.members:
            raise WolfError(f"{where}: more than {bounds.members:,} members")
        if m.sparse is not None or any(k.startswith("GNU.sparse.") for k in m.pax_headers):
            raise _Refused(f"member {m.name!r} is a sparse file")
        top, rel = _relative(m.name, where)
        if top:
            tops.add(top)
        if m.isdir() or not rel:
            if m.isdir():
                continue
            raise WolfError(f"{where}: member {m.name!r} is outside a top folder")
        if m.issym():
            line = f"{MODE_LINK} {hashlib.sha256(_b(m.linkname)).hexdigest()} {rel}"
        elif m.isreg():
            declared += m.size
            if m.size > bounds.member or declared > bounds.unpacked:
                raise WolfError(
                    f"{where}: member {m.name!r} declares {m.size:,} bytes; a pinned source "
                    f"holds at most {bounds.member:,} per file and {bounds.unpacked:,} in all"
                )
            line = f"{MODE_EXEC if m.mode & 0o111 else MODE_FILE} {_content(tar, m)} {rel}"
        else:  # before anything is read or made of it
            raise WolfError(f"{where}: refused member {m.name!r} (a hard link, device or FIFO)")
        key = _b(rel)
        if key in entries:
            raise WolfError(f"{where}: {rel!r} is in the archive twice")
        entries[key] = line


def _content(tar: tarfile.TarFile, m: tarfile.TarInfo) -> str:
    h = hashlib.sha256()
    fh = tar.extractfile(m)
    assert fh is not None  # a regular member always has a file object
    while chunk := fh.read(CHUNK):
        h.update(chunk)
    return h.hexdigest()
