"""Edits to an OpenWrt tree that a substituted source needs, each one recorded.

OpenWrt checks every file in dl/ against the hash its Makefile names (include/download.mk's
check_download_integrity; a mismatch makes download.pl run again, which fails offline). So a
file with other bytes needs its Makefile's hash changed, as OpenWrt's own `make
<dir>/check FIXUP=1` (scripts/fixup-makefile.pl) does it, and another version needs
PKG_VERSION (git: PKG_SOURCE_DATE and PKG_SOURCE_VERSION) changed too. A tool with no source
at all gets its Makefile replaced by one that installs Debian's binary
(templates/host-binary.mk.j2). Every edited file's original is kept under
<tree>/.wolf-sources/orig/ and each edit is listed in the substitutions file, so nothing is
silent and everything can be undone.

The tree is written as a directory we own (files/outputs.py Owned): .wolf-sources and what
runs keep in it are real folders of the tree, no link is followed on the way to a file we
write, move or remove, and a link at a tree file's own name is replaced, never written
through (a tree from elsewhere may plant one: .wolf-sources/orig linked to /etc made
`--revert` move /etc's files into the tree).

A file is only rewritten when its content changes: OpenWrt's stamps hash the package
directory's paths and mtimes, and an unchanged rewrite would rebuild the package."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from ...errors import WolfError
from ...files import outputs
from ...trust import untrusted

BOOKKEEPING = ".wolf-sources"
ORIG_DIR = f"{BOOKKEEPING}/orig"
ADDED = ".wolf-added"  # marker beside the originals: this file was not in the tree
KEPT = ("orig", "work", "debian", ".lock")  # what runs keep in BOOKKEEPING
MAX_KEPT = 64 << 20  # a kept original (a Makefile, a patch) is far smaller


@dataclass(frozen=True)
class Edit:
    """One change to one file of the tree."""

    path: str  # relative to the tree
    what: str  # e.g. "PKG_HASH", "PKG_VERSION", "patch hunks", "Makefile"
    old: str
    new: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "what": self.what, "old": self.old, "new": self.new}

    @classmethod
    def from_dict(cls, d: dict[str, str]) -> Edit:
        return cls(str(d["path"]), str(d["what"]), str(d["old"]), str(d["new"]))


def owned(tree: Path) -> outputs.Owned:
    """The tree as a directory we edit, checked: .wolf-sources and what runs keep in it are
    no links (one line naming it, before anything is read from or written there)."""
    o = outputs.Owned(tree, "the OpenWrt tree we edit")
    for rel in (BOOKKEEPING, *(f"{BOOKKEEPING}/{name}" for name in KEPT)):
        o.no_link(rel)
    return o


def _is_file(st: os.stat_result | None) -> bool:
    return st is not None and stat.S_ISREG(st.st_mode)


def _keep_original(o: outputs.Owned, rel: str) -> None:
    orig = f"{ORIG_DIR}/{rel}"
    if o.no_link(orig) is None:  # a link there would be followed by the copy: refused
        o.copy(rel, orig)


def _write(tree: Path, rel: str, text: str) -> None:
    o = owned(tree)
    o.regular(rel)  # no link on the way or at its name: what is read is what is replaced
    if (tree / rel).read_text() != text:
        _keep_original(o, rel)
        o.write_text(rel, text)


def hash_files(tree: Path, dirs: tuple[str, ...], old: str) -> list[str]:
    """The tree files (relative) that name the hash ``old``: the asking directories'
    Makefiles and the .mk files beside them, include/, and the kernel version files."""
    cands: list[Path] = []
    for d in dirs:
        cands.append(tree / d / "Makefile")
        cands += sorted((tree / d).parent.glob("*.mk"))
        cands += sorted((tree / d).glob("*.mk"))
    cands += sorted((tree / "include").glob("*.mk"))
    cands += sorted((tree / "include").glob("kernel-*"))
    cands += sorted((tree / "target/linux/generic").glob("kernel-*"))
    out = []
    for p in dict.fromkeys(cands):
        if p.is_file() and old in p.read_text(errors="replace"):
            out.append(str(p.relative_to(tree)))
    return out


def set_hash(tree: Path, dirs: tuple[str, ...], old: str, new: str) -> list[Edit]:
    """Replace the hash ``old`` with ``new`` wherever the tree names it for ``dirs``."""
    if old == new:
        return []
    files = hash_files(tree, dirs, old)
    if not files:
        done = hash_files(tree, dirs, new)
        if done:  # applied by an earlier run
            return [Edit(f, "hash", old, new) for f in done]
        raise WolfError(
            f"no Makefile of {', '.join(dirs)} names the hash {old[:12]}…",
            hint="the tree is not the one the file list was made from",
        )
    for rel in files:
        _write(tree, rel, (tree / rel).read_text().replace(old, new))
    return [Edit(f, "hash", old, new) for f in files]


def set_var(tree: Path, dirs: tuple[str, ...], var: str, old: str, new: str) -> list[Edit]:
    """``VAR:=old`` becomes ``VAR:=new`` in the asking directories' Makefiles."""
    if old == new:
        return []
    pat = re.compile(rf"^({re.escape(var)}\s*:?=\s*){re.escape(old)}\s*$", re.MULTILINE)
    donepat = re.compile(rf"^{re.escape(var)}\s*:?=\s*{re.escape(new)}\s*$", re.MULTILINE)
    edits = []
    for d in dirs:
        rel = f"{d}/Makefile"
        text = (tree / rel).read_text()
        if pat.search(text):
            _write(tree, rel, pat.sub(lambda m: m.group(1) + new, text))
        elif not donepat.search(text):
            continue
        edits.append(Edit(rel, var, old, new))
    if not edits:
        raise WolfError(
            f"no Makefile of {', '.join(dirs)} sets {var}:={old}",
            hint="this file's version is not a plain Makefile variable; substitute it by hand",
        )
    return edits


