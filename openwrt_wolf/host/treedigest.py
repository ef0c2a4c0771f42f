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
import tarfile
from pathlib import Path, PurePosixPath

from ..errors import WolfError

MODE_FILE, MODE_EXEC, MODE_LINK = "100644", "100755", "120000"
CHUNK = 1 << 20


def _b(text: str) -> bytes:
    """A name as the archive's bytes (tarfile decodes undecodable bytes as surrogates)."""
    return text.encode("utf-8", "surrogateescape")


def _relative(name: str, where: Path) -> tuple[str, str]:
    """(top folder, path below it) of a member name; refuses names that escape the tree."""
    p = PurePosixPath(name.removeprefix("./"))
    if p.is_absolute() or ".." in p.parts or "\n" in name:
        raise WolfError(f"{where}: refused member {name!r} (absolute, '..' or a newline)")
    if not p.parts:
        return "", ""
    return p.parts[0], "/".join(p.parts[1:])


def tree_sha256(archive: Path) -> str:
    """The tree digest of a tar archive (.tar, .tar.gz, .tar.bz2, .tar.xz)."""
    if not archive.is_file():  # a FIFO or device would block or never end
        raise WolfError(f"{archive} is not a regular file")
    entries: dict[bytes, str] = {}
    tops: set[str] = set()
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            for m in tar:
                top, rel = _relative(m.name, archive)
                if top:
                    tops.add(top)
                if m.isdir() or not rel:
                    if m.isdir():
                        continue
                    raise WolfError(f"{archive}: member {m.name!r} is outside a top folder")
                if m.issym():
                    line = f"{MODE_LINK} {hashlib.sha256(_b(m.linkname)).hexdigest()} {rel}"
                elif m.isreg():
                    h = hashlib.sha256()
                    fh = tar.extractfile(m)
                    assert fh is not None  # a regular member always has a file object
                    while chunk := fh.read(CHUNK):
                        h.update(chunk)
                    mode = MODE_EXEC if m.mode & 0o111 else MODE_FILE
                    line = f"{mode} {h.hexdigest()} {rel}"
                else:
                    raise WolfError(
                        f"{archive}: refused member {m.name!r} (a hard link, device or FIFO)"
                    )
                key = _b(rel)
                if key in entries:
                    raise WolfError(f"{archive}: {rel!r} is in the archive twice")
                entries[key] = line
    except (tarfile.TarError, EOFError, OSError, UnicodeError) as e:
        raise WolfError(f"{archive}: not a readable tar archive ({e})") from None
    if len(tops) != 1 or not entries:
        raise WolfError(f"{archive}: expected one top folder holding files, found {len(tops)}")
    h = hashlib.sha256()
    for key in sorted(entries):
        h.update(_b(entries[key]) + b"\n")
    return h.hexdigest()
