"""OpenWrt's upstream sources (the OpenWrt trees, firmware-utils, squashfs-tools, uhttpd,
ustream-ssl, ...), pinned in data/upstream.toml and fetched by one fetcher:

1. a mirror directory holding the pinned file by name: `--sources DIR`, $OPENWRT_WOLF_SOURCES
   (colon-separated), $OPENWRT_WOLF_SHARED/openwrt, the project's sibling ../shared/openwrt;
2. the download cache (a file fetched and verified before);
3. a mirror URL holding the pinned file by name (`--sources-url URL`, $OPENWRT_WOLF_SOURCES_URL);
4. the pin's public archive URLs (GitHub's archive, git.openwrt.org, GitLab).

A file is accepted when its sha256 is the pinned file's, or else when its tree digest is the
pinned tree's (host/treedigest.py): the public archives pack the same commit into other bytes.
One log line per file says where it came from and how it was verified. The tree is extracted
once into the cache (locked, temp dir + rename)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .. import paths, proc
from ..errors import WolfError
from ..files import fetch as fetching
from ..files import outputs
from ..files.hashing import file_sha256
from ..files.locks import locked
from ..trust import secrets
from .treedigest import tree_sha256

SOURCES_ENV = "OPENWRT_WOLF_SOURCES"  # colon-separated mirror directories (as footprint's)
SOURCES_URL_ENV = "OPENWRT_WOLF_SOURCES_URL"  # comma-separated mirror base URLs
SHARED_ENV = "OPENWRT_WOLF_SHARED"  # a folder holding openwrt/<file>
TREE_ENV = "OPENWRT_TREE"  # an OpenWrt checkout of the stable release instead of a snapshot
STAMP = ".openwrt-wolf-upstream"
EXTRACT_TIMEOUT = 600.0
MAX_DOWNLOAD = 256 << 20  # the largest pin, an OpenWrt tree, is about 11 MiB packed
log = logging.getLogger("openwrt_wolf.upstream")


@dataclass(frozen=True)
class Pin:
    name: str  # e.g. "openwrt-25.12.5", "uhttpd"
    project: str  # owner/repo
    commit: str  # or the tag, for json-c
    version: str
    urls: tuple[str, ...]  # public archives of the commit, tried in order
    file: str  # the name a mirror holds it under
    sha256: str  # that file's bytes: `git archive` of the commit | gzip -n -9
    tree: str  # tree-sha256 of its content: any packing of the same tree


class Unavailable(WolfError):
    """No mirror holds the file and no URL could be downloaded (not a verification failure)."""


@cache
def pins() -> dict[str, Pin]:
    data = tomllib.loads((paths.DATA_DIR / "upstream.toml").read_text())
    return {n: Pin(name=n, **{**v, "urls": tuple(v["urls"])}) for n, v in data["pin"].items()}


def pin(name: str) -> Pin:
    try:
        return pins()[name]
    except KeyError:
        known = ", ".join(sorted(pins()))
        raise WolfError(f"no upstream pin named {name!r}", hint=f"known: {known}") from None


# --- where to look ------------------------------------------------------------------------

_given_dirs: list[Path] = []
_given_urls: list[str] = []


def use_mirrors(dirs: Sequence[str] = (), urls: Sequence[str] = ()) -> None:
    """The task's --sources DIR and --sources-url URL: looked at before the environment's."""
    _given_dirs[:0] = [paths.expand(d, "--sources") for d in dirs]
    _given_urls[:0] = [_mirror_url(u, "--sources-url") for u in urls]


def _mirror_url(u: str, where: str) -> str:
    """A mirror's base URL: http(s), one token; its password is never shown."""
    secrets.one_token(u, where)
    if not u.startswith(("http://", "https://")):
        raise WolfError(f"{where} {secrets.shown(u)} is not an http:// or https:// URL")
    return u.rstrip("/")


def shared_dir() -> Path:
    """$OPENWRT_WOLF_SHARED/openwrt, else the project's sibling ../shared/openwrt."""
    env = os.environ.get(SHARED_ENV)
    top = paths.expand(env, f"${SHARED_ENV}") if env else paths.PROJECT_ROOT.parent / "shared"
    return top / "openwrt"


