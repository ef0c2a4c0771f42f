"""Unpacking a tar archive that came from outside (a package what-if installs, an ImageBuilder
or SDK from a mirror): the one way this project does it, the same on every Python. Debian 12's
3.11.2 has no tarfile extraction filters, so none is used; the rules are here, those of the
``data`` filter with the differences marked (docs/threat-model.md):

- names: a leading "/" or "./" is dropped (the filters do so too); a ".." anywhere is refused
  (stricter: the filter takes one that stays inside);
- types: regular files, directories, symlinks and hard links; devices and FIFOs are refused;
- every path is resolved inside the root as a process chrooted there would resolve it
  (``locate``), so nothing is written through a link out of it; a symlink whose target climbs
  out of the root is refused; an absolute target is kept and read as inside the root, as on
  the router (difference: the filter refuses it, but OpenWrt packages ship such links, e.g.
  ca-bundle's /etc/ssl/cert.pem, and an ImageBuilder its host-tool links);
- a hard link only to a regular file this archive wrote before (stricter);
- whatever is in a member's way is removed first and the file created new (O_EXCL,
  O_NOFOLLOW): never written through a link or into another name's inode;
- modes as the filter sets them: no setuid/setgid/sticky, no group/other write, owner rw,
  execute only where the owner has it; owners are not kept;
- streamed in pieces, at most ``Limits.total`` bytes unpacked (the stream; and sparse files'
  full sizes, whose holes are not in it) and ``Limits.members`` members, and past
  RATIO_FLOOR at most ``Limits.ratio`` times the bytes read: a bomb stops early.
"""

from __future__ import annotations

import bz2
import contextlib
import errno
import gzip
import io
import lzma
import os
import stat
import tarfile
import zlib
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from ..errors import WolfError
from ..trust import untrusted

CHUNK = 1 << 16
RATIO_FLOOR = 64 << 20  # below this many bytes unpacked any ratio is fine (a file of zeros)
MAX_HOPS = 40  # symlinks followed for one path, as Linux's MAXSYMLINKS


def _read_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged or hostile archive raises, from tarfile and the decompressors
    (zstandard imported here: a run that opens no archive does not load it)."""
    import zstandard

    return (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError, zstandard.ZstdError,
            MemoryError)  # fmt: skip


class ArchiveError(WolfError):
    """An archive that cannot be read or breaks a rule above: one line naming it."""


class WriteFailed(ArchiveError):
    """A member could not be written (``cause``: the OSError, e.g. ENOSPC)."""

    def __init__(self, message: str, cause: OSError) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass(frozen=True)
class Limits:
    total: int  # bytes unpacked (the tar stream: headers and data)
    members: int
    ratio: int  # bytes unpacked per byte of the archive, checked past RATIO_FLOOR


# OpenWrt's biggest packages (firmware blobs, kernel modules) are a few dozen MiB; an
# ImageBuilder or SDK a few GiB, compressed 3-6 times (ELF files, sources).
PACKAGE = Limits(total=512 << 20, members=100_000, ratio=100)
TREE = Limits(total=32 << 30, members=2_000_000, ratio=100)


@dataclass(frozen=True)
class Member:
    name: str  # "usr/lib/libwolfssl.so": relative, no "." or ".." parts
    kind: str  # "file", "dir", "symlink" or "hardlink"
    size: int
    mode: int  # what it is written with
    mtime: int
    link: str = ""  # a symlink's target as stored; a hard link's member name


def _shown(text: str) -> str:
    """A name from the archive, fit for one error line: control characters (an ESC that
    would drive the terminal, a newline) escaped, at most 200 characters."""
    out = text if text.isprintable() else text.encode("unicode_escape").decode()
    return out if len(out) <= 200 else out[:200] + "…"


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def locate(root: Path, name: str, where: str = "") -> Path:
    """Where ``name`` of the tree at root is on this host: links on the way followed as a
    process chrooted at root follows them (absolute targets from root, ".." never above it);
    the last part is not followed, it is the entry itself. Always a path under root."""
    todo, hops = _split(name), 0
    done: list[str] = []
    while todo:
        part = todo.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        here = root.joinpath(*done, part)
        if todo and here.is_symlink():
            hops += 1
            if hops > MAX_HOPS:
                raise ArchiveError(
                    f"{where or root}: {_shown(name)}: too many levels of symbolic links"
                )
            target = os.readlink(here)
            if target.startswith("/"):
                done = []
            todo = _split(target) + todo
            continue
        done.append(part)
    return root.joinpath(*done)


def _climbs_out(parent: list[str], target: str) -> bool:
    """Does a link in ``parent`` to ``target`` lead above the root (read lexically)?"""
    at = [] if target.startswith("/") else list(parent)
    for part in _split(target):
        if part != "..":
            at.append(part)
        elif not at:
            return True
        else:
            at.pop()
    return False


_SPECIAL = {
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
}


def _member(info: tarfile.TarInfo, where: str) -> Member | None:
    """The member as it will be written, or ArchiveError; None for the root itself ("./")."""
    shown = _shown(info.name)
    if ".." in info.name.split("/"):
        raise ArchiveError(f"{where}: member '{shown}' climbs out with '..'")
    parts = _split(info.name)
    name = "/".join(parts)
    mode = info.mode & 0o755  # no setuid, setgid, sticky, group or other write
    if info.isreg():
        if not mode & 0o100:
            mode &= ~0o111
        return Member(name, "file", info.size, mode | 0o600, int(info.mtime))
    if info.isdir():
        return Member(name, "dir", 0, mode | 0o700, int(info.mtime)) if parts else None
    if not parts:
        raise ArchiveError(f"{where}: member '{shown}' has no name")
    link = info.linkname
    if info.issym():
        if not link or _climbs_out(parts[:-1], link):
            raise ArchiveError(
                f"{where}: symlink {shown} -> '{_shown(link)}' leads out of the tree"
            )
        return Member(name, "symlink", 0, 0o777, int(info.mtime), link)
    if info.islnk():
        if ".." in link.split("/") or not _split(link):
            raise ArchiveError(
                f"{where}: hard link {shown} -> '{_shown(link)}' leads out of the tree"
            )
        return Member(name, "hardlink", 0, mode, int(info.mtime), "/".join(_split(link)))
    kind = _SPECIAL.get(info.type, f"of tar type {info.type!r}")
    raise ArchiveError(f"{where}: member {shown} is {kind}; only files, directories and links")


class _Counted(io.RawIOBase):
    """The archive file, counting the bytes read from it."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh, self.count = fh, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        data = self.fh.read(len(b))
        b[: len(data)] = data
        self.count += len(data)
        return len(data)


