"""A read-only squashfs 4.0 reader in pure Python: no root, no mount, no unsquashfs.

Enough of the format (as squashfs-tools documents it) to measure an OpenWrt root filesystem:
the superblock (``bytes_used`` is the rootfs size the image recipes append), the inode and
directory tables (to list files), the fragment table and compressed data blocks (to read a
file's bytes). Compressors: xz and lzma (OpenWrt's), gzip, zstd. Anything truncated, corrupt or
not squashfs raises one WolfError naming the file and what is wrong.
"""

from __future__ import annotations

import collections
import fnmatch
import lzma
import os
import stat
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import WolfError
from ..trust import untrusted
from .imageformats.bounded import MAX_IMAGE
from .imageformats.squashfs_sb import SIZE as SUPERBLOCK_SIZE
from .imageformats.squashfs_sb import Superblock, parse_header

_METADATA_SIZE = 8192
_UNCOMPRESSED_META = 0x8000
_UNCOMPRESSED_DATA = 1 << 24
_NO_FRAGMENT = 0xFFFFFFFF
_FRAGMENTS_KEPT = 8  # decompressed fragment blocks held: at most 8 MiB (1 MiB blocks)
_FLAG_COMPRESSOR_OPTIONS = 0x0400

# What a crafted image may make the reader do, bounded (docs/threat-model.md): a superblock's
# counts and a table's lengths are claims, and zeros (sparse blocks, metadata of zeros) cost
# the image almost nothing. An OpenWrt rootfs has 1,000-5,000 entries and reads well under
# 1 MiB of metadata (50,000 files: about 4 MiB); its libraries are a few MiB each and xz keeps
# the image at about a third of its files.
MAX_ENTRIES = 200_000
MAX_PATHS = 32 << 20  # bytes of all entries' paths together (a deep chain of long names)
MAX_PATH = 4096  # PATH_MAX: no system could unpack a longer one
MAX_METADATA = 16 << 20  # metadata bytes decompressed plus bytes read from it
_VISIT = 16  # what each metadata block a read passes through costs of that budget
MAX_FILE = 16 << 20  # bytes of one file read whole (a TLS library, a package list)
MAX_READ = 32 << 20  # bytes of all files read from one image
READ_RATIO = 32  # a file read may claim at most this many times the filesystem's bytes
_MIN_INODE = 20  # bytes of the smallest inode (a FIFO's or socket's)

# inode types (basic 1-7, extended 8-14) -> stat file type bits
_FTYPE = {
    1: stat.S_IFDIR, 2: stat.S_IFREG, 3: stat.S_IFLNK, 4: stat.S_IFBLK,
    5: stat.S_IFCHR, 6: stat.S_IFIFO, 7: stat.S_IFSOCK,
}  # fmt: skip


@dataclass(frozen=True)
class Entry:
    """One file, directory, link or device in the filesystem."""

    path: str  # "/lib/libmbedtls.so.21"
    mode: int  # stat-style: file type bits | permissions
    size: int  # bytes of a regular file; length of a symlink's target; 0 otherwise
    inode: int
    link_target: str | None = None
    # regular files: where the data lives, and the bytes it takes inside the image
    blocks_start: int = 0
    block_sizes: tuple[int, ...] = ()
    fragment: int = _NO_FRAGMENT
    fragment_offset: int = 0

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.mode)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def _decompressor(kind: str, where: str) -> Callable[[bytes, int], bytes]:
    """fn(compressed, limit): at most ``limit`` bytes out, so a corrupt block cannot
    balloon (a squashfs block never holds more than the block size)."""
    if kind in ("xz", "lzma"):
        fmt = lzma.FORMAT_XZ if kind == "xz" else lzma.FORMAT_ALONE

        def unxz(b: bytes, limit: int) -> bytes:
            d = lzma.LZMADecompressor(format=fmt)
            out = d.decompress(b, max_length=limit)
            if not d.eof and d.needs_input:
                raise ValueError("compressed block ends early")
            return out

        return unxz
    if kind == "gzip":

        def unzlib(b: bytes, limit: int) -> bytes:
            d = zlib.decompressobj()
            out = d.decompress(b, limit)
            if not d.eof:
                raise ValueError("compressed block ends early or is too big")
            return out

        return unzlib
    if kind == "zstd":
        import zstandard

        dctx = zstandard.ZstdDecompressor()
        return lambda b, limit: bytes(dctx.decompress(b, max_output_size=limit))
    raise WolfError(
        f"{where}: squashfs compressor {kind} is not supported",
        hint="OpenWrt uses xz; gzip, lzma and zstd are read too",
    )


