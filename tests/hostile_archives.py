"""Hostile archives, generated in families for the tests and bench/bad_inputs.py: names that
climb out with ".." at several depths, absolute names, symlinks out and chains of them, hard
links to files inside and outside, devices and FIFOs, and decompression bombs in every codec
at several ratios. Each case says what must happen: "refused" (one error, nothing written
outside the root) or "contained" (unpacked, and still nothing written outside the root).

The oracle is a victim directory beside the root (``Victim``): its files' bytes, modes and
existence before and after a case, and the list of every path outside the root."""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import lzma
import os
import shutil
import stat
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

DEPTHS = (1, 2, 3, 5, 8, 12)
CODECS = ("gz", "bz2", "xz", "zst")


@dataclass(frozen=True)
class Entry:
    kind: str  # file, dir, symlink, hardlink, chr, blk, fifo
    name: str
    body: bytes = b""
    link: str = ""
    mode: int = 0o644


@dataclass(frozen=True)
class Case:
    family: str
    name: str
    entries: tuple[Entry, ...]
    expect: str  # "refused" or "contained"
    codec: str = "gz"
    bomb: tuple[int, int] | None = None  # (bytes of zeros, in pieces of) for a bomb member

    @property
    def label(self) -> str:
        return f"{self.family}/{self.name}"


def _info(e: Entry) -> tarfile.TarInfo:
    info = tarfile.TarInfo(e.name)
    info.mode, info.mtime = e.mode, 1_700_000_000
    info.type = {
        "file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
        "hardlink": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE,
        "fifo": tarfile.FIFOTYPE,
    }[e.kind]  # fmt: skip
    info.linkname = e.link
    if e.kind in ("chr", "blk"):
        info.devmajor, info.devminor = 1, 3
    info.size = len(e.body) if e.kind == "file" else 0
    return info