def drop_hunks(tree: Path, patch: str, target: str) -> list[Edit]:
    """Remove the parts of the tree's ``patch`` that edit ``target``."""
    path = tree / patch
    if not path.is_file():
        raise WolfError(f"{patch} is not in the tree (data/sources.toml [[edit]])")
    kept = _is_file(owned(tree).no_link(f"{ORIG_DIR}/{patch}"))  # an earlier run kept it
    src = tree / ORIG_DIR / patch if kept else path
    text = untrusted.read_bytes(src, "", MAX_KEPT).decode()
    parts = re.split(r"(?m)^(?=--- )", text)
    keep = [p for p in parts if not re.match(rf"--- (a/)?{re.escape(target)}\s", p)]
    if len(keep) == len(parts):
        return []
    _write(tree, patch, "".join(keep))
    return [Edit(patch, "patch hunks", target, "(dropped)")]


def replace_text(tree: Path, rel: str, old: str, new: str) -> list[Edit]:
    """Replace the literal ``old`` in one file of the tree (a build option the substitute's
    version spells otherwise)."""
    path = tree / rel
    if not path.is_file():
        raise WolfError(f"{rel} is not in the tree (data/sources.toml [[edit]])")
    text = path.read_text()
    if old in text:
        _write(tree, rel, text.replace(old, new))
    elif new not in text:
        raise WolfError(f"{rel} has neither {old!r} nor {new!r} (data/sources.toml [[edit]])")
    return [Edit(rel, "text", old, new)]


def remove_file(tree: Path, rel: str, why: str) -> list[Edit]:
    """Remove a file of the tree (a patch the substitute already contains)."""
    o = owned(tree)
    if _is_file(o.stat(rel)):
        _keep_original(o, rel)
        o.unlink(rel)
    elif not _is_file(o.stat(f"{ORIG_DIR}/{rel}")):
        raise WolfError(f"{rel} is not in the tree (data/sources.toml [[edit]])")
    return [Edit(rel, "removed", rel, why)]


