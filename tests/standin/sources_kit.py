"""Where the tests' OpenWrt builds take their sources from on a machine without OpenWrt's
mirrors (CI): git repositories made of the shared snapshots, and ../shared/openwrt/offline/dl
(git tarballs packed byte for byte as OpenWrt's download.mk packs them); the rest comes from
Debian's source archive through build/sources/dl.py, as `sources --tree` takes it."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

from openwrt_wolf.host import upstream

# what the tests' base feeds may take besides OpenWrt's exact files (`build --allow`): the
# same version packed elsewhere, another version from Debian (each in the build's record)
SOURCES_ALLOW = ("same-version", "substitute")

# the shared snapshots of OpenWrt's git projects (data/upstream.toml), by their project name
GIT_SNAPSHOTS = ("libubox", "ustream-ssl", "uclient", "uhttpd")


def repo_from_snapshot(name: str, top: Path) -> Path:
    """A git checkout at ``top`` holding a shared snapshot (a `git archive` of the pinned
    commit), committed at the commit's own time: same content, names, modes and time as
    upstream's commit, so OpenWrt's packing of it gives OpenWrt's PKG_MIRROR_HASH. Its .git."""
    src = upstream.tarball(name)
    work = top.parent / f".{top.name}.work"
    work.mkdir(parents=True)
    with tarfile.open(src) as tf:
        when = max(m.mtime for m in tf.getmembers())
    # a public archive's owners are not ours (GitHub's: another uid): git refuses a tree owned
    # by another user ("dubious ownership"), so take the files as our own
    subprocess.run(["tar", "--no-same-owner", "-xzf", str(src), "-C", str(work)], check=True,
                   timeout=300)  # fmt: skip
    (extracted,) = list(work.iterdir())
    extracted.rename(top)
    work.rmdir()
    env = {"GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}  # fmt: skip
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "s"]):
        subprocess.run(argv, cwd=top, check=True, env=env, timeout=300)
    return top / ".git"


def source_dirs(dest: Path) -> list[Path]:
    """--sources directories: ``dest`` with a repository per shared git snapshot, and the
    shared offline dl/."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in GIT_SNAPSHOTS:
        if not (dest / name / ".git").is_dir():
            repo_from_snapshot(name, dest / name)
    offline = upstream.shared_dir() / "offline" / "dl"
    return [dest, *([offline] if offline.is_dir() else [])]