def given_dirs() -> list[Path]:
    """The mirror directories named by --sources and $OPENWRT_WOLF_SOURCES (not ../shared)."""
    env = [paths.expand(d, f"${SOURCES_ENV}") for d in os.environ.get(SOURCES_ENV, "").split(":")
           if d]  # fmt: skip
    return [*_given_dirs, *env]


def mirror_dirs() -> list[Path]:
    return [*given_dirs(), shared_dir()]


def mirror_urls() -> list[str]:
    env = [u.strip() for u in os.environ.get(SOURCES_URL_ENV, "").split(",")]
    return [*_given_urls, *(_mirror_url(u, f"${SOURCES_URL_ENV}") for u in env if u)]


def download_dir() -> Path:
    return paths.cache_dir() / "upstream" / "dl"


# --- verification -------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    """sha256 of a file remembered by (size, mtime), so tests do not re-hash 11 MB each time."""
    st = path.stat()
    key = f"{st.st_size}:{st.st_mtime_ns}"
    memo = paths.cache_dir() / "upstream" / f"{path.name}.sha256"
    try:
        k, v = memo.read_text().split()
        if k == key:
            return v
    except (OSError, ValueError):
        pass
    digest = file_sha256(path)
    _write(memo, f"{key} {digest}\n")
    return digest


def _tree(path: Path, sha256: str) -> str:
    """The tree digest of a file, remembered by the file's sha256."""
    memo = paths.cache_dir() / "upstream" / "trees" / sha256
    try:
        return memo.read_text().strip()
    except OSError:
        pass
    digest = tree_sha256(path)
    _write(memo, digest + "\n")
    return digest


def _write(path: Path, text: str) -> None:
    paths.cache_write_text(path, text)  # a link at a memo's name replaced, none followed


def _verifier(p: Pin) -> fetching.Verifier:
    """The pinned file's sha256, else the pinned tree's digest (another packing)."""

    def check(path: Path, known: str | None) -> fetching.Verdict:
        # a download's sha256 was taken as it arrived (a .part's is never remembered); a
        # mirror's file is not hashed past what a pin can be (a sparse TiB took 15 minutes)
        if known is None and (size := path.stat().st_size) > MAX_DOWNLOAD:
            raise WolfError(f"{path} is {size:,} bytes, more than a pinned source's "
                            f"{MAX_DOWNLOAD:,}")  # fmt: skip
        sha256 = known or _sha256(path)
        if sha256 == p.sha256:
            return fetching.Verdict(True, sha256, "verified: its sha256 is the pinned file's")
        # other bytes: another packing (GitHub's, a mirror of it) or a bomb; the tree digest
        # refuses a bomb at its header (treedigest.PIN), before reading what it declares
        got = _tree(path, sha256)
        if got == p.tree:
            how = "verified: its tree-sha256 is the pinned tree's; the bytes are another packing"
            return fetching.Verdict(True, got, how)
        return fetching.Verdict(False, got, "tree-sha256")

    return check


def _refused(p: Pin, where: str, got: str) -> WolfError:
    return WolfError(
        f"{where}: neither its sha256 nor its tree-sha256 {got[:16]}… is the pinned "
        f"{p.tree[:16]}… of {p.project} {p.commit[:12]}",
        hint=f"replace it with {p.project} at {p.commit[:12]} ({p.urls[0]})",
    )


def verify(p: Pin, path: Path, where: str) -> str:
    """How the file was found to be the pinned one; a WolfError when it is not."""
    v = _verifier(p)(path, None)
    if not v.ok:
        raise _refused(p, where, v.got)
    return v.how


# --- fetching -----------------------------------------------------------------------------

_said: set[tuple[str, str]] = set()
_failed: dict[tuple[str, ...], str] = {}  # downloads that failed in this process: not retried


def _say(p: Pin, path: Path, origin: str, how: str) -> None:
    if (p.name, origin) not in _said:  # one line per file and process
        _said.add((p.name, origin))
        log.info("upstream: %s from %s; %s", p.file, origin, how)