class SquashFS:
    """An open squashfs image. ``offset`` lets it read a filesystem embedded in a firmware
    file (the rootfs of a sysupgrade image) without copying it out."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = Path(path)
        self.offset = offset
        self._where = f"{self.path}" + (f" at offset {offset:#x}" if offset else "")
        # a regular file only (a FIFO or a device is one line, never a hang), opened once
        self._fh: BinaryIO = untrusted.open_file(
            self.path, "rootfs", hint="give a squashfs file (OpenWrt's root.squashfs)"
        )
        try:
            self._file_size = os.fstat(self._fh.fileno()).st_size
            self.superblock = self._read_superblock()
            self._check_claims(self.superblock)
            self._decompress = _decompressor(self.superblock.compressor, self._where)
        except BaseException:
            self._fh.close()
            raise
        sb = self.superblock
        self._meta_cache: dict[int, tuple[bytes, int]] = {}
        self._meta_left = MAX_METADATA
        self._read_left = min(MAX_READ, READ_RATIO * sb.bytes_used)
        self._fragments: bytes | None = None
        self._entries: list[Entry] | None = None
        self._fill: dict[int, int] | None = None
        # the last fragment blocks decompressed: the tails of a directory's small files share
        # one, read one after another (a rootfs's package lists: 20 s of xz for 9 images)
        self._frag_cache: collections.OrderedDict[int, bytes] = collections.OrderedDict()

    def _check_claims(self, sb: Superblock) -> None:
        if sb.bytes_used > MAX_IMAGE:
            raise WolfError(
                f"{self._where}: a squashfs of {sb.bytes_used:,} bytes, more than any flash "
                f"holds ({MAX_IMAGE:,} B)",
                hint="give the rootfs of a router image",
            )
        # each inode takes at least 20 of a metadata block's 8 KiB, each block at least 3
        # bytes of the table on disk: a count beyond that is a lie the walk would believe
        table = sb.directory_table - sb.inode_table
        most = -(-table // 3) * (_METADATA_SIZE // _MIN_INODE)
        if sb.inode_count > most:
            raise self._corrupt(
                f"the superblock claims {sb.inode_count:,} inodes, its inode table of "
                f"{table:,} bytes holds at most {most:,}"
            )

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> SquashFS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- low level ---------------------------------------------------------------------

    def _corrupt(self, what: str) -> WolfError:
        return WolfError(
            f"corrupt or truncated squashfs {self._where}: {what}",
            hint="check the file against unsquashfs -s; rebuild or re-download it",
        )

    def _pread(self, pos: int, size: int) -> bytes:
        """Bytes at a filesystem position; short reads mean the file is truncated."""
        if pos < 0 or size < 0 or pos + size > self._limit():
            raise self._corrupt(f"read of {size} bytes at {pos:#x} is outside the filesystem")
        self._fh.seek(self.offset + pos)
        data = self._fh.read(size)
        if len(data) != size:
            raise self._corrupt(f"file ends before byte {pos + size:#x}")
        return data

    def _limit(self) -> int:
        sb = getattr(self, "superblock", None)
        return sb.bytes_used if sb else self._file_size - self.offset

    def _read_superblock(self) -> Superblock:
        self._fh.seek(self.offset)
        raw = self._fh.read(SUPERBLOCK_SIZE)
        return parse_header(
            raw, available=self._file_size - self.offset, where=self._where, offset=self.offset
        )

    def _spend(self, n: int) -> None:
        self._meta_left -= n
        if self._meta_left < 0:
            raise self._corrupt(
                f"its tables ask for more than {MAX_METADATA:,} bytes of metadata to be read "
                "(a rootfs of 50,000 files reads about 4 MiB)"
            )

    def _metablock(self, pos: int) -> tuple[bytes, int]:
        """The metadata block at pos, uncompressed, and the position of the next one."""
        hit = self._meta_cache.get(pos)
        if hit is not None:
            return hit
        (header,) = struct.unpack("<H", self._pread(pos, 2))
        size = header & 0x7FFF
        raw = self._pread(pos + 2, size)
        if header & _UNCOMPRESSED_META:
            data = raw
        else:
            try:
                data = self._decompress(raw, _METADATA_SIZE)
            except Exception as e:  # lzma.LZMAError, zlib.error, zstd.ZstdError
                raise self._corrupt(f"metadata block at {pos:#x} does not decompress ({e})") from e
        if len(data) > _METADATA_SIZE:
            raise self._corrupt(f"metadata block at {pos:#x} is larger than 8 KiB")
        if not data:  # mksquashfs writes none; a run of them would be walked 2 bytes at a time
            raise self._corrupt(f"metadata block at {pos:#x} is empty")
        self._spend(len(data))
        out = (data, pos + 2 + size)
        self._meta_cache[pos] = out
        return out

    def _metaread(self, block: int, offset: int, size: int) -> tuple[bytes, int, int]:
        """size bytes of a metadata table starting at (block, offset), which may cross
        blocks; returns the bytes and the (block, offset) right after them."""
        parts: list[bytes] = []
        need = size
        self._spend(size)  # before the read: a claimed size is what a listing or list costs
        while need > 0:
            self._spend(_VISIT)
            data, nxt = self._metablock(block)
            if offset > len(data) or (offset == len(data) and nxt >= self.superblock.bytes_used):
                raise self._corrupt(f"metadata read past the end of its table at {block:#x}")
            take = data[offset : offset + need]
            parts.append(take)
            need -= len(take)
            offset += len(take)
            if offset >= len(data) and need > 0:
                block, offset = nxt, 0
        return b"".join(parts), block, offset

    # --- tables ------------------------------------------------------------------------

    def _fragment_table(self) -> bytes:
        """The fragment table's 16-byte entries (read from it one at a time: _fragment)."""
        if self._fragments is not None:
            return self._fragments
        sb = self.superblock
        raw = b""
        if sb.fragment_count and sb.fragment_table != 0xFFFFFFFFFFFFFFFF:
            self._spend(sb.fragment_count * 16)  # a count the index is read by: checked first
            nblocks = -(-sb.fragment_count * 16 // _METADATA_SIZE)
            index = struct.unpack(f"<{nblocks}Q", self._pread(sb.fragment_table, 8 * nblocks))
            raw = b"".join(self._metablock(p)[0] for p in index)
            if len(raw) < sb.fragment_count * 16:
                raise self._corrupt("fragment table is shorter than its entry count")
            raw = raw[: sb.fragment_count * 16]
        self._fragments = raw
        return raw

    def _fragment(self, e: Entry) -> tuple[int, int] | None:
        """(start, size word) of the fragment block a file's tail is in; None when the
        table has no such entry."""
        table = self._fragment_table()
        if e.fragment >= len(table) // 16:
            return None
        start, word, _unused = struct.unpack_from("<QII", table, e.fragment * 16)
        return start, word

    def _inode(self, ref: int) -> tuple[int, int, dict[str, int], bytes, tuple[int, ...]]:
        """Read the inode at a reference: (type, mode bits, fields, link target, block list)."""
        block = self.superblock.inode_table + (ref >> 16)
        offset = ref & 0xFFFF
        head, block, offset = self._metaread(block, offset, 16)
        itype, perm, _uid, _gid, _mtime, number = struct.unpack("<HHHHII", head)
        basic = itype - 7 if itype > 7 else itype
        if basic not in _FTYPE:
            raise self._corrupt(f"inode {ref:#x} has unknown type {itype}")
        mode = _FTYPE[basic] | (perm & 0o7777)
        f: dict[str, int] = {"number": number}
        target = b""
        blocks: tuple[int, ...] = ()
        if itype == 1:
            raw, block, offset = self._metaread(block, offset, 16)
            f["start"], _links, f["size"], f["offset"], _parent = struct.unpack("<IIHHI", raw)
        elif itype == 8:
            raw, block, offset = self._metaread(block, offset, 24)
            _links, f["size"], f["start"], _parent, _icount, f["offset"], _x = struct.unpack(
                "<IIIIHHI", raw
            )
        elif itype in (2, 9):
            if itype == 2:
                raw, block, offset = self._metaread(block, offset, 16)
                f["blocks_start"], f["fragment"], f["frag_offset"], f["size"] = struct.unpack(
                    "<IIII", raw
                )
            else:
                raw, block, offset = self._metaread(block, offset, 40)
                (f["blocks_start"], f["size"], _sparse, _links, f["fragment"]) = struct.unpack_from(
                    "<QQQII", raw
                )
                f["frag_offset"], _x = struct.unpack_from("<II", raw, 32)
            bs = self.superblock.block_size
            nblocks = -(-f["size"] // bs) if f["fragment"] == _NO_FRAGMENT else f["size"] // bs
            if nblocks > (self.superblock.bytes_used // 2) + 1:
                raise self._corrupt(f"inode {number} claims {nblocks} data blocks")
            raw, block, offset = self._metaread(block, offset, 4 * nblocks)
            blocks = struct.unpack(f"<{nblocks}I", raw)
        elif itype in (3, 10):
            raw, block, offset = self._metaread(block, offset, 8)
            _links, tsize = struct.unpack("<II", raw)
            if tsize > 4096:
                raise self._corrupt(f"symlink inode {number} has a {tsize}-byte target")
            target, block, offset = self._metaread(block, offset, tsize)
            f["size"] = tsize
        return itype, mode, f, target, blocks

    def _dir_entries(self, start: int, offset: int, size: int) -> Iterator[tuple[str, int, int]]:
        """(name, inode reference, type) of each entry of a directory listing."""
        remaining = size - 3  # squashfs stores the listing size plus 3
        if remaining <= 0:
            return
        raw, _b, _o = self._metaread(self.superblock.directory_table + start, offset, remaining)
        pos = 0
        while pos + 12 <= len(raw):
            count, iblock, _base = struct.unpack_from("<III", raw, pos)
            pos += 12
            if count >= 256:
                raise self._corrupt("directory header claims more than 256 entries")
            for _ in range(count + 1):
                if pos + 8 > len(raw):
                    raise self._corrupt("directory entry runs past its listing")
                ioff, _delta, itype, nsize = struct.unpack_from("<HhHH", raw, pos)
                pos += 8
                name = raw[pos : pos + nsize + 1].decode("utf-8", "surrogateescape")
                pos += nsize + 1
                if not name or "/" in name or name in (".", ".."):
                    raise self._corrupt(f"bad directory entry name {name!r}")
                yield name, (iblock << 16) | ioff, itype

    # --- public ------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """Every entry, depth-first in directory order (as unsquashfs lists them); the root
        directory itself is ``/``."""
        if self._entries is not None:
            return self._entries
        out: list[Entry] = []
        dirs: set[int] = set()  # directory inodes listed: each once, or the tree loops
        paths = 0
        stack: list[tuple[str, int]] = [("/", self.superblock.root_inode)]
        while stack:
            path, ref = stack.pop()
            entry, dirinfo = self._entry(path, ref)
            out.append(entry)
            if dirinfo is None:
                continue
            if ref in dirs or len(dirs) >= self.superblock.inode_count:
                raise self._corrupt(f"the directory tree loops: {path[:200]} is listed again")
            dirs.add(ref)
            children = list(self._dir_entries(*dirinfo))
            base = "" if path == "/" else path
            if len(out) + len(stack) + len(children) > MAX_ENTRIES:
                raise self._corrupt(f"more than {MAX_ENTRIES:,} entries")
            for name, cref, _t in reversed(children):
                child = f"{base}/{name}"
                paths += len(child)
                if len(child) > MAX_PATH or paths > MAX_PATHS:
                    raise self._corrupt(
                        f"paths longer than {MAX_PATH} bytes or {MAX_PATHS:,} bytes together"
                    )
                stack.append((child, cref))
        self._entries = out
        return out

    def _entry(self, path: str, ref: int) -> tuple[Entry, tuple[int, int, int] | None]:
        itype, mode, f, target, blocks = self._inode(ref)
        if itype in (1, 8):
            return Entry(path, mode, 0, f["number"]), (f["start"], f["offset"], f["size"])
        if itype in (2, 9):
            return Entry(
                path, mode, f["size"], f["number"],
                blocks_start=f["blocks_start"], block_sizes=blocks,
                fragment=f["fragment"], fragment_offset=f["frag_offset"],
            ), None  # fmt: skip
        if itype in (3, 10):
            link = target.decode("utf-8", "surrogateescape")
            return Entry(path, mode, f["size"], f["number"], link_target=link), None
        return Entry(path, mode, 0, f["number"]), None

    def files(self) -> list[Entry]:
        return [e for e in self.entries() if e.is_file]

    def glob(self, patterns: tuple[str, ...] | list[str]) -> list[Entry]:
        """Regular files whose name matches one of the shell patterns (symlinks excluded:
        libfoo.so -> libfoo.so.1 is the same bytes once)."""
        return [e for e in self.files() if any(fnmatch.fnmatchcase(e.name, p) for p in patterns)]

    def lookup(self, path: str) -> Entry:
        for e in self.entries():
            if e.path == path:
                return e
        raise WolfError(f"{path} is not in the squashfs {self._where}")

    def read(self, entry: Entry | str) -> bytes:
        """A regular file's bytes."""
        e = self.lookup(entry) if isinstance(entry, str) else entry
        if not e.is_file:
            raise WolfError(f"{e.path} in {self._where} is not a regular file")
        # A sparse block costs the image 4 bytes, a block of zeros a few dozen: the size a
        # file claims is checked before any of it is made.
        limit = min(MAX_FILE, self._read_left)
        if e.size > limit:
            raise WolfError(
                f"{e.path} in {self._where} claims {e.size:,} bytes; a file read from this "
                f"filesystem may have {limit:,} ({READ_RATIO} times its "
                f"{self.superblock.bytes_used:,} bytes, at most {MAX_FILE:,} a file and "
                f"{MAX_READ:,} in all)",
                hint="sparse or zero blocks: the image is crafted or corrupt",
            )
        self._read_left -= e.size
        bs = self.superblock.block_size
        parts: list[bytes] = []
        pos = e.blocks_start
        left = e.size
        for word in e.block_sizes:
            want = min(bs, left)
            size = word & ~_UNCOMPRESSED_DATA
            if size == 0:  # a sparse block: zeros, stored as nothing
                parts.append(bytes(want))
            else:
                parts.append(self._data_block(pos, word, want))
                pos += size
            left -= want
        if left > 0:
            parts.append(self._fragment_bytes(e, left))
        data = b"".join(parts)
        if len(data) != e.size:
            raise self._corrupt(f"{e.path} reads as {len(data)} bytes, its inode says {e.size}")
        return data

    def _data_block(self, pos: int, word: int, want: int) -> bytes:
        size = word & ~_UNCOMPRESSED_DATA
        raw = self._pread(pos, size)
        if word & _UNCOMPRESSED_DATA:
            return raw[:want]
        try:
            data = self._decompress(raw, self.superblock.block_size)
        except Exception as e:
            raise self._corrupt(f"data block at {pos:#x} does not decompress ({e})") from e
        return data[:want]

    def _fragment_bytes(self, e: Entry, length: int) -> bytes:
        data = self._frag_cache.get(e.fragment)
        if data is None:
            frag = self._fragment(e)
            if frag is None:
                count = len(self._fragment_table()) // 16
                raise self._corrupt(f"{e.path} refers to fragment {e.fragment} of {count}")
            start, word = frag
            data = self._data_block(start, word, self.superblock.block_size)
            self._frag_cache[e.fragment] = data
            if len(self._frag_cache) > _FRAGMENTS_KEPT:
                self._frag_cache.popitem(last=False)
        else:
            self._frag_cache.move_to_end(e.fragment)
        chunk = data[e.fragment_offset : e.fragment_offset + length]
        if len(chunk) != length:
            raise self._corrupt(f"{e.path}: its tail lies outside fragment {e.fragment}")
        return chunk

    def _tail(self, e: Entry) -> int:
        return e.size - len(e.block_sizes) * self.superblock.block_size

    def stored_size(self, e: Entry) -> int:
        """Bytes the file takes inside the image: its compressed data blocks plus its share
        of a fragment block (the fragment's on-disk size split over the tails packed into it
        in proportion to their lengths). Hard links and duplicates count once per entry."""
        total = sum(w & ~_UNCOMPRESSED_DATA for w in e.block_sizes)
        tail = self._tail(e)
        if e.fragment != _NO_FRAGMENT and tail > 0:
            frag = self._fragment(e)
            if frag is not None:
                on_disk = frag[1] & ~_UNCOMPRESSED_DATA
                fill = self._fragment_fill().get(e.fragment, tail)
                total += round(on_disk * tail / max(fill, tail))
        return total

    def _fragment_fill(self) -> dict[int, int]:
        """Uncompressed bytes packed into each fragment (distinct tails, by offset)."""
        if self._fill is None:
            seen: dict[int, dict[int, int]] = {}
            for e in self.files():
                if e.fragment != _NO_FRAGMENT and self._tail(e) > 0:
                    seen.setdefault(e.fragment, {})[e.fragment_offset] = self._tail(e)
            self._fill = {k: sum(v.values()) for k, v in seen.items()}
        return self._fill


def superblock(path: Path, offset: int = 0) -> Superblock:
    """Only the superblock (cheap): bytes_used is the rootfs size."""
    with SquashFS(path, offset) as fs:
        return fs.superblock
