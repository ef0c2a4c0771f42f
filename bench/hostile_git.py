"""Hostile git repositories for bench/bad_inputs.py (issue 53, item 1): `invoke sources --tree
T --sources DIR --allow same-version,substitute` on a small tree whose one package is fetched
by git (tests/build/git_kit.py), each run with a fresh tree and repository made before it.

Generated from the kit's kinds: every repository that asks git to run a command (a smudge or
clean filter from .git/info/attributes, a committed .gitattributes, a bare repository's
config; a filter.x.process driver; hooks, core.hooksPath, core.fsmonitor, diff.external,
textconv, include.path; a partial clone's promisor remote reached by core.sshCommand; a
submodule's repository with core.fsmonitor and a filter), each with the tree pinning the
repository's commit (same-version) and a commit it lacks (substitute, its HEAD); a
.gitmodules that includes a FIFO of this machine; and every repository whose git directory or
objects are elsewhere (a .git file or link, objects/info/alternates, a loose-object folder
that links out, a FIFO object, a FIFO HEAD).

Oracles besides the runner's (traceback, error line, hang):
- sentinel: the marker the repository's command creates ("security");
- result: a packed repository exits 0 with the tarball in dl/ holding the committed bytes
  (a.txt, run.sh executable, link -> a.txt), a refused one exits 2 with one `error:` line
  naming the repository and nothing in dl/ ("wrong" else)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from hostile import Check, Finding, Probe

from tests.build import git_kit

ALLOW = ["--allow", "same-version,substitute", "--no-debian"]
LACKED = "f" * 40  # a commit no repository has: its HEAD is substituted


def _slug(kind: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")


def _placed(tree: Path) -> Check:
    def check(p: subprocess.CompletedProcess[str]) -> Finding | None:
        if p.returncode != 0:
            return "wrong", f"exit {p.returncode} for a repository that packs"
        got = sorted((tree / "dl").glob("x-*.tar.zst"))
        if len(got) != 1:
            return "wrong", f"{len(got)} tarballs in dl/"
        out = tree.parent / "unpacked"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        subprocess.run(["tar", "--zstd", "-xf", str(got[0]), "-C", str(out)], check=True,
                       timeout=60)  # fmt: skip
        (top,) = list(out.iterdir())
        files = git_kit.unpacked(top)
        want = {"a.txt": ("f", b"hello\n"), "run.sh": ("x", b"#!/bin/sh\n"),
                "link": ("l", b"a.txt"), "sub/b.txt": ("f", b"b\n")}  # fmt: skip
        if any(files.get(k) != v for k, v in want.items()):
            return "wrong", "the tarball does not hold the committed files"
        return None

    return check


def _refused(tree: Path, repo: Path) -> Check:
    def check(p: subprocess.CompletedProcess[str]) -> Finding | None:
        errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
        if p.returncode != 2 or len(errors) != 1 or str(repo) not in errors[0]:
            return "wrong", f"exit {p.returncode}, {len(errors)} error lines naming no {repo}"
        if list((tree / "dl").glob("x-*")):
            return "wrong", "a refused repository's tarball is in dl/"
        return None

    return check


def _probe(w: Path, name: str, make: Callable[[Path], Path], pin: str | None, refused: bool,
           marker: Path) -> Probe:  # fmt: skip
    """One run: ``make(sources)`` makes the repository (returns it) before the run."""
    top = w / "git-labs" / name
    sources, tree = top / "sources", top / "tree"
    repo = sources / "x"

    def setup() -> None:
        shutil.rmtree(top, ignore_errors=True)
        sources.mkdir(parents=True)
        made = make(sources)
        if pin is None:  # the repository's own commit: read by git from its .git
            gitdir = made / ".git" if (made / ".git").is_dir() else made
            pinned = git_kit.git(top, "--git-dir", str(gitdir), "rev-parse", "HEAD")
        git_kit.mini_tree(tree, "x", pin or pinned.strip())

    argv = ["sources", "--tree", str(tree), "--sources", str(sources), *ALLOW]
    check = _refused(tree, repo) if refused else _placed(tree)
    return Probe(argv, check=check, sentinel=marker, setup=setup)


def family(w: Path) -> list[Probe]:
    (w / "sentinels").mkdir(exist_ok=True)
    probes = []
    for kind, maker in git_kit.HOSTILE.items():
        for pin in (None, LACKED):
            name = f"{_slug(kind)}-{'lacked' if pin else 'pinned'}"
            marker = w / "sentinels" / f"git-{name}"
            repo_name = "x.git" if kind == "bare repository" else "x"  # <dir>/<project>.git

            def make(sources: Path, maker: Callable[..., Path] = maker, repo_name: str = repo_name,
                     marker: Path = marker) -> Path:  # fmt: skip
                return maker(sources / repo_name, marker)

            probes.append(_probe(w, name, make, pin, False, marker))
    for kind, maker in git_kit.REFUSED.items():
        name = f"refused-{_slug(kind)}"
        marker = w / "sentinels" / f"git-{name}"

        def make_refused(sources: Path, maker: Callable[..., Path] = maker) -> Path:
            return maker(sources / "x", sources.parent / "elsewhere")

        probes.append(_probe(w, name, make_refused, LACKED, True, marker))
    fifo_marker = w / "sentinels" / "git-gitmodules-fifo"
    probes.append(_probe(w, "gitmodules-include-fifo", _gitmodules_fifo, None, False,
                         fifo_marker))  # fmt: skip
    return probes


def _gitmodules_fifo(sources: Path) -> Path:
    """A submodule whose committed .gitmodules includes a FIFO of this machine: `git config
    --blob` read includes, and waited on the FIFO for ever."""
    lib = git_kit.plain(sources / "lib")
    top = git_kit.plain(sources / "x")
    git_kit.git(top, "submodule", "add", "-q", str(lib), "deps/lib")
    fifo = sources.parent / "host-fifo"
    os.mkfifo(fifo)
    with (top / ".gitmodules").open("a") as f:
        f.write(f"[include]\n\tpath = {fifo}\n")
    git_kit.git(top, "commit", "-q", "-am", "lib")
    return top
