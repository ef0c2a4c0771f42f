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

A file is only rewritten when its content changes: OpenWrt's stamps hash the package
directory's paths and mtimes, and an unchanged rewrite would rebuild the package."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ...errors import WolfError
from ...results.store import write_atomic

ORIG_DIR = ".wolf-sources/orig"
ADDED = ".wolf-added"  # marker beside the originals: this file was not in the tree


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


def _keep_original(tree: Path, rel: str) -> None:
    orig = tree / ORIG_DIR / rel
    if not orig.exists():
        orig.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / rel, orig)


def _write(tree: Path, rel: str, text: str) -> None:
    path = tree / rel
    if path.read_text() != text:
        _keep_original(tree, rel)
        write_atomic(path, text)


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
    orig = tree / ORIG_DIR / patch
    text = (orig if orig.is_file() else path).read_text()  # an earlier run kept the original
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
    path = tree / rel
    if path.is_file():
        _keep_original(tree, rel)
        path.unlink()
    elif not (tree / ORIG_DIR / rel).is_file():
        raise WolfError(f"{rel} is not in the tree (data/sources.toml [[edit]])")
    return [Edit(rel, "removed", rel, why)]


def replace_file(tree: Path, rel: str, text: str, why: str) -> list[Edit]:
    """Replace a whole file (a tool's Makefile by the host-binary one)."""
    _write(tree, rel, text)
    return [Edit(rel, "Makefile", f"{ORIG_DIR}/{rel}", why)]


def add_file(tree: Path, rel: str, text: str, why: str) -> list[Edit]:
    """A new file in the tree (a patch for a substitute's source, which OpenWrt applies with
    the others of its directory); --revert removes it again."""
    path = tree / rel
    marker = tree / ORIG_DIR / (rel + ADDED)
    if path.exists() and not marker.is_file():
        raise WolfError(f"{rel} is already in the tree (data/sources.toml [[edit]] add: new files)")
    if not path.is_file() or path.read_text() != text:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(why + "\n")
        write_atomic(path, text)
    return [Edit(rel, "added", "", why)]


def _drop_added(tree: Path, rel: str) -> bool:
    marker = tree / ORIG_DIR / (rel + ADDED)
    if not marker.is_file():
        return False
    _inside(tree, rel)
    (tree / rel).unlink(missing_ok=True)
    marker.unlink()
    return True


def _inside(tree: Path, rel: str) -> None:
    if not (tree / rel).parent.resolve().is_relative_to(tree.resolve()):
        raise WolfError(f"{rel}: its folder leads out of the tree {tree}")


def _put_back(tree: Path, orig: Path, rel: str) -> bool:
    """Copy a kept original back to tree/rel, never through a link: a tree file or folder
    made a symbolic link to somewhere else is not followed out of the tree (the link itself is
    replaced), and a kept "original" that is not a regular file is left alone."""
    if orig.is_symlink() or not orig.is_file():
        return False
    dest = tree / rel
    _inside(tree, rel)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink():
        dest.unlink()
    elif dest.is_dir():  # copy2 would put the file inside it: not this file's place
        return False
    shutil.copy2(orig, dest)
    orig.unlink()
    return True


def revert_paths(tree: Path, rels: list[str]) -> list[str]:
    """Put back the originals of these files (those an earlier run kept), and remove the
    files an earlier run added."""
    base = tree / ORIG_DIR
    done = []
    for rel in dict.fromkeys(rels):
        orig = base / rel
        if _drop_added(tree, rel) or _put_back(tree, orig, rel):
            done.append(rel)
    return done


def kept(tree: Path) -> list[str]:
    """The files an earlier run changed or added (their originals or markers are kept)."""
    base = tree / ORIG_DIR
    rels = (str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())
    return sorted({r.removesuffix(ADDED) for r in rels})


def left_over(tree: Path) -> list[str]:
    """What `revert` could not put back: kept "originals" that are links or not regular
    files, and those whose tree path is now a directory (they stay under ORIG_DIR)."""
    base = tree / ORIG_DIR
    if not base.is_dir():
        return []
    return sorted(
        str(p.relative_to(base)) for p in base.rglob("*") if p.is_symlink() or not p.is_dir()
    )


def revert(tree: Path) -> list[str]:
    """Put back every original kept under .wolf-sources/orig/."""
    base = tree / ORIG_DIR
    restored = []
    for orig in sorted(p for p in base.rglob("*") if p.is_file()):
        rel = str(orig.relative_to(base))
        if rel.endswith(ADDED) and _drop_added(tree, rel.removesuffix(ADDED)):
            restored.append(rel.removesuffix(ADDED))
            continue
        if _put_back(tree, orig, rel):
            restored.append(rel)
    return restored
