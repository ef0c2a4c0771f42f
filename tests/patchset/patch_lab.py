"""A small tree beside a victim directory, for hostile inputs to the patch engine
(tests/patchset/test_hostile_patches.py, bench/hostile_patches.py): what a case aims at, and
the oracles that do not depend on the engine (lstat of everything beside the tree, git apply
on a copy, the secret's bytes)."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

PATCH = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-hello\n+bye\n"
BIG = 1 << 26  # a file a case made sparse (20 GB of nothing) is judged by its size


@dataclass
class Lab:
    top: Path  # all of it but the tree, --into, TMPDIR and the figures is the victim
    secret: bytes = b""

    @property
    def tree(self) -> Path:
        return self.top / "tree"

    @property
    def patches(self) -> Path:
        return self.top / "patches"

    @property
    def into(self) -> Path:
        return self.top / "into"

    @property
    def tmp(self) -> Path:
        return self.top / "tmp"

    @property
    def stats(self) -> Path:
        return self.top / "stats"

    @property
    def victim(self) -> Path:
        return self.top / "victim"


def make(lab: Lab) -> Lab:
    """A fresh tree (f, include/target.mk for --refresh) and beside it a victim directory: a
    file, a FIFO, a socket, a link to a directory, a package directory, the secret; and a
    directory named t, as the engine's staging directory was."""
    shutil.rmtree(lab.top, ignore_errors=True)
    (lab.tree / "include").mkdir(parents=True)
    (lab.tree / "include" / "target.mk").write_text("# a stand-in OpenWrt tree\n")
    (lab.tree / "f").write_text("hello\n")
    v = lab.victim
    (v / "dir").mkdir(parents=True)
    (v / "dir" / "inside").write_text("precious\n")
    (v / "file").write_text("precious\n")
    (v / "pkgdir").mkdir()
    (v / "pkgdir" / "Makefile").write_text("hello\n")
    special(v / "fifo", "fifo")
    special(v / "sock", "socket")
    (v / "dirlink").symlink_to(v / "dir")
    (lab.top / "t").mkdir()
    (lab.top / "t" / "f").write_text("hello\n")
    lab.secret = f"SECRET-{os.urandom(12).hex()}".encode()
    (v / "secret").write_bytes(lab.secret + b"\n")
    lab.tmp.mkdir()
    series(lab, {"0001-f.patch": PATCH})
    return lab


def special(p: Path, kind: str) -> None:
    """A FIFO, a socket, a directory, a link to /dev/zero or a sparse 20 GB file at p (a
    victim, or what stands where the engine wants a file)."""
    if kind == "/dev/zero":
        p.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(p))
    elif kind == "directory":
        p.mkdir()
    else:
        with p.open("wb") as fh:
            fh.truncate(20 << 30)


def series(lab: Lab, patches: dict[str, str | bytes], text: str | bytes | None = None) -> None:
    """The patches and a series file listing them (or ``text`` as the series file)."""
    lab.patches.mkdir(exist_ok=True)
    for name, body in patches.items():
        (lab.patches / name).write_bytes(body.encode() if isinstance(body, str) else body)
    listing = text if text is not None else "".join(f"{n}\n" for n in patches)
    (lab.patches / "series").write_bytes(listing.encode() if isinstance(listing, str) else listing)


def _body(p: Path, st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "-> " + os.readlink(p)
    if stat.S_ISREG(st.st_mode):
        big = st.st_size >= BIG
        return f"size {st.st_size}" if big else hashlib.sha256(p.read_bytes()).hexdigest()
    return ""


def outside(lab: Lab) -> dict[str, tuple[int, str]]:
    """Every entry of the lab but the tree, --into, TMPDIR and the figures: its mode and its
    bytes' sha256 or link target."""
    out: dict[str, tuple[int, str]] = {}
    skip = (lab.tree, lab.into, lab.tmp, lab.stats)
    for dirpath, dirnames, filenames in os.walk(lab.top):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for p in (here / n for n in dirnames + filenames):
            if p not in skip:
                st = p.lstat()
                out[str(p.relative_to(lab.top))] = (st.st_mode, _body(p, st))
    return out


def tree_state(root: Path) -> dict[str, tuple[int, str]]:
    """Every entry of a tree: its type and its bytes' sha256 or link target."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), _body(p, st))
    return out


def git_oracle(lab: Lab, patch: bytes) -> dict[str, tuple[int, str]]:
    """What git apply itself makes of the patch, on a copy of the tree."""
    copy = lab.top.with_name(lab.top.name + ".oracle")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(lab.tree, copy, symlinks=True)
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(copy.parent)}
    subprocess.run(["git", "apply", "-p1", "-"], input=patch, cwd=copy, check=True,
                   capture_output=True, env=env)  # fmt: skip
    state = tree_state(copy)
    shutil.rmtree(copy)
    return state


def secret_holders(lab: Lab) -> bytes:
    """The bytes of every regular file of the tree and of --into (never through a link)."""
    out = []
    for d in (lab.tree, lab.into):
        for f in d.rglob("*") if d.exists() else []:
            if not f.is_symlink() and f.is_file() and f.stat().st_size < BIG:
                out.append(f.read_bytes())
    return b"".join(out)