def tarball(name: str) -> Path:
    """The pinned archive: from a mirror directory (used where it is), else the cache, a
    mirror URL or a public URL (files/fetch.py); verified. Raises Unavailable when nothing
    holds it."""
    p = pin(name)
    for d in mirror_dirs():
        cand = d / p.file
        if cand.is_file():
            _say(p, cand, str(d), verify(p, cand, str(cand)))
            return cand
    dest = download_dir() / p.file
    urls = [f"{m}/{p.file}" for m in mirror_urls()] + list(p.urls)
    tried = (p.name, str(dest), *urls)
    # the downloads failed earlier in this process: not tried again, only the cache may serve
    again = tried not in _failed
    origins = [fetching.Origin(u, label=f"{p.file} ({u.split('/')[2]})") for u in urls if again]
    try:
        got = fetching.fetch(dest, origins, _verifier(p), lock=download_dir() / f"{p.file}.lock",
                             max_bytes=MAX_DOWNLOAD)  # fmt: skip
    except fetching.NotFetched as e:
        bad = e.failures[-1] if e.failures else None
        if bad is not None and bad.got is not None:
            raise _refused(p, bad.origin.where, bad.got) from None
        if origins:
            _failed[tried] = "; ".join(f"{f.origin.where}: {f.reason}" for f in e.failures)
        raise _unavailable(p, _failed[tried]) from None
    _say(p, got.path, got.origin.where if got.origin else "the download cache", got.how)
    return got.path


def _unavailable(p: Pin, failures: str) -> Unavailable:
    places = ", ".join(str(d) for d in mirror_dirs())
    return Unavailable(
        f"source {p.file} ({p.project} {p.commit[:12]}) not found: no mirror directory holds "
        f"it ({places}) and no download worked ({failures})",
        hint=f"put it in {shared_dir()} or a folder named by --sources DIR / ${SOURCES_ENV}, "
        f"or allow network access to {p.urls[0]}",
    )


def source_dir(name: str) -> Path:
    """The pinned tree extracted into the cache (once); its top folder."""
    p = pin(name)
    root = paths.cache_dir() / "upstream"
    dest = root / p.name
    with locked(root / f"{p.name}.lock"):
        stamp = dest / STAMP
        # The stamp names the pin by its file's sha256: a verified archive of either packing
        # extracts to the same tree.
        if stamp.is_file() and stamp.read_text().strip() == p.sha256:
            return dest
        src = tarball(name)
        shutil.rmtree(dest, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{p.name}.", dir=root))
        try:
            # the archive's owners and set-id bits are not the tree's content (the tree digest
            # does not cover them): root's tar would keep them, so the files become ours
            proc.run(["tar", "--no-same-owner", "--no-same-permissions", "-xf", str(src), "-C",
                      str(tmp)], timeout=EXTRACT_TIMEOUT)  # fmt: skip
            tops = [q for q in tmp.iterdir() if q.is_dir()]
            if len(tops) != 1:
                raise WolfError(f"{src}: expected one top folder, found {len(tops)}")
            outputs.Owned(tops[0], "an unpacked source").write_text(STAMP, p.sha256 + "\n")
            outputs.publish(tops[0], dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def openwrt_tree(release: str) -> Path:
    """An OpenWrt tree of the release: $OPENWRT_TREE_<release> (dots as underscores, e.g.
    OPENWRT_TREE_24_10_8), or $OPENWRT_TREE for the stable release, else the release's pinned
    tree fetched and extracted into the cache."""
    from ..catalogue import releases

    names = [f"{TREE_ENV}_{release.replace('.', '_')}"]
    if release == releases.get(None).name:
        names.append(TREE_ENV)
    for var in names:
        if env := os.environ.get(var):
            tree = paths.expand(env, f"${var}")
            if not (tree / "include" / "target.mk").is_file():
                raise WolfError(f"${var}={tree} is not an OpenWrt tree (no include/target.mk)")
            return tree
    name = f"openwrt-{release}"
    if name not in pins():
        raise WolfError(f"no OpenWrt {release} tree is pinned", hint=f"set ${names[0]}")
    try:
        return source_dir(name)
    except Unavailable as e:
        raise Unavailable(f"no OpenWrt {release} tree (or set ${names[-1]}): {e}") from None
