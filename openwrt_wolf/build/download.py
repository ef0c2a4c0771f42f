"""Getting OpenWrt's ImageBuilder and SDK archives: names from data (data/imagebuilders.toml
and the release's sha256sums), fetched with progress and resume (HTTP Range) and checked
against sha256sums by files/fetch.py, a cache by release/target, and extraction of .tar.zst by
openwrt_wolf.files.archive's rules (a mirror is not trusted: nothing is written outside the tree).

Sources: OpenWrt's download server (data/releases.toml [server]), or --mirror URL|DIR laid out
like it (<base>/<release download path>/targets/<target>/<subtarget>/...)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .. import paths, term
from ..catalogue import releases
from ..errors import WolfError
from ..files import archive as archives
from ..files import fetch as fetching
from ..files import httpget, outputs
from ..files.locks import locked
from ..firmware.artifacts import parse_sha256sums
from ..firmware.imageformats import bounded
from ..trust import secrets, untrusted

# what a server may send for one archive: sha256sums names no size, and a mirror that sends
# for ever must not fill the disk (an ImageBuilder or SDK is a few hundred MiB)
ARCHIVE_MAX = 4 << 30
EXTRACTED_MARK = ".openwrt-wolf-extracted"
FILES_MARK = ".openwrt-wolf-files"  # the files unpacked, checked before each use
log = logging.getLogger("openwrt_wolf.download")


@dataclass(frozen=True)
class Archive:
    kind: str  # "imagebuilder" or "sdk"
    release: str
    target: str  # "ath79/generic"
    name: str
    sha256: str
    url: str  # where it came from (URL or file path)
    pinned: bool  # sha256 also known independently of the server (data/imagebuilders.toml)


@cache
def _data() -> dict[str, Any]:
    return tomllib.loads((paths.DATA_DIR / "imagebuilders.toml").read_text())


def pinned(kind: str, release: str, target: str) -> dict[str, str] | None:
    for p in _data().get("pinned", []):
        if (p["kind"], p["release"], p["target"]) == (kind, release, target):
            return dict(p)
    return None


def name_pattern(kind: str, release: str, target: str) -> re.Pattern[str]:
    t, s = target.split("/")
    pats = _data()["kinds"][kind]
    pat = pats["snapshot"] if release == "snapshot" else pats["release"]
    return re.compile("^" + pat.format(release=re.escape(release), target=t, subtarget=s) + "$")


def unreachable_hint() -> str:
    return (
        "use --mirror URL|DIR (a copy of OpenWrt's download tree) or --imagebuilder PATH "
        "(an unpacked ImageBuilder)"
    )


# The second line under "server unreachable": what gives real numbers without OpenWrt's
# servers (Debian's archive and the pinned upstream sources; docs/sources.md).
# Times measured from a cold cache on 2 cores shared with other work (README).
OFFLINE_NOTE = (
    "without OpenWrt's servers, these run here: ./wolf footprint --stack (the flash cost of "
    "the three TLS stacks, built for MIPS; ~25 min the first time, then cached) and "
    "./wolf perf --flavour all --target qemu --quick (their run-time cost on emulated MIPS; "
    "~45 min the first time, ~6 min after)"
)


def disk_full(path: Path | str, e: OSError) -> WolfError:
    return WolfError(
        f"disk full while writing {path} ({e.strerror})",
        hint=f"free space there or set OPENWRT_WOLF_CACHE to a bigger disk ({paths.cache_dir()})",
    )


class Source:
    """OpenWrt's server, an HTTP mirror, or a local directory with the same layout."""

    def __init__(self, mirror: str | None = None) -> None:
        self.base = (mirror or releases.server_base()).rstrip("/")
        secrets.remember(self.base)  # a mirror URL's user:password@ is never printed
        self.is_dir = not re.match(r"^https?://", self.base)
        self.official = mirror is None

    def target_dir(self, release: str, target: str) -> str:
        t, s = target.split("/")
        return releases.get(release).target_url(self.base, t, s).rstrip("/")

    def read_text(self, where: str) -> str:
        if self.is_dir:  # a FIFO or a 20 GB file there is one error line, not a hang
            return untrusted.read_text(Path(where), "mirror file")
        import requests  # here: a cached build never loads it (0.1 s of every start)

        # as a mirror directory's: 16 MiB at most, and within a deadline (httpget.py)
        try:
            r = httpget.get(where, limit=untrusted.MAX_TEXT)
        except requests.RequestException as e:
            raise Unreachable(
                f"download server {self.base} unreachable ({type(e).__name__})",
                hint=unreachable_hint(),
                note=OFFLINE_NOTE,
            ) from None
        except httpget.Refused as e:
            raise WolfError(f"{where}: {e.strerror}", hint="use another --mirror") from None
        with r:
            if r.status_code == 404:
                raise WolfError(f"{where} not found on the server (404)", hint=unreachable_hint())
            if not 200 <= r.status_code < 300:
                raise WolfError(f"{where}: HTTP {r.status_code}", hint=unreachable_hint())
            try:
                body = r.body()
            except requests.RequestException as e:  # it answered: not an offline case
                raise WolfError(f"{where}: the transfer broke off ({type(e).__name__})",
                                hint="re-run, or use another --mirror") from None  # fmt: skip
            except httpget.Refused as e:
                raise WolfError(f"{where}: {e.strerror}", hint="use another --mirror") from None
        return body.decode("utf-8", "replace")


