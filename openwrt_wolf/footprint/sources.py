"""Source tarballs: local directories first, then user mirrors, OpenWrt's PKG_SOURCE_URL,
OpenWrt's source mirrors and Debian's archive; every file checked against OpenWrt's PKG_HASH
and kept in the cache under OpenWrt's file name, by the one fetcher (files/fetch.py)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from .. import paths
from ..errors import WolfError
from ..files import fetch as fetching
from ..host.upstream import Unavailable
from .spec import Source

SOURCES_ENV = "OPENWRT_WOLF_SOURCES"  # colon-separated directories holding tarballs
# what a server may send for one tarball (a TLS library's is tens of MiB): a mirror that
# sends for ever must not fill the disk
SOURCE_MAX = 512 << 20


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
    """The verified tarball in the cache (files/fetch.py, under a lock beside it). ``origins``
    limits which kinds of URL are tried (openwrt, mirror, openwrt-mirror, debian); local
    directories are always looked at, first."""
    names = sorted({src.file} | {Path(u).name for _, u in src.urls})
    tried = [fetching.Origin(str(d / n)) for d in local_dirs(local) for n in names
             if (d / n).is_file()]  # fmt: skip
    urls = [("mirror", f"{m.rstrip('/')}/{src.file}") for m in mirrors] + list(src.urls)
    allowed = set(origins) if origins is not None else None
    tried += [fetching.Origin(url, name=origin, label=f"{src.file} ({origin})")
              for origin, url in urls if allowed is None or origin in allowed]  # fmt: skip
    dest = download_dir() / src.file
    try:
        return fetching.fetch(dest, tried, fetching.sha256(src.sha256),
                              lock=download_dir() / f"{src.file}.lock",
                              max_bytes=SOURCE_MAX).path  # fmt: skip
    except fetching.NotFetched as e:
        bad = next((f for f in e.failures if f.got is not None), None)
        if bad is not None:
            raise _mismatch(src, bad.origin.where, bad.got or "") from None
        failures = [f"{f.origin.shown}: {f.reason}" for f in e.failures if f.origin.is_url]
    debian = any(o == "debian" for o, _ in src.urls)
    tried_s = "; ".join(dict.fromkeys(failures)) or "no URL allowed"
    no_deb = "" if debian else ", and Debian has no upload of this version"
    other = "" if debian else _debian_alternative(src)
    raise Unavailable(
        f"no source reachable for {src.library} {src.version} ({src.file}): {tried_s}{no_deb}",
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
