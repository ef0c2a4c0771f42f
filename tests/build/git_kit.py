"""Git repositories that try to make git run something when they are packed as a source
(build/sources/gitrepo.py), and a small OpenWrt-like tree whose one package is fetched by
git, for `sources --tree T --sources DIR` (tests/build/test_sources_git_hostile.py and
bench/hostile_git.py).

Each hostile repository is made by ``HOSTILE[kind](top, marker)``: it commits the same files
as a plain repository (``FILES``) and, in its own config, hooks or attributes, asks git to
create ``marker``: the oracle that something of the repository ran. ``REFUSED`` makes
repositories whose git directory or objects are elsewhere (a .git file or link, borrowed
objects, a link or FIFO among the objects)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

FILES = {"a.txt": b"hello\n", "sub/b.txt": b"b\n", "run.sh": b"#!/bin/sh\n"}
WHEN = 1_700_000_000


def git(cwd: Path, *args: str, check: bool = True, binary: bool = False) -> Any:
    """git as a user runs it, with no system or global config of this machine: its output
    (str, or bytes with ``binary``)."""
    env = {"GIT_AUTHOR_DATE": f"@{WHEN} +0000", "GIT_COMMITTER_DATE": f"@{WHEN} +0000",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(cwd),
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}  # fmt: skip
    return subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd,
                          check=check, capture_output=True, text=not binary, env=env,
                          timeout=120).stdout  # fmt: skip


def plain(top: Path, extra: dict[str, bytes] | None = None) -> Path:
    """A checkout at ``top`` with FILES (run.sh executable, link -> a.txt) committed."""
    top.mkdir(parents=True)
    git(top, "init", "-q", "-b", "main")
    for name, data in {**FILES, **(extra or {})}.items():
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_bytes(data)
    (top / "run.sh").chmod(0o755)
    (top / "link").symlink_to("a.txt")
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "files")
    return top


def sign_head(top: Path) -> str:
    """HEAD replaced by the same commit with a (made-up) PGP signature: git verifies one by
    running gpg.program. Returns the new commit."""
    tree = git(top, "rev-parse", "HEAD^{tree}").strip()
    sig = "-----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----"
    who = f"t <t@t> {WHEN} +0000"
    text = f"tree {tree}\nauthor {who}\ncommitter {who}\ngpgsig {sig}\n\nfiles\n"
    commit = subprocess.run(["git", "hash-object", "-t", "commit", "-w", "--stdin"], cwd=top,
                            input=text, capture_output=True, text=True, check=True,
                            timeout=60).stdout.strip()  # fmt: skip
    git(top, "update-ref", "HEAD", commit)
    return commit


def _script(marker: Path, then: str = "cat") -> str:
    return f"touch {marker}; {then}"


def hook_script(where: Path, marker: Path) -> Path:
    """An executable that creates ``marker`` (a hook, a signature program)."""
    p = where / "creates-marker"
    p.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    p.chmod(0o755)
    return p


def _hook_dir(top: Path, marker: Path) -> Path:
    hooks = top.parent / f"{top.name}-hooks"
    hooks.mkdir()
    for name in ("post-checkout", "pre-commit", "post-merge", "reference-transaction",
                 "fsmonitor-watchman", "pre-auto-gc", "post-index-change"):  # fmt: skip
        (hooks / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / name).chmod(0o755)
    return hooks


def smudge_info_attributes(top: Path, marker: Path) -> Path:
    """.git/info/attributes: `* filter=x`, its smudge and clean in .git/config."""
    plain(top)
    (top / ".git" / "info" / "attributes").write_text("* filter=x\n")
    git(top, "config", "filter.x.smudge", _script(marker))
    git(top, "config", "filter.x.clean", _script(marker))
    git(top, "config", "filter.x.required", "true")
    return top


def process_filter(top: Path, marker: Path) -> Path:
    """A long-running filter driver (filter.x.process), from .git/info/attributes."""
    plain(top)
    (top / ".git" / "info" / "attributes").write_text("* filter=x\n")
    git(top, "config", "filter.x.process", _script(marker, "exit 1"))
    git(top, "config", "filter.x.required", "true")
    return top


def committed_gitattributes(top: Path, marker: Path) -> Path:
    """A committed .gitattributes names the filter; .git/config defines it."""
    plain(top, {".gitattributes": b"* filter=x\n"})
    git(top, "config", "filter.x.smudge", _script(marker))
    return top


def bare_smudge(top: Path, marker: Path) -> Path:
    """A bare repository (given as <dir>/<project>.git) with the filter in its own config
    and info/attributes, and hooks."""
    work = plain(top.parent / f".{top.name}.work")
    git(top.parent, "clone", "-q", "--bare", str(work), str(top))
    shutil.rmtree(work)
    (top / "info").mkdir(exist_ok=True)
    (top / "info" / "attributes").write_text("* filter=x\n")
    git(top, "config", "filter.x.smudge", _script(marker))
    git(top, "config", "core.hooksPath", str(_hook_dir(top, marker)))
    return top


def hooks_and_fsmonitor(top: Path, marker: Path) -> Path:
    """Hooks (in .git/hooks and core.hooksPath), core.fsmonitor, an external diff, a
    textconv and an include of a config that sets one more filter."""
    plain(top, {".gitattributes": b"*.txt diff=t filter=y\n"})
    hooks = _hook_dir(top, marker)
    for p in hooks.iterdir():
        shutil.copy2(p, top / ".git" / "hooks" / p.name)
    git(top, "config", "core.hooksPath", str(hooks))
    git(top, "config", "core.fsmonitor", str(hooks / "fsmonitor-watchman"))
    git(top, "config", "diff.external", str(hooks / "post-checkout"))
    git(top, "config", "diff.t.textconv", _script(marker))
    inc = top.parent / f"{top.name}-include"
    inc.write_text(f'[filter "y"]\n\tsmudge = {_script(marker)}\n')
    git(top, "config", "include.path", str(inc))
    return top


def promisor_ssh(top: Path, marker: Path) -> Path:
    """A partial clone lacking a blob, whose promisor remote is reached by core.sshCommand:
    git fetches the blob when it archives (OpenWrt's GitHub snapshots lack big blobs)."""
    plain(top, {"big.bin": b"big\n"})
    blob = git(top, "rev-parse", "HEAD:big.bin").strip()
    (top / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    for key, value in (("core.repositoryformatversion", "1"),
                       ("extensions.partialClone", "origin"),
                       ("remote.origin.url", "ssh://wolf.invalid/x.git"),
                       ("remote.origin.promisor", "true"),
                       ("core.sshCommand", _script(marker, "false")),
                       ("core.gitProxy", _script(marker, "false"))):  # fmt: skip
        git(top, "config", key, value)
    return top


def fsmonitor_submodule(top: Path, marker: Path) -> Path:
    """A project whose submodule's repository has core.fsmonitor and a smudge filter: the
    submodule is checked out (read-tree, checkout-index), which asks the fsmonitor. The
    submodule's repository is ``lib`` beside ``top`` (its URL's last part)."""
    lib = plain(top.parent / "lib")
    hooks = _hook_dir(lib, marker)
    git(lib, "config", "core.fsmonitor", str(hooks / "fsmonitor-watchman"))
    (lib / ".git" / "info" / "attributes").write_text("* filter=x\n")
    git(lib, "config", "filter.x.smudge", _script(marker))
    plain(top)
    git(top, "submodule", "add", "-q", str(lib), "deps/lib")
    git(top, "commit", "-q", "-m", "lib")
    return top


HOSTILE: dict[str, Callable[[Path, Path], Path]] = {
    "info/attributes smudge": smudge_info_attributes,
    "filter process": process_filter,
    "committed .gitattributes": committed_gitattributes,
    "bare repository": bare_smudge,
    "hooks and fsmonitor": hooks_and_fsmonitor,
    "promisor sshCommand": promisor_ssh,
    "submodule fsmonitor": fsmonitor_submodule,
}


# --- repositories whose git directory or objects are elsewhere: refused -----------------------


def git_file(top: Path, elsewhere: Path) -> Path:
    """A checkout whose .git is a file naming a git directory elsewhere."""
    plain(top)
    shutil.move(top / ".git", elsewhere)
    (top / ".git").write_text(f"gitdir: {elsewhere}\n")
    return top


def git_link(top: Path, elsewhere: Path) -> Path:
    plain(top)
    shutil.move(top / ".git", elsewhere)
    (top / ".git").symlink_to(elsewhere)
    return top


def alternates(top: Path, elsewhere: Path) -> Path:
    """A clone that borrows every object from a repository elsewhere (clone --shared)."""
    plain(elsewhere)
    git(top.parent, "clone", "-q", "--shared", str(elsewhere), str(top))
    return top


def objects_link(top: Path, elsewhere: Path) -> Path:
    """A loose-object folder that is a link to another repository's."""
    plain(top)
    objects = top / ".git" / "objects"
    d = next(p for p in sorted(objects.iterdir()) if len(p.name) == 2)
    shutil.move(d, elsewhere)
    d.symlink_to(elsewhere)
    return top


def fifo_object(top: Path, elsewhere: Path) -> Path:
    """A loose object that is a FIFO: git opening it would wait for a writer for ever."""
    plain(top)
    blob = git(top, "rev-parse", "HEAD:a.txt").strip()
    obj = top / ".git" / "objects" / blob[:2] / blob[2:]
    obj.unlink()
    os.mkfifo(obj)
    return top


def fifo_head(top: Path, elsewhere: Path) -> Path:
    plain(top)
    (top / ".git" / "HEAD").unlink()
    os.mkfifo(top / ".git" / "HEAD")
    return top


REFUSED: dict[str, Callable[[Path, Path], Path]] = {
    ".git file": git_file,
    ".git link": git_link,
    "objects/info/alternates": alternates,
    "objects folder a link": objects_link,
    "FIFO object": fifo_object,
    "FIFO HEAD": fifo_head,
}


# --- oracles ------------------------------------------------------------------------------


def committed(
    gitdir: Path, rev: str = "HEAD", lacking: tuple[str, ...] = ()
) -> dict[str, tuple[str, bytes]]:
    """What the commit holds, read by the test's own git as objects (ls-tree, cat-file: no
    filter, attribute or hook applies): path -> (kind, bytes or link target), .gitmodules
    and .gitattributes included, submodules not; ``lacking``: blobs the repository lacks,
    left out (asking for one would fetch it from the promisor remote)."""
    env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "PATH": "/usr/bin:/bin"}
    run = ["git", "--git-dir", str(gitdir)]
    out = subprocess.run([*run, "ls-tree", "-r", "-z", rev], check=True, capture_output=True,
                         env=env, timeout=60).stdout  # fmt: skip
    files = {}
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, _kind, sha = meta.split()
        if mode == b"160000" or path.decode() in lacking:
            continue
        data = subprocess.run([*run, "cat-file", "blob", sha.decode()], check=True,
                              capture_output=True, env=env, timeout=60).stdout  # fmt: skip
        kind = "l" if mode == b"120000" else "x" if mode == b"100755" else "f"
        files[path.decode()] = (kind, data)
    return files


def unpacked(top: Path) -> dict[str, tuple[str, bytes]]:
    """A tree on disk as committed() shows a commit: files and links (folders left out)."""
    files = {}
    for p in sorted(top.rglob("*")):
        if p.is_symlink():
            files[str(p.relative_to(top))] = ("l", os.readlink(p).encode())
        elif p.is_file():
            x = p.stat().st_mode & stat.S_IXUSR
            files[str(p.relative_to(top))] = ("x" if x else "f", p.read_bytes())
    return files


# --- a tree whose one package comes from git ------------------------------------------------

PKG_MAKEFILE = """PKG_NAME:=x
PKG_VERSION:=2023.11.14~{short}
PKG_SOURCE_PROTO:=git
PKG_SOURCE_URL:=https://wolf.invalid/{project}.git
PKG_SOURCE_VERSION:={commit}
PKG_SOURCE_DATE:=2023-11-14
PKG_SOURCE:=x-$(PKG_VERSION).tar.zst
PKG_MIRROR_HASH:={hash}

download:
\t$(SCRIPT_DIR)/download.pl "$(DL_DIR)" "$(PKG_SOURCE)" "$(PKG_MIRROR_HASH)" "" \
"$(PKG_SOURCE_URL)"

var.%:
\t@echo "$*='$($*)'"
"""


def mini_tree(top: Path, project: str, commit: str, pin: str = "0" * 64) -> Path:
    """What `sources --tree` reads of an OpenWrt tree (its make download, the package's
    variables through rules.mk's var.X) with one package, ``x``, packed from the git
    repository of ``project`` at ``commit`` (one it lacks: the newest is substituted)."""
    for rel in ("include/target.mk", "config/Config-build.in", "rules.mk", "tools/Makefile",
                "tmp/.packagedeps", ".config"):  # fmt: skip
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_text("")
    (top / "scripts").mkdir()
    (top / "Makefile").write_text("download:\n\t$(MAKE) -C package/x download\n")
    pkg = top / "package" / "x"
    pkg.mkdir(parents=True)
    text = PKG_MAKEFILE.format(short=commit[:8], project=project, commit=commit, hash=pin)
    (pkg / "Makefile").write_text(text)
    return top
