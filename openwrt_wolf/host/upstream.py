"""OpenWrt's upstream source snapshots (the OpenWrt trees, firmware-utils, squashfs-tools,
uhttpd, ustream-ssl, ...): found as tarballs in a shared folder, checked against the sha256 the
catalogue records, and extracted once into the cache (locked, temp dir + rename), because no
machine of ours reaches OpenWrt's git or download servers."""

from __future__ import annotations

import os
import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .. import paths, proc
from ..errors import WolfError
from ..hashing import file_sha256
from ..locks import locked

SHARED_ENV = "OPENWRT_WOLF_SHARED"  # a folder holding openwrt/<name>-*.tar.gz
TREE_ENV = "OPENWRT_TREE"  # an OpenWrt checkout of the stable release instead of a snapshot
STAMP = ".openwrt-wolf-upstream"
EXTRACT_TIMEOUT = 600.0


@dataclass(frozen=True)
class Snapshot:
    name: str  # e.g. "openwrt-25.12.5", "uhttpd"
    file: str  # the tarball's file name
    upstream: str  # owner/repo it was archived from
    commit: str  # or the tag, for json-c
    sha256: str


@cache
def snapshots() -> dict[str, Snapshot]:
    data = tomllib.loads((paths.DATA_DIR / "upstream.toml").read_text())
    return {n: Snapshot(name=n, **v) for n, v in data["snapshot"].items()}


def snapshot(name: str) -> Snapshot:
    try:
        return snapshots()[name]
    except KeyError:
        known = ", ".join(sorted(snapshots()))
        raise WolfError(f"no upstream snapshot named {name!r}", hint=f"known: {known}") from None


def shared_dir() -> Path:
    """$OPENWRT_WOLF_SHARED/openwrt, else the project's sibling ../shared/openwrt."""
    env = os.environ.get(SHARED_ENV)
    return (Path(env).expanduser() if env else paths.PROJECT_ROOT.parent / "shared") / "openwrt"


def tarball(name: str) -> Path:
    """The snapshot's tarball, its sha256 checked against data/upstream.toml."""
    snap = snapshot(name)
    path = shared_dir() / snap.file
    if not path.is_file():
        raise WolfError(
            f"source snapshot {snap.file} not found in {shared_dir()}",
            hint=f"set {SHARED_ENV} to a folder holding openwrt/{snap.file}",
        )
    got = _sha256_cached(path)
    if got != snap.sha256:
        raise WolfError(
            f"{path}: sha256 {got} is not the recorded {snap.sha256}",
            hint=f"replace it with {snap.upstream} at {snap.commit[:12]}",
        )
    return path


def source_dir(name: str) -> Path:
    """The snapshot extracted into the cache (once); its top folder."""
    snap = snapshot(name)
    src = tarball(name)
    root = paths.cache_dir() / "upstream"
    dest = root / snap.name
    with locked(root / f"{snap.name}.lock"):
        stamp = dest / STAMP
        if stamp.is_file() and stamp.read_text().strip() == snap.sha256:
            return dest
        shutil.rmtree(dest, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{snap.name}.", dir=root))
        try:
            proc.run(["tar", "-xzf", str(src), "-C", str(tmp)], timeout=EXTRACT_TIMEOUT)
            tops = [p for p in tmp.iterdir() if p.is_dir()]
            if len(tops) != 1:
                raise WolfError(f"{src}: expected one top folder, found {len(tops)}")
            (tops[0] / STAMP).write_text(snap.sha256 + "\n")
            os.replace(tops[0], dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def openwrt_tree(release: str) -> Path:
    """An OpenWrt tree of the release: $OPENWRT_TREE_<release> (dots as underscores, e.g.
    OPENWRT_TREE_24_10_8), or $OPENWRT_TREE for the stable release, else the release's snapshot
    extracted into the cache."""
    from ..catalogue import releases

    names = [f"{TREE_ENV}_{release.replace('.', '_')}"]
    if release == releases.get(None).name:
        names.append(TREE_ENV)
    for var in names:
        if env := os.environ.get(var):
            tree = Path(env).expanduser()
            if not (tree / "include" / "target.mk").is_file():
                raise WolfError(f"${var}={tree} is not an OpenWrt tree (no include/target.mk)")
            return tree
    name = f"openwrt-{release}"
    if name not in snapshots():
        raise WolfError(f"no OpenWrt {release} snapshot is recorded", hint=f"set ${names[0]}")
    try:
        return source_dir(name)
    except WolfError as e:
        raise WolfError(
            f"no OpenWrt {release} tree: {e}", hint=f"set ${names[-1]} or ${SHARED_ENV}"
        ) from None


def _sha256_cached(path: Path) -> str:
    """sha256 of a tarball, remembered by (size, mtime) so tests do not re-hash 11 MB each time."""
    st = path.stat()
    memo = paths.cache_dir() / "upstream" / f"{path.name}.sha256"
    key = f"{st.st_size}:{st.st_mtime_ns}"
    try:
        k, v = memo.read_text().split()
        if k == key:
            return v
    except (OSError, ValueError):
        pass
    digest = file_sha256(path)
    memo.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(f"{key} {digest}\n")
    os.replace(tmp, memo)
    return digest