def tar_bytes(entries: tuple[Entry, ...]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for e in entries:
            tar.addfile(_info(e), io.BytesIO(e.body) if e.kind == "file" else None)
    return buf.getvalue()


def compress(data: bytes, codec: str) -> bytes:
    if codec == "gz":
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == "bz2":
        return bz2.compress(data, 9)
    if codec == "xz":
        return lzma.compress(data, preset=1)
    if codec == "zst":
        return zstandard.ZstdCompressor(level=3).compress(data)
    assert codec == "tar"
    return data


def write(case: Case, path: Path) -> Path:
    """The case's archive at path. A bomb is concatenated compressed streams (gzip members,
    bzip2 and xz streams, zstd frames: each codec's readers take them one after another), so
    a GiB of zeros costs one compressed MiB to make."""
    if case.bomb is None:
        path.write_bytes(compress(tar_bytes(case.entries), case.codec))
        return path
    total, piece = case.bomb
    head = tarfile.TarInfo("usr/lib/zeros")
    head.size, head.mode = total, 0o644
    header = head.tobuf(tarfile.GNU_FORMAT)
    chunk = compress(bytes(piece), case.codec)
    with path.open("wb") as fh:
        fh.write(compress(header, case.codec))
        for _ in range(total // piece):
            fh.write(chunk)
        fh.write(compress(bytes(-total % 512 + 1024), case.codec))  # padding + end of archive
    return path


def cases(victim: Path) -> list[Case]:
    """Every case, with names aimed at ``victim`` (an absolute directory holding "f")."""
    v = str(victim / "f").lstrip("/")  # the victim file, relative to /
    out: list[Case] = []
    x = Entry("file", "usr/lib/x", b"EVIL\n")
    for d in DEPTHS:
        up = "../" * d
        out += [
            Case("dotdot", f"file-{d}", (Entry("file", f"usr/{up}{v}", b"EVIL\n"),), "refused"),
            Case("dotdot", f"dot-file-{d}", (Entry("file", f"./{up}{v}", b"EVIL\n"),), "refused"),
            Case("dotdot", f"dir-{d}", (Entry("dir", f"usr/{up}{v}x", mode=0o755),), "refused"),
            # from usr/, one "../" is still the root: that link stays inside
            Case("symlink-out", f"rel-{d}",
                 (Entry("symlink", "usr/lib", link=up + str(victim).lstrip("/")), x),
                 "contained" if d == 1 else "refused"),
            Case("hardlink", f"rel-{d}", (Entry("hardlink", "usr/lib/x", link=up + v), x),
                 "refused"),
            # a link that stays inside by its name but not where it lands (through "a")
            Case("symlink-out", f"via-link-{d}",
                 (Entry("dir", "d/e", mode=0o755), Entry("symlink", "d/e/a", link="../.."),
                  Entry("symlink", "d/e/a/b", link="../" * (d + 1) + v),
                  Entry("file", "d/e/a/b/y", b"EVIL\n")), "refused"),
        ]  # fmt: skip
    for prefix in ("/", "//", "/./"):
        out.append(
            Case("absolute", f"name-{prefix}", (Entry("file", prefix + v, b"EVIL\n"),), "contained")
        )
    for n in (1, 2, 4):
        chain = tuple(Entry("symlink", f"l{i}", link=f"l{i + 1}") for i in range(n))
        out += [
            # absolute targets are read inside the root (as on the router): contained
            Case("symlink-chain", f"abs-{n}",
                 (*chain, Entry("symlink", f"l{n}", link=str(victim)),
                  Entry("file", "l0/f", b"EVIL\n")), "contained"),
            Case("symlink-chain", f"up-{n}",
                 (*chain, Entry("symlink", f"l{n}", link="../" * n + str(victim).lstrip("/")),
                  Entry("file", "l0/f", b"EVIL\n")), "refused"),
        ]  # fmt: skip
    out += [
        Case("symlink-chain", "loop", (Entry("symlink", "a", link="b"), Entry("symlink", "b",
             link="a"), Entry("file", "a/x", b"EVIL\n")), "refused"),
        Case("hardlink", "absolute-victim", (Entry("hardlink", "usr/lib/x", link=str(victim / "f")),
             x), "refused"),
        Case("hardlink", "etc-hostname", (Entry("hardlink", "usr/lib/h", link="/etc/hostname"),),
             "refused"),
        Case("hardlink", "later-member", (Entry("hardlink", "a", link="b"),
             Entry("file", "b", b"x")), "refused"),
        Case("hardlink", "to-symlink-out", (Entry("symlink", "s", link=str(victim / "f")),
             Entry("hardlink", "h", link="s"), Entry("file", "h", b"EVIL\n")), "refused"),
        # inside: b shares a's inode, then a new b must not write a's bytes
        Case("hardlink", "inside-then-file", (Entry("file", "a", b"orig\n"),
             Entry("hardlink", "b", link="a"), Entry("file", "b", b"new\n")), "contained"),
        Case("special", "chr", (Entry("chr", "dev/null2"),), "refused"),
        Case("special", "blk", (Entry("blk", "dev/sda9"),), "refused"),
        Case("special", "fifo", (Entry("fifo", "tmp/fifo"),), "refused"),
        Case("modes", "setuid-sticky-groupwrite", (Entry("file", "bin/su", b"x", mode=0o6777),
             Entry("dir", "tmp", mode=0o1777), Entry("file", "etc/w", b"x", mode=0o666)),
             "contained"),
    ]  # fmt: skip
    for codec in CODECS:
        for piece in (1 << 16, 1 << 20):  # ratios of a few hundred to a few thousand
            out.append(Case("bomb", f"{codec}-{piece >> 10}k", (), "refused", codec=codec,
                            bomb=(1 << 30, piece)))  # fmt: skip
    for codec in ("gz", "xz", "tar"):
        out.append(Case("codec", f"plain-{codec}", (x,), "contained", codec=codec))
    return out


@dataclass
class Victim:
    """Files that no case may change: a directory of them, and everything outside the root."""

    top: Path  # holds the victim directory and the roots
    before: dict[str, tuple[str, int]] = field(default_factory=dict)

    @property
    def dir(self) -> Path:
        return self.top / "victim"

    def plant(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "f").write_bytes(b"precious\n")
        (self.dir / "g").write_bytes(b"also precious\n")
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, tuple[str, int]]:
        out = {}
        for p in sorted(self.dir.rglob("*")):
            st = p.lstat()
            body = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else ""
            out[str(p.relative_to(self.dir))] = (body, st.st_mode)
        return out

    def changes(self) -> list[str]:
        now, was = self.snapshot(), self.before
        return sorted(k for k in was.keys() | now.keys() if was.get(k) != now.get(k))


def outside(top: Path, roots: list[Path]) -> Iterator[str]:
    """Paths under top that are not under one of roots (what a case may not create)."""
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in roots]
        for n in filenames + dirnames:
            yield str((here / n).relative_to(top))


def tar_index(packages: Path, dest: Path) -> Path:
    """The packages of an ImageBuilder's packages/ (packages.adb, Packages or index.json) as an
    index.json directory of tar.gz files (what-if's third format), each holding the files the
    package installs (`apk extract` for an ADB package): the form hostile cases replace."""
    from openwrt_wolf.whatif import pkgformats, pkgsource

    index = pkgsource.load(packages)
    dest.mkdir(parents=True)
    entries = []
    for pkg in index.packages.values():
        tree = dest / ".tree" / pkg.name
        tree.mkdir(parents=True)
        if pkg.format == "adb":
            assert pkg.apk is not None
            pkgformats.adb_extract(pkg.apk, pkg.file, tree)
        else:
            pkgsource.extract(pkg, tree)
        with tarfile.open(dest / pkg.file.name, "w:gz") as tar:
            for p in sorted(tree.rglob("*")):
                tar.add(p, str(p.relative_to(tree)), recursive=False)
        entries.append({"name": pkg.name, "version": pkg.version, "abi": pkg.abi,
                        "depends": list(pkg.depends), "conflicts": list(pkg.conflicts),
                        "provides": list(pkg.provides), "file": pkg.file.name})  # fmt: skip
    shutil.rmtree(dest / ".tree")
    (dest / "index.json").write_text(json.dumps(entries, indent=1))
    return dest