def resolve(kind: str, release: str, target: str, source: Source) -> Archive:
    """Which archive to fetch and its sha256, from the release's sha256sums."""
    where = source.target_dir(release, target)
    sums = parse_sha256sums(source.read_text(f"{where}/sha256sums"))
    pat = name_pattern(kind, release, target)
    names = sorted(n for n in sums if pat.match(n))
    if not names:
        raise WolfError(
            f"no {kind} for {release} {target} in {where}/sha256sums",
            hint="check the release and target, or use --imagebuilder PATH",
        )
    name = names[0]
    pin = pinned(kind, release, target)
    if pin and source.official and pin["sha256"] != sums[name]:
        raise WolfError(
            f"{where}/sha256sums lists {name} as {sums[name]}, but OpenWrt published "
            f"{pin['sha256']}",
            hint="the server is not serving OpenWrt's release; use another --mirror",
        )
    return Archive(
        kind, release, target, name, sums[name], f"{where}/{name}", pinned=pin is not None
    )


def cache_path(a: Archive) -> Path:
    t, s = a.target.split("/")
    return paths.cache_dir() / "downloads" / a.release / t / s / a.name


def fetch(a: Archive) -> Path:
    """The archive in the cache: downloaded (resumed when a .part exists) and sha256-checked
    (files/fetch.py). One process at a time per archive (a lock in <cache>/locks): two first
    builds at once would otherwise write the same .part."""
    dest = cache_path(a)
    origin = fetching.Origin(a.url, label=a.name)
    try:
        return fetching.fetch(dest, [origin], fetching.sha256(a.sha256), lock=_lock_path(dest),
                              resume=True, max_bytes=ARCHIVE_MAX).path  # fmt: skip
    except fetching.NotFetched as e:
        raise _failed(a, dest, e.failures[0]) from None


def _failed(a: Archive, dest: Path, f: fetching.Failure) -> WolfError:
    """The one line for the archive's one origin, as a build says it."""
    if f.got is not None:
        return WolfError(
            f"checksum mismatch for {a.name} from {a.url}: sha256 {f.got}, sha256sums says "
            f"{a.sha256}; the bad file was removed",
            hint="re-run to download it again, or use another --mirror",
        )
    if isinstance(f.error, OSError) and f.error.errno == errno.ENOSPC:
        return disk_full(dest.with_name(dest.name + ".part"), f.error)
    if f.missing:
        there = "is not a regular file" if os.path.lexists(a.url) else "does not exist"
        return WolfError(f"{a.url} {there} in the mirror directory")
    if f.status is not None:
        return WolfError(f"{a.url}: HTTP {f.status}", hint=unreachable_hint())
    if f.broken:
        return WolfError(
            f"download of {a.url} broke off ({f.reason}); the partial file is kept",
            hint="re-run to resume it",
        )
    if f.unreached:
        return Unreachable(
            f"download server unreachable for {a.url} ({f.reason})",
            hint=unreachable_hint(),
            note=OFFLINE_NOTE,
        )
    mirror = isinstance(f.error, httpget.Refused)  # too big, too slow, not what we read
    return WolfError(f"cannot fetch {a.url}: {f.reason}",
                     hint="use another --mirror" if mirror else None)  # fmt: skip


def _lock_path(path: Path) -> Path:
    """The lock for one archive or tree, kept apart in <cache>/locks (not beside the file)."""
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:20]
    return paths.cache_dir() / "locks" / f"download-{digest}.lock"


def _lock(path: Path) -> contextlib.AbstractContextManager[None]:
    return locked(_lock_path(path))


def _file_list(top: Path) -> list[str]:
    return sorted(str(p.relative_to(top)) for p in top.rglob("*") if p.is_file() or p.is_symlink())


def _intact(into: Path, digest: str) -> Path | None:
    """The unpacked tree when its stamp names this archive and every file it had is there."""
    mark, listing = into / EXTRACTED_MARK, into / FILES_MARK
    try:
        if mark.read_text().strip() != digest:
            return None
        names = listing.read_text().splitlines()
    except OSError:
        return None
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1 or not names:
        return None
    missing = next((n for n in names if not os.path.lexists(into / n)), None)
    if missing is not None:
        log.warning("note: the unpacked %s lacks %s; unpacking it again", into, missing)
        return None
    return tops[0]


