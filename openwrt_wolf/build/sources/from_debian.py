"""Debian's source archive as a place for OpenWrt's source tarballs: the Sources indexes of
the suites in data/sources.toml (a private apt configuration under the cache; the host's apt
state is never touched) name every orig tarball with its sha256, so a file is matched against
PKG_HASH before anything is downloaded, and a download is checked against the index."""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ... import paths, proc
from ...errors import WolfError
from ...files import fetch as fetching
from ...files import httpget, outputs
from ...files.locks import locked
from ...host.debian import AptRoot
from ...trust import untrusted
from . import facts

DOWNLOAD_TIMEOUT = 60.0


@dataclass(frozen=True)
class Orig:
    """One upstream tarball in Debian's pool (an orig tarball, or a native package's)."""

    package: str  # the Debian source package
    version: str  # Debian's version, e.g. 2:3.8.2+dfsg-1
    upstream: str  # the upstream part, e.g. 3.8.2+dfsg
    filename: str
    sha256: str
    size: int
    url: str

    @property
    def plain_upstream(self) -> str:
        """The upstream version without Debian's repack marks (+dfsg, +ds, ~really...)."""
        return plain_version(self.upstream)


def plain_version(v: str) -> str:
    v = re.sub(r"^\d+:", "", v)
    if "+really" in v:  # Debian went back: 4.0.33-1+really4.0.32 is 4.0.32
        v = v.rsplit("+really", 1)[1]
    v = re.sub(r"[+~](dfsg|ds|repack|really)[^+~]*", "", v)
    return v


def upstream_of(debian_version: str) -> str:
    v = re.sub(r"^\d+:", "", debian_version)
    return v.rsplit("-", 1)[0] if "-" in v else v


def source_lines() -> list[str]:
    d = facts.data()
    keyring = d["keyring"]
    lines = []
    for src in d["debian"]:
        opts = f"signed-by={keyring}"
        if src.get("check_valid_until") is False:
            opts += " check-valid-until=no"
        for suite in src["suites"]:
            lines.append(f"deb-src [{opts}] {src['uri']} {suite} {' '.join(src['components'])}")
    return lines


class NotInPool(WolfError):
    """Debian's index lists the file, its pool does not have it (404)."""


class Archive:
    """Debian's Sources indexes, updated at most once a day (offline: the last ones)."""

    def __init__(self, base: Path | None = None) -> None:
        self.apt = AptRoot(
            "amd64", base or paths.cache_dir() / "debian" / "sources", sources=source_lines()
        )
        self._heads: dict[str, bool] = {}

    def _lists(self) -> list[tuple[str, Path]]:
        """(base URI, file) of every downloaded Sources index."""
        out = []
        for p in sorted((self.apt.base / "state" / "lists").glob("*_Sources")):
            host = p.name.split("_dists_", 1)[0].replace("_", "/")
            out.append((f"http://{host}", p))
        return out

    def index(self, wanted: set[str]) -> dict[str, list[Orig]]:
        """Every orig tarball of the ``wanted`` source packages, in every suite."""
        with locked(self.apt.base / ".lock"):
            self.apt.update()
        found: dict[str, dict[str, Orig]] = {}
        for base, path in self._lists():
            for para in _paragraphs(path, wanted):
                for o in _origs(base, para):
                    found.setdefault(o.package, {})[o.filename] = o
        return {k: sorted(v.values(), key=lambda o: o.filename) for k, v in found.items()}

    def exists(self, o: Orig) -> bool:
        """Whether the pool serves the file (HEAD), remembered for the run."""
        import requests  # here: a run that fetches nothing does not load it

        if o.url not in self._heads:
            try:  # within a download's deadline, redirects too (files/httpget.py)
                with httpget.get(o.url, method="HEAD") as r:
                    self._heads[o.url] = r.status_code == 200
            except (requests.RequestException, httpget.Refused) as e:
                raise WolfError(
                    f"cannot reach {o.url}: {fetching.reason(e)}",
                    hint="Debian's archive (deb.debian.org) must be reachable",
                ) from None
        return self._heads[o.url]

    def download(self, o: Orig, dest: Path) -> Path:
        """``o`` in the cache file ``dest`` (files/fetch.py, under a lock beside it), its
        sha256 checked against the Sources index."""
        origin = fetching.Origin(o.url, label=o.filename)
        lock = dest.parent / f".{dest.name}.lock"
        try:
            return fetching.fetch(dest, [origin], fetching.sha256(o.sha256), lock=lock,
                                  max_bytes=o.size).path  # fmt: skip
        except fetching.NotFetched as e:
            (f,) = e.failures
        if f.got is not None:
            raise WolfError(f"{o.url}: sha256 {f.got} is not the index's {o.sha256}")
        if f.status == 404:
            raise NotInPool(f"{o.url}: HTTP 404 (listed in Debian's index, missing from the pool)")
        raise WolfError(
            f"cannot download {o.url}: {f.reason}",
            hint="Debian's archive (deb.debian.org) must be reachable",
        )


def _paragraphs(path: Path, wanted: set[str]) -> list[dict[str, Any]]:
    out = []
    text = path.read_text(errors="replace")
    for block in text.split("\n\n"):
        m = re.match(r"Package: (\S+)", block)
        if not m or m.group(1) not in wanted:
            continue
        fields: dict[str, Any] = {}
        key = ""
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key].append(line.strip())
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = [value.strip()] if value.strip() else []
        out.append(fields)
    return out


def _origs(base: str, para: dict[str, Any]) -> list[Orig]:
    package = para["Package"][0]
    version = para["Version"][0]
    directory = para["Directory"][0]
    upstream = upstream_of(version)
    native = "-" not in re.sub(r"^\d+:", "", version)
    out = []
    for line in para.get("Checksums-Sha256", []):
        try:
            sha, size, name = line.split()
            untrusted.file_name(name, f"Sources index ({package})")
            if not re.fullmatch(r"[0-9a-f]{64}", sha) or not size.isdigit():
                continue
        except (ValueError, WolfError):
            continue  # a line this reader does not understand names no file we take
        is_orig = re.fullmatch(rf"{re.escape(package)}_[^_]+\.orig\.tar\.(gz|bz2|xz|zst)", name)
        is_native = native and re.fullmatch(rf"{re.escape(package)}_[^_]+\.tar\.(gz|bz2|xz)", name)
        if is_orig or is_native:
            out.append(
                Orig(package, version, upstream, name, sha, int(size), f"{base}/{directory}/{name}")
            )
    return out


def pip_sdist(project: str, version: str, into: Path) -> Path | None:
    """The sdist of ``project`` ``version`` from the package index pip is configured with
    (`pip download`, the ordinary client), or None."""
    dest = Path(tempfile.mkdtemp(prefix="wolf-pip-", dir=into))
    done = proc.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--dest",
            dest,
            f"{project}=={version}",
        ],
        timeout=DOWNLOAD_TIMEOUT * 10,
        check=False,
    )
    found = sorted(dest.glob("*.tar.gz")) if done.returncode == 0 else []
    if len(found) != 1:
        shutil.rmtree(dest, ignore_errors=True)
        return None
    out = into / found[0].name
    outputs.publish(found[0], out)
    shutil.rmtree(dest, ignore_errors=True)
    return out


@cache
def names_for(name: str) -> tuple[str, ...]:
    """The Debian source packages to look in for OpenWrt's ``name``."""
    table = facts.data().get("names", {})
    if name in table:
        return tuple(table[name])
    return (name.lower(),)