class _Bounded(io.RawIOBase):
    """The unpacked tar stream, refused past the limits."""

    def __init__(self, src: IO[bytes], read: _Counted, limits: Limits, where: str) -> None:
        self.src, self.read_from, self.limits, self.where, self.count = src, read, limits, where, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        data = self.src.read(len(b))
        b[: len(data)] = data
        self.count += len(data)
        lim = self.limits
        if self.count > lim.total:
            raise ArchiveError(f"{self.where}: unpacks to more than {lim.total:,} bytes")
        if self.count > RATIO_FLOOR and self.count > lim.ratio * self.read_from.count:
            raise ArchiveError(
                f"{self.where}: unpacks to more than {lim.ratio} times its size "
                f"({self.count:,} bytes from {self.read_from.count:,}): a decompression bomb?"
            )
        return len(data)


def _decompressed(raw: io.BufferedReader[Any]) -> IO[bytes]:
    """The archive's bytes decompressed by what its first bytes say (or as they are)."""
    head = raw.peek(6)[:6]
    if head.startswith(b"\x1f\x8b"):
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
    if head.startswith(b"BZh"):
        return cast(IO[bytes], bz2.BZ2File(raw))
    if head.startswith(b"\xfd7zXZ\x00"):
        return cast(IO[bytes], lzma.LZMAFile(raw))
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        return cast(IO[bytes], reader)
    return cast(IO[bytes], raw)


class _Stream(_Bounded):
    """A compressed file's bytes, bounded, a damaged stream one ArchiveError."""

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        try:
            return super().readinto(b)
        except _read_errors() as e:
            why = "out of memory" if isinstance(e, MemoryError) else (str(e) or type(e).__name__)
            raise ArchiveError(f"{self.where} does not decompress ({why})") from None


@contextlib.contextmanager
def decompressed(
    path: Path, limits: Limits, *, what: str, hint: str | None = None
) -> Iterator[IO[bytes]]:
    """A compressed file that holds no archive (a gzipped rootfs image) as the stream of its
    bytes, under the same rules: opened as ``members`` opens an archive, and a read past
    ``limits.total`` bytes, or past RATIO_FLOOR more than ``limits.ratio`` times the bytes
    read, raises ArchiveError (``limits.members`` is not used)."""
    where = f"{what} {_shown(str(path))}"
    with untrusted.open_file(path, what, hint=hint) as fh:
        counted = _Counted(fh)
        try:
            src = _decompressed(io.BufferedReader(counted, CHUNK))
        except _read_errors() as e:
            raise _unreadable(where, e, hint) from None
        yield cast(IO[bytes], io.BufferedReader(_Stream(src, counted, limits, where), CHUNK))


