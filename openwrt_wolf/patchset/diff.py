"""A unified diff read as `git apply` reads it (git's apply.c: find_header, parse_fragment),
so the files this project stages, installs and stamps are the files git patches, no others.

- Lines end at "\\n" only. Python's splitlines() also ends them at \\r, \\v, \\f, \\x1c-\\x1e,
  \\x85, U+2028 and U+2029: an added line holding one of those and "--- a/../x" behind it was a
  file header git never saw, and the engine wrote or unlinked its path.
- A file starts at a "--- " line followed by a "+++ " line and an "@@ -" line; its hunks are
  read by their line counts, so a removed line "-- x" inside a hunk is no header.
- A name ends at a tab or a CR (git's rule: a CRLF patch names the same files; its lines keep
  their CR, so it applies only to CRLF files) and loses its first component (-p1). What is
  left is a plain path in the tree (``tree_path``): relative, no "", "." or ".." part, no
  ".git", printable, not quoted.
- What git reads and this reader does not (renames, copies, binary patches, a git header with
  no ---/+++ lines) is refused; series.py also asks git which files it reads and refuses any
  difference.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import WolfError
from ..trust import untrusted

MAX_PATCH = 16 << 20  # the biggest patch of the set is 24 kB; OpenWrt's own are below 1 MB
_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NAME_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+,=@~-]*")
# git extended header lines that make a file patch this reader does not model
_UNSUPPORTED = ("rename from ", "rename to ", "copy from ", "copy to ", "GIT binary patch",
                "Binary files ")  # fmt: skip


@dataclass(frozen=True)
class Hunk:
    old_start: int
    header: str


@dataclass(frozen=True)
class FilePatch:
    """One file's part of a patch: its path before and after (None = created/deleted)."""

    old: str | None
    new: str | None
    hunks: tuple[Hunk, ...]

    @property
    def path(self) -> str:
        return self.new or self.old or "?"


@dataclass(frozen=True)
class Patch:
    """A patch as read: its name in the series, its bytes (what git is given, so git applies
    exactly what was checked) and the files it patches."""

    name: str
    data: bytes
    files: tuple[FilePatch, ...]

    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def text(self) -> str:
        """The bytes as text for the stamp; bytes that are not UTF-8 survive the round trip."""
        return self.data.decode("utf-8", "surrogateescape")


def _shown(text: str) -> str:
    out = text if text.isprintable() else text.encode("unicode_escape", "replace").decode()
    return repr(out[:80] + ("…" if len(out) > 80 else ""))


def patch_name(name: str, where: str) -> str:
    """A patch's name in a series file or a stamp: a path below the series directory made of
    plain parts (letters, digits, ._+,=@~-; no leading dot or dash), so neither a series nor a
    stamp can name /etc/shadow or ../x, and quilt's awk never sees a quote."""
    parts = name.split("/")
    if (
        not name
        or len(name) > 1024
        or not all(_NAME_PART.fullmatch(p) and len(p) <= 255 for p in parts)
    ):
        raise WolfError(
            f"{where}: {_shown(name)} is not a patch name",
            hint="patch names are plain file names below the series directory",
        )
    return name


def tree_path(rel: str, where: str) -> str:
    """A path in the tree as a patch or a stamp names it: relative, every part a real name
    (no "", ".", "..", ".git"), printable (no control, separator or bidi character)."""
    why = ""
    if not rel:
        why = "is empty"
    elif rel.startswith('"'):
        why = "is quoted (git quotes a name holding special characters)"
    elif rel.startswith("/"):
        why = "is absolute"
    elif not rel.isprintable():
        why = "holds a control character or bytes that are not UTF-8"
    elif len(rel.encode()) > 4096 or any(len(p.encode()) > 255 for p in rel.split("/")):
        why = "is too long"
    else:
        for part in rel.split("/"):
            if part in ("", ".", ".."):
                why = f"has a {part!r} part" if part else "has an empty part"
                break
            if part.casefold() == ".git":
                why = "is inside .git"
                break
    if why:
        raise WolfError(f"{where}: file {_shown(rel)} {why}; a patch changes files inside the tree")
    return rel