def replace_file(tree: Path, rel: str, text: str, why: str) -> list[Edit]:
    """Replace a whole file (a tool's Makefile by the host-binary one)."""
    _write(tree, rel, text)
    return [Edit(rel, "Makefile", f"{ORIG_DIR}/{rel}", why)]


def add_file(tree: Path, rel: str, text: str, why: str) -> list[Edit]:
    """A new file in the tree (a patch for a substitute's source, which OpenWrt applies with
    the others of its directory); --revert removes it again."""
    o = owned(tree)
    marker = f"{ORIG_DIR}/{rel}{ADDED}"
    there = o.stat(rel)
    if there is not None and not _is_file(o.no_link(marker)):
        raise WolfError(f"{rel} is already in the tree (data/sources.toml [[edit]] add: new files)")
    if not _is_file(there) or (tree / rel).read_text() != text:
        o.write_text(marker, why + "\n")
        o.write_text(rel, text)
    return [Edit(rel, "added", "", why)]


def _drop_added(o: outputs.Owned, rel: str) -> bool:
    marker = f"{ORIG_DIR}/{rel}{ADDED}"
    if not _is_file(o.stat(marker)):
        return False
    o.unlink(rel)  # the entry itself; a link on its way is refused
    o.unlink(marker)
    return True


def _put_back(o: outputs.Owned, rel: str) -> bool:
    """Move a kept original back to tree/rel, never through a link: a link on the way (in
    the tree or under orig/) is refused, a tree file made a link is replaced by the original,
    and a kept "original" that is not a regular file is left alone."""
    orig = f"{ORIG_DIR}/{rel}"
    if not _is_file(o.stat(orig)):
        return False
    dest = o.stat(rel)
    if dest is not None and stat.S_ISDIR(dest.st_mode):  # not this file's place
        return False
    o.move(orig, rel)  # a rename: its mtime kept, as OpenWrt's stamps want
    return True


def revert_paths(tree: Path, rels: list[str]) -> list[str]:
    """Put back the originals of these files (those an earlier run kept), and remove the
    files an earlier run added."""
    o = owned(tree)
    return [rel for rel in dict.fromkeys(rels) if _drop_added(o, rel) or _put_back(o, rel)]


def _kept_files(tree: Path) -> list[Path]:
    """The files under ORIG_DIR (links to files too: left over, never followed); a folder
    there that is a link is not entered."""
    owned(tree)
    return sorted(p for p in (tree / ORIG_DIR).rglob("*") if p.is_file())


def kept(tree: Path) -> list[str]:
    """The files an earlier run changed or added (their originals or markers are kept)."""
    base = tree / ORIG_DIR
    return sorted({str(p.relative_to(base)).removesuffix(ADDED) for p in _kept_files(tree)})


def left_over(tree: Path) -> list[str]:
    """What `revert` could not put back: kept "originals" that are links or not regular
    files, and those whose tree path is now a directory (they stay under ORIG_DIR)."""
    base = tree / ORIG_DIR
    st = owned(tree).stat(ORIG_DIR)
    if st is None or not stat.S_ISDIR(st.st_mode):
        return []
    return sorted(
        str(p.relative_to(base)) for p in base.rglob("*") if p.is_symlink() or not p.is_dir()
    )


def revert(tree: Path) -> list[str]:
    """Put back every original kept under .wolf-sources/orig/."""
    o = owned(tree)
    base = tree / ORIG_DIR
    restored = []
    for orig in _kept_files(tree):
        rel = str(orig.relative_to(base))
        if rel.endswith(ADDED) and _drop_added(o, rel.removesuffix(ADDED)):
            restored.append(rel.removesuffix(ADDED))
            continue
        if _put_back(o, rel):
            restored.append(rel)
    return restored