def _unreadable(where: str, e: BaseException, hint: str | None) -> ArchiveError:
    why = "out of memory" if isinstance(e, MemoryError) else (str(e) or type(e).__name__)
    return ArchiveError(f"{where} is not a tar archive, or a damaged one ({why})", hint=hint)


def _data(
    tar: tarfile.TarFile, info: tarfile.TarInfo, where: str, hint: str | None
) -> Iterator[bytes]:
    fh = tar.extractfile(info)
    assert fh is not None  # a regular file
    try:
        while chunk := fh.read(CHUNK):
            yield chunk
    except _read_errors() as e:
        raise _unreadable(where, e, hint) from None


def members(
    archive: Path,
    limits: Limits,
    *,
    what: str = "archive",
    hint: str | None = None,
    inner: str | None = None,
) -> Iterator[tuple[Member, Iterator[bytes]]]:
    """Each member checked against the rules, with its data in pieces (empty but for
    regular files; read it before taking the next member). ``inner``: the members of the
    archive of that name inside this one (an .ipk's data.tar.gz), streamed as well."""
    where = f"{what} {_shown(str(archive))}"
    with untrusted.open_file(archive, what, hint="give the archive file") as fh:
        counted = _Counted(fh)
        try:
            src = _decompressed(io.BufferedReader(counted, CHUNK))
            with tarfile.open(fileobj=_Bounded(src, counted, limits, where), mode="r|") as tar:
                if inner is None:
                    yield from _checked(tar, limits, where, hint)
                    return
                for info, m in _infos(tar, limits, where):
                    if m.name == inner and m.kind == "file":
                        data = tar.extractfile(info)
                        assert data is not None
                        inside = _decompressed(cast(io.BufferedReader, data))
                        bounded = _Bounded(inside, counted, limits, where)
                        with tarfile.open(fileobj=bounded, mode="r|") as nested:
                            yield from _checked(nested, limits, where, hint)
                        return
                raise ArchiveError(f"{where}: no {inner} in it", hint=hint)
        except _read_errors() as e:
            raise _unreadable(where, e, hint) from None


def _infos(
    tar: tarfile.TarFile, limits: Limits, where: str
) -> Iterator[tuple[tarfile.TarInfo, Member]]:
    count, sparse, files = 0, 0, set[str]()  # files: what a hard link may name
    while (info := tar.next()) is not None:
        # a stream keeps every header it read (an untyped attribute): memory stays bounded
        getattr(tar, "members").clear()  # noqa: B009
        count += 1
        if count > limits.members:
            raise ArchiveError(f"{where}: more than {limits.members:,} members")
        m = _member(info, where)
        if m is None:
            continue
        if info.sparse is not None:  # checked before its data: tarfile reads its holes as
            # zeros the stream's bound never sees (a TiB in a 129-byte archive)
            sparse += m.size
            if sparse > limits.total:
                raise ArchiveError(f"{where}: sparse file {_shown(m.name)} declares "
                                   f"{m.size:,} bytes, more than {limits.total:,}")  # fmt: skip
        if m.kind == "hardlink" and m.link not in files:
            raise ArchiveError(
                f"{where}: hard link {_shown(m.name)} -> {_shown(m.link)} is not to a file it "
                "holds before it"
            )
        (files.add if m.kind in ("file", "hardlink") else files.discard)(m.name)
        yield info, m


def _checked(
    tar: tarfile.TarFile, limits: Limits, where: str, hint: str | None
) -> Iterator[tuple[Member, Iterator[bytes]]]:
    for info, m in _infos(tar, limits, where):
        yield m, (_data(tar, info, where, hint) if m.kind == "file" else iter(()))


def extract(
    archive: Path,
    root: Path,
    limits: Limits,
    *,
    what: str = "archive",
    hint: str | None = None,
    inner: str | None = None,
    exclude: Collection[str] = (),
    progress: Callable[[int], None] | None = None,
) -> None:
    """Unpack into root (made if missing, may hold a tree already) by the rules above."""
    entries = members(archive, limits, what=what, hint=hint, inner=inner)
    _install(entries, root, f"{what} {_shown(str(archive))}", exclude, progress)


def place_tree(src: Path, root: Path, limits: Limits, *, what: str) -> None:
    """Put the tree at src (what another tool unpacked into an empty directory, e.g. apk
    extract) into root by the same rules: nothing through a link of root's, no devices,
    no link that climbs out, modes as for an archive, at most ``limits``."""
    _install(_walk(src, limits, what), root, what, (), None)


def copy_in(root: Path, name: str, src: Path, *, what: str) -> None:
    """One regular file src into the tree at root as ``name`` (resolved inside root; what is
    in its way removed, never written through)."""
    st = os.lstat(src)
    m = Member(name, "file", st.st_size, stat.S_IMODE(st.st_mode) & 0o755 | 0o600, int(st.st_mtime))
    _install(iter([(m, _file_data(src))]), root, what, (), None)