class Unreachable(WolfError):
    """The download server (or mirror) did not answer."""


def cached_tree(into: Path) -> tuple[Path, str, str | None] | None:
    """An intact tree unpacked earlier into ``into``: (top, archive name, sha256), for an
    offline build when the server cannot be reached."""
    with _lock(into):
        try:
            digest = (into / EXTRACTED_MARK).read_text().strip()
        except OSError:
            return None
        top = _intact(into, digest)
    if top is None:
        return None
    name, _, sha = digest.partition(" ")
    return top, name, sha or None


def extract(archive: Path, into: Path, digest: str | None = None) -> Path:
    """Unpack once into ``into``; returns the tree's top directory (the archive's only one).

    ``digest`` (the archive's sha256) says which archive the tree came from: a snapshot keeps
    its name from day to day. A stamp holds it and the list of files unpacked; a tree whose
    stamp differs or that lost a file is unpacked again. One process at a time (a lock per
    tree); it unpacks into a temporary sibling and renames it, so a killed run leaves no half
    tree and a second run never sees one."""
    digest = f"{archive.name} {digest or ''}".strip()
    with _lock(into):
        top = _intact(into, digest)
        if top is not None:
            return top
        into.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{into.name}.", suffix=".unpacking",
                                    dir=into.parent))  # fmt: skip
        label = f"unpacking {archive.name}"
        try:
            with term.progress(label, unit="B") as bar:
                archives.extract(archive, tmp, archives.TREE, what="archive",
                               hint="delete it and re-run", progress=bar.advance)  # fmt: skip
            (tmp / FILES_MARK).write_text("\n".join(_file_list(tmp)) + "\n")
            (tmp / EXTRACTED_MARK).write_text(digest + "\n")
            shutil.rmtree(into, ignore_errors=True)
            outputs.publish(tmp, into)
        except (OSError, archives.WriteFailed) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            cause = e.cause if isinstance(e, archives.WriteFailed) else e
            if cause.errno == errno.ENOSPC:
                raise disk_full(into, cause) from None
            raise
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        tops = [p for p in into.iterdir() if p.is_dir()]
        if len(tops) != 1:
            raise WolfError(
                f"{archive} does not hold one top directory", hint="is it an ImageBuilder?"
            )
        return tops[0]


def imagebuilder(release: str, target: str, mirror: str | None = None) -> Path:
    """An unpacked ImageBuilder for release and target ("ath79/generic"), from the cache."""
    a = resolve("imagebuilder", release, target, Source(mirror))
    path = fetch(a)
    t, s = target.split("/")
    return extract(path, paths.cache_dir() / "imagebuilder" / release / f"{t}-{s}", a.sha256)


# what tells one unpacked ImageBuilder or SDK from another besides its path: its release,
# the .config and target info of its build (each read bounded: the directory is the user's)
_FINGERPRINT = ("include/version.mk", ".config", ".targetinfo", "feeds.conf.default")
_FINGERPRINT_MAX = 16 * 1024 * 1024


def identity(kind: str, local: Path | None, release: str, target: str, mirror: str | None) -> str:
    """What the request names the ImageBuilder or SDK by, so that a build made with one is
    never served for another: the archive's sha256 as the server's (or mirror's) sha256sums
    list it, read each run (a snapshot keeps its name from day to day), the cached archive's
    when the server cannot be reached; for a directory given with --imagebuilder/--sdk a
    digest of its path and the files that tell its build apart."""
    if local:
        top = Path(local).expanduser().resolve()
        h = hashlib.sha256(str(top).encode() + b"\0")
        for rel in _FINGERPRINT:
            f = top / rel
            if f.is_file():
                h.update(rel.encode() + b"\0" + bounded.read_file(f, rel, _FINGERPRINT_MAX))
        h.update(" ".join(sorted(p.name for p in top.glob("staging_dir/toolchain-*"))).encode())
        return f"dir:{h.hexdigest()[:32]}"
    rel = releases.get(release).name
    t, s = target.split("/")
    try:
        return f"sha256:{resolve(kind, rel, target, Source(mirror)).sha256}"
    except Unreachable as e:
        cached = cached_tree(paths.cache_dir() / kind / rel / f"{t}-{s}")
        if cached is not None and cached[2] is not None:
            return f"sha256:{cached[2]}"
        if kind != "sdk":
            raise
        raise Unreachable(
            e.message,
            hint="the patch set's image needs OpenWrt's SDK: use --mirror URL|DIR or --sdk "
            "PATH (an unpacked SDK), or --stock for OpenWrt's own wolfSSL packages",
            note=e.note,
        ) from None
