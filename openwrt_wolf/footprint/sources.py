"""Source tarballs: local directories first, then OpenWrt's PKG_SOURCE_URL, user mirrors,
OpenWrt's source mirrors and Debian's archive; every file checked against OpenWrt's PKG_HASH
and kept in the cache under OpenWrt's file name."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from .. import paths
from ..errors import WolfError
from ..files import downloads, outputs
from ..files.hashing import file_sha256
from ..files.locks import locked
from ..host.upstream import Unavailable
from .spec import Source

SOURCES_ENV = "OPENWRT_WOLF_SOURCES"  # colon-separated directories holding tarballs


def download_dir() -> Path:
    return paths.cache_dir() / "footprint" / "dl"


def local_dirs(extra: Iterable[str | os.PathLike[str]] = ()) -> list[Path]:
    dirs = [paths.expand(d, "--sources") for d in extra]
    env = os.environ.get(SOURCES_ENV, "")
    dirs += [paths.expand(d, f"${SOURCES_ENV}") for d in env.split(":") if d]
    return dirs


def _mismatch(src: Source, where: str, got: str) -> WolfError:
    return WolfError(
        f"hash mismatch: {where} has sha256 {got}, but OpenWrt's PKG_HASH for "
        f"{src.library} {src.version} is {src.sha256}",
        hint="delete or replace that file (a corrupt download or a different release)",
    )


def fetch(
    src: Source,
    *,
    local: Sequence[str | os.PathLike[str]] = (),
    mirrors: Sequence[str] = (),
    origins: Iterable[str] | None = None,
) -> Path:
    """The verified tarball in the cache. ``origins`` limits which kinds of URL are tried
    (openwrt, mirror, openwrt-mirror, debian); local directories are always looked at."""
    with locked(download_dir() / f"{src.file}.lock"):
        return _fetch(src, local=local, mirrors=mirrors, origins=origins)


def _fetch(
    src: Source,
    *,
    local: Sequence[str | os.PathLike[str]] = (),
    mirrors: Sequence[str] = (),
    origins: Iterable[str] | None = None,
) -> Path:
    dest_dir = download_dir()
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / src.file
    if dest.exists():
        if file_sha256(dest) == src.sha256:
            return dest
        dest.unlink()  # a stale or damaged cache entry: fetch again

    names = {src.file} | {Path(u).name for _, u in src.urls}
    for d in local_dirs(local):
        for name in sorted(names):
            cand = d / name
            if cand.is_file():
                got = file_sha256(cand)
                if got != src.sha256:
                    raise _mismatch(src, str(cand), got)
                outputs.copy_file(cand, dest)
                return dest

    import requests  # here: a run that fetches nothing does not load it

    urls = [("mirror", f"{m.rstrip('/')}/{src.file}") for m in mirrors] + list(src.urls)
    allowed = set(origins) if origins is not None else None
    failures: list[str] = []
    for origin, url in urls:
        if allowed is not None and origin not in allowed:
            continue
        try:
            got = downloads.download(url, dest, f"{src.file} ({origin})")
        except (requests.RequestException, OSError) as e:
            failures.append(f"{origin}: {downloads.reason(e)}")
            continue
        if got != src.sha256:
            with contextlib.suppress(FileNotFoundError):
                dest.unlink()
            raise _mismatch(src, url, got)
        return dest
    debian = any(o == "debian" for o, _ in src.urls)
    tried = "; ".join(dict.fromkeys(failures)) or "no URL allowed"
    no_deb = "" if debian else ", and Debian has no upload of this version"
    other = "" if debian else _debian_alternative(src)
    raise Unavailable(
        f"no source reachable for {src.library} {src.version} ({src.file}): {tried}{no_deb}",
        hint=f"{other}put {src.file} (sha256 {src.sha256[:12]}…) in a directory and pass "
        f"--sources DIR or set {SOURCES_ENV}, or give --mirror URL of an OpenWrt source mirror",
    )


def _debian_alternative(src: Source) -> str:
    """The nearest version Debian's archive does serve, as the option that selects it."""
    from .spec import _toml

    known = _toml("sources.toml")["library"]
    if src.library not in known:  # not a TLS library (hostapd: footprint/wpad.py)
        return ""
    versions = known[src.library]["versions"]
    have = [v for v, spec in versions.items() if spec.get("debian") and v != src.version]
    if not have:
        return ""
    return f"measure --version {src.library}={have[-1]} (Debian has it), or "