def _file_data(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


def _walk(src: Path, limits: Limits, where: str) -> Iterator[tuple[Member, Iterator[bytes]]]:
    """The entries of a directory tree as members (parents first), checked like an
    archive's; nothing below src is followed."""
    count = total = 0
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for n in sorted(dirnames) + sorted(filenames):
            path = Path(dirpath) / n
            name = str(path.relative_to(src))
            st = os.lstat(path)
            count, total = count + 1, total + st.st_size
            if count > limits.members or total > limits.total:
                raise ArchiveError(f"{where}: more than {limits.members:,} entries or "
                                   f"{limits.total:,} bytes")  # fmt: skip
            info = tarfile.TarInfo(name)
            info.mode, info.mtime, info.size = stat.S_IMODE(st.st_mode), int(st.st_mtime), 0
            if stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
            elif stat.S_ISLNK(st.st_mode):
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                info.type, info.size = tarfile.REGTYPE, st.st_size
            else:
                info.type = tarfile.FIFOTYPE if stat.S_ISFIFO(st.st_mode) else tarfile.CHRTYPE
            m = _member(info, where)
            if m is not None:
                yield m, (_file_data(path) if m.kind == "file" else iter(()))


def _install(
    entries: Iterator[tuple[Member, Iterator[bytes]]],
    root: Path,
    where: str,
    exclude: Collection[str],
    progress: Callable[[int], None] | None,
) -> None:
    root.mkdir(parents=True, exist_ok=True)
    written: set[str] = set()  # regular files of this archive: what a hard link may name
    dirs: list[tuple[Path, int]] = []
    for m, data in entries:
        if m.name in exclude:
            continue
        dest = locate(root, m.name, where)
        try:
            if _place(root, m, dest, data, written, where):
                dirs.append((dest, m.mtime))
        except OSError as e:
            full = e.errno == errno.ENOSPC
            raise WriteFailed(
                f"cannot unpack {_shown(m.name)} of {where} into {root}: "
                + ("disk full" if full else (e.strerror or str(e))),
                e,
            ) from None
        if progress is not None:
            progress(m.size)
    for d, mtime in reversed(dirs):  # last, as tar does: writing into them changed them
        with contextlib.suppress(OSError):
            os.utime(d, (mtime, mtime), follow_symlinks=False)


def _is_dir(root: Path, name: str) -> bool:
    """Is name, its links followed inside root, a directory?"""
    try:
        return stat.S_ISDIR(os.lstat(locate(root, name + "/-").parent).st_mode)
    except OSError:  # a dangling link: replaced by the directory
        return False


def _place(
    root: Path, m: Member, dest: Path, data: Iterator[bytes], written: set[str], where: str
) -> bool:
    """Write one member at dest (a path under root); True for a directory."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        st: os.stat_result | None = os.lstat(dest)
    except FileNotFoundError:
        st = None
    is_dir = st is not None and stat.S_ISDIR(st.st_mode)
    if m.kind == "dir":
        if st is not None and stat.S_ISLNK(st.st_mode) and _is_dir(root, m.name):
            return False  # a link to a directory of the tree stays (tar's keep-directory-symlink)
        if not is_dir:
            if st is not None:
                os.unlink(dest)
            os.mkdir(dest, 0o700)
            os.chmod(dest, m.mode)
        return True
    if is_dir:
        raise ArchiveError(
            f"{where}: {m.kind} {_shown(m.name)} would replace a directory in {root}"
        )
    # checked again where it lands: a link on its way may have moved it up the tree
    if m.kind == "symlink" and _climbs_out(list(dest.parent.relative_to(root).parts), m.link):
        raise ArchiveError(
            f"{where}: symlink {_shown(m.name)} -> '{_shown(m.link)}' leads out of the tree"
        )
    src = locate(root, m.link) if m.kind == "hardlink" else dest
    if m.kind == "hardlink" and (m.link not in written or src == dest or not _is_file(src)):
        raise ArchiveError(
            f"{where}: hard link {_shown(m.name)} -> {_shown(m.link)} is not to a file it holds "
            "before it"
        )
    if st is not None:
        os.unlink(dest)  # never written through: a link's target or another name's inode
    written.discard(m.name)
    if m.kind == "symlink":
        os.symlink(m.link, dest)
        return False
    if m.kind == "hardlink":
        os.link(src, dest, follow_symlinks=False)
    else:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(dest, flags, 0o600), "wb") as out:
            for chunk in data:
                out.write(chunk)
            out.flush()
            os.fchmod(out.fileno(), m.mode)
            os.utime(out.fileno(), (m.mtime, m.mtime))
    written.add(m.name)
    return False


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