def _name(field: str, strip: int, where: str) -> str | None:
    """The file a ---/+++ line names, -p``strip`` applied; None for /dev/null."""
    name = re.split(r"[\t\r]", field, maxsplit=1)[0]
    if name == "/dev/null":
        return None
    parts = name.split("/", strip)
    if len(parts) <= strip:
        raise WolfError(f"{where}: file {_shown(name)} has no {strip} leading directory to strip",
                        hint="patches are -p1 (a/ b/ prefixes)")  # fmt: skip
    return tree_path(parts[strip], where)


def _lines(data: bytes) -> list[str]:
    # "\n" alone ends a line, as for git; the last item is what follows the last "\n"
    return data.decode("utf-8", "surrogateescape").split("\n")


def parse(data: bytes, name: str, where: str = "", strip: int = 1) -> Patch:
    """Files and hunks of a unified diff, read as git apply reads it."""
    where = where or f"patch {name}"
    lines = _lines(data)
    whole = len(lines) - 1  # lines ended by "\n"
    files: list[FilePatch] = []
    git_header: int | None = None  # the line of a "diff --git" header not yet followed by ---
    i = 0
    while i < whole:
        line = lines[i]
        if line.startswith("diff --git "):
            if git_header is not None:
                raise _headerless(where, git_header)
            git_header = i
        elif git_header is not None and line.startswith(_UNSUPPORTED):
            raise WolfError(f"{where}:{i + 1}: a rename, copy or binary patch is not supported",
                            hint="patches change text files in place")  # fmt: skip
        elif (
            line.startswith("--- ")
            and i + 2 < whole
            and lines[i + 1].startswith("+++ ")
            and lines[i + 2].startswith("@@ -")
        ):
            old, new = _name(line[4:], strip, where), _name(lines[i + 1][4:], strip, where)
            if old and new and old != new:
                raise WolfError(f"{where}:{i + 1}: --- and +++ name different files "
                                f"({_shown(old)}, {_shown(new)})")  # fmt: skip
            if old is None and new is None:
                raise WolfError(f"{where}:{i + 1}: --- and +++ are both /dev/null")
            hunks, i = _hunks(lines, i + 2, whole, where)
            files.append(FilePatch(old, new, hunks))
            git_header = None
            continue
        i += 1
    if git_header is not None:
        raise _headerless(where, git_header)
    if not files:
        raise WolfError(f"{where}: no unified diff found", hint="a patch needs ---/+++ lines")
    return Patch(name, data, tuple(files))


def _headerless(where: str, line: int) -> WolfError:
    return WolfError(f"{where}:{line + 1}: a git header with no ---/+++ lines (a mode change, "
                     "rename or empty file) is not supported")  # fmt: skip


def _hunks(lines: list[str], i: int, whole: int, where: str) -> tuple[tuple[Hunk, ...], int]:
    """The hunks from line i on, each as long as its header's counts say (git's rule)."""
    hunks: list[Hunk] = []
    while i < whole and (m := _HUNK.match(lines[i])):
        hunks.append(Hunk(int(m.group(1)), lines[i]))
        old = int(m.group(2)) if m.group(2) is not None else 1
        new = int(m.group(4)) if m.group(4) is not None else 1
        start, i = i, i + 1
        while old > 0 or new > 0:
            if i >= whole:
                raise WolfError(f"{where}:{start + 1}: hunk ends before its lines do")
            kind = lines[i][:1]
            if kind in (" ", ""):
                old, new = old - 1, new - 1
            elif kind == "-":
                old -= 1
            elif kind == "+":
                new -= 1
            elif kind != "\\":
                raise WolfError(f"{where}:{i + 1}: not a line of a hunk (corrupt patch)")
            i += 1
        if old < 0 or new < 0:
            raise WolfError(f"{where}:{start + 1}: hunk has more lines than its header says")
        if i < whole and lines[i].startswith("\\ "):
            i += 1  # "\ No newline at end of file" of the hunk's last line
    return tuple(hunks), i


def read(path: Path, name: str, where: str) -> Patch:
    """A patch file: a regular file (a FIFO or /dev/zero is one error line), bounded."""
    return parse(untrusted.read_bytes(path, "patch", MAX_PATCH), name, where)
