"""Real binaries from Debian's archive (data/debian.toml): a private apt configuration for a
foreign architecture under the cache directory, so the host's apt state is never touched.

``AptRoot`` resolves package names with ``apt-cache`` (never hard-coded), downloads with
``apt-get download`` and unpacks with ``dpkg-deb -x``, cached by version: the Wi-Fi guest's
kernel and busybox (targets/vm/wifiguest.py), and the tests' malta stand-in guest
(tests/standin/malta_guest.py)."""

from __future__ import annotations

import contextlib
import fnmatch
import getpass
import hashlib
import json
import logging
import os
import re
import shutil
import tarfile
import tempfile
import time
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO, cast

from .. import paths, proc
from ..errors import CommandError, WolfError
from ..files import outputs
from ..files.locks import locked
from . import hosttools

log = logging.getLogger("openwrt_wolf.host.debian")

# An index older than this is refreshed before resolving names; a stale one would point at a
# kernel ABI Debian has already removed from the pool.
LISTS_MAX_AGE = 24 * 3600


@cache
def data() -> dict[str, Any]:
    return tomllib.loads((paths.DATA_DIR / "debian.toml").read_text())


@dataclass(frozen=True)
class Unpacked:
    """One Debian package, unpacked with dpkg-deb -x."""

    package: str
    version: str
    arch: str
    root: Path


class AptRoot:
    """apt-get/apt-cache for one foreign architecture, with all state under ``base``."""

    def __init__(
        self, arch: str, base: Path | None = None, sources: list[str] | None = None
    ) -> None:
        """``sources``: sources.list lines instead of data/debian.toml's binary archive
        (the source archive for `invoke sources` uses deb-src lines)."""
        self.arch = arch
        self.base = base or paths.cache_dir() / "debian" / arch
        self.conf = self.base / "apt.conf"
        self.sources = sources

    def _setup(self) -> None:
        d = data()
        empty = self.base / "etc-empty"
        for sub in ("state/lists/partial", "cache/archives/partial", "etc-empty", "debs"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        status = self.base / "state" / "status"
        if not status.exists():  # nothing "installed": apt resolves against the archive only
            paths.cache_write_text(status, "")
        keyring = d["keyring"]
        if not Path(keyring).exists():
            raise WolfError(
                f"Debian's archive keyring {keyring} is missing",
                hint="apt-get install debian-archive-keyring",
            )
        lines = self.sources or [
            f"deb [signed-by={keyring}] {src['uri']} {suite} {' '.join(src['components'])}"
            for src in d["source"]
            for suite in src["suites"]
        ]
        paths.cache_write_text(self.base / "sources.list", "\n".join(lines) + "\n")
        # Dir::Etc::Parts/Main point at an empty directory so the host's apt.conf.d hooks
        # (docker-clean, proxies for other repositories) never run for our private root.
        conf = {
            "Dir::State": self.base / "state",
            "Dir::State::status": status,
            "Dir::Cache": self.base / "cache",
            "Dir::Etc::SourceList": self.base / "sources.list",
            "Dir::Etc::SourceParts": empty,
            "Dir::Etc::Parts": empty,
            "Dir::Etc::Main": empty / "apt.conf",
            "Dir::Etc::Preferences": empty / "preferences",
            "Dir::Etc::PreferencesParts": empty,
            "APT::Architecture": self.arch,
            "Acquire::Languages": "none",
            # apt's binary caches would be 60+ MB per root, for a handful of queries
            "Dir::Cache::pkgcache": "",
            "Dir::Cache::srcpkgcache": "",
            "APT::Sandbox::User": getpass.getuser(),
        }
        text = "".join(f'{k} "{v}";\n' for k, v in conf.items())
        text += f'APT::Architectures {{ "{self.arch}"; }};\n'
        if not self.conf.exists() or self.conf.read_text() != text:
            paths.cache_write_text(self.conf, text)

    def _env(self) -> dict[str, str]:
        return {"APT_CONFIG": str(self.conf), "LC_ALL": "C"}

    def _stamp(self) -> Path:
        return self.base / "state" / "lists" / ".openwrt-wolf-updated"

    def update(self, *, force: bool = False) -> None:
        """apt-get update, unless the indexes are younger than LISTS_MAX_AGE."""
        self._setup()
        stamp = self._stamp()
        if not force and stamp.exists() and time.time() - stamp.stat().st_mtime < LISTS_MAX_AGE:
            return
        try:
            proc.run(["apt-get", "update", "-q"], timeout=600, env=self._env())
        except CommandError as e:
            if stamp.exists() and not force:
                # Offline with indexes from an earlier run: they still name what is cached.
                log.warning("apt-get update for %s failed; using the indexes from %s",
                            self.arch, time.ctime(stamp.stat().st_mtime))  # fmt: skip
                return
            raise WolfError(
                f"apt-get update for {self.arch} failed: {e.tail[-1] if e.tail else e.message}",
                hint="Debian's archive (deb.debian.org) must be reachable",
            ) from None
        stamp.touch()

    def cache_query(self, *args: str) -> str:
        """apt-cache's answer, remembered until the indexes change: a warm run (every test
        worker, every benchmark boot) then asks apt nothing."""
        memo_path = self.base / "state" / "apt-cache-answers.json"
        stamp = self._stamp()
        key = " ".join(args)
        version = str(stamp.stat().st_mtime_ns) if stamp.exists() else ""
        memo: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            memo = json.loads(memo_path.read_text())
        if memo.get("lists") != version:
            memo = {"lists": version, "answers": {}}
        if key in memo["answers"]:
            return str(memo["answers"][key])
        out = proc.run(["apt-cache", *args], timeout=120, env=self._env()).output
        memo["answers"][key] = out
        paths.cache_write_text(memo_path, json.dumps(memo))
        return out

    def depends(self, package: str, pattern: str) -> str:
        """The one dependency of a meta package matching ``pattern`` (apt-cache depends)."""
        out = self.cache_query("depends", package)
        want = re.compile(pattern)
        found = sorted(
            {m.group(1) for m in re.finditer(r"Depends:\s*(\S+)", out) if want.match(m.group(1))}
        )
        if len(found) != 1:
            raise WolfError(
                f"apt-cache depends {package} ({self.arch}) names {found or 'no'} package "
                f"matching {pattern}",
                hint="the archive changed; check data/debian.toml",
            )
        return found[0]

    def version(self, package: str) -> str:
        out = self.cache_query("show", "--no-all-versions", package)
        m = re.search(r"^Version:\s*(\S+)", out, re.MULTILINE)
        if not m:
            raise WolfError(f"apt-cache show {package} ({self.arch}) printed no Version")
        return m.group(1)

    def fetch(self, package: str, members: tuple[str, ...] = ()) -> Unpacked:
        """Download and unpack the candidate version of ``package``; cached by version.
        ``members``: only the regular files matching these patterns (fnmatch, e.g.
        ``boot/vmlinuz-*``), for big packages of which a few files are needed."""
        hosttools.ensure(["apt-get", "dpkg-deb"])
        with locked(self.base / ".lock"):
            self.update()
            version = self.version(package)
            name = f"{package}_{version.replace(':', '%3a')}"
            if members:
                name += "-" + hashlib.sha256(json.dumps(members).encode()).hexdigest()[:12]
            dest = self.base / "unpacked" / name
            if (dest / ".complete").exists():
                return Unpacked(package, version, self.arch, dest)
            deb = self._download(package, version)
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
            try:
                if members:
                    extract_members(deb, tmp, members)
                else:
                    proc.run(["dpkg-deb", "-x", deb, tmp], timeout=300)
                (tmp / ".complete").write_text(f"{package} {version} {self.arch}\n")
                if dest.exists():
                    shutil.rmtree(dest)
                outputs.publish(tmp, dest)
                deb.unlink()  # the unpacked tree is the cache; the .deb would double it
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            return Unpacked(package, version, self.arch, dest)

    def _download(self, package: str, version: str) -> Path:
        debs = self.base / "debs"
        name = f"{package}_{version.replace(':', '%3a')}_"
        have = sorted(debs.glob(f"{name}*.deb"))
        if have:
            return have[0]
        spec = f"{package}={version}"
        try:
            proc.run(["apt-get", "download", "-q", spec], timeout=900, cwd=debs, env=self._env())
        except CommandError:
            # A stale index names a file Debian has since removed: refresh once and retry.
            self.update(force=True)
            spec = f"{package}={self.version(package)}"
            proc.run(["apt-get", "download", "-q", spec], timeout=900, cwd=debs, env=self._env())
        have = sorted(debs.glob(f"{package}_*.deb"), key=lambda p: p.stat().st_mtime)
        if not have:
            raise WolfError(f"apt-get download {spec} left no .deb in {debs}")
        return have[-1]


def _data_member(deb: Path) -> tuple[int, int, str]:
    """(offset, size, name) of data.tar.* in a .deb (an ar archive: 8-byte magic, then
    60-byte member headers, each member padded to an even size)."""
    with deb.open("rb") as fh:
        if fh.read(8) != b"!<arch>\n":
            raise WolfError(f"{deb} is not a Debian package (no ar header)")
        while True:
            head = fh.read(60)
            if len(head) < 60:
                raise WolfError(f"{deb}: no data.tar member")
            name = head[:16].decode("ascii", "replace").strip().rstrip("/")
            try:
                size = int(head[48:58].decode("ascii").strip())
            except ValueError:
                raise WolfError(f"{deb}: damaged ar header") from None
            if name.startswith("data.tar"):
                return fh.tell(), size, name
            fh.seek(size + size % 2, os.SEEK_CUR)


def extract_members(deb: Path, dest: Path, patterns: tuple[str, ...]) -> list[Path]:
    """The package's regular files whose path (without "./") matches a pattern, into dest.
    Names that would leave dest are refused; links and devices are skipped."""
    offset, size, name = _data_member(deb)
    if name not in ("data.tar.xz", "data.tar.gz", "data.tar"):
        raise WolfError(f"{deb}: {name} is not a compression this reader takes (xz, gz, none)",
                        hint="unpack it with dpkg-deb -x instead")  # fmt: skip
    out = []
    with deb.open("rb") as fh:
        fh.seek(offset)
        with tarfile.open(fileobj=cast(BinaryIO, _Limited(fh, size)), mode="r|*") as tar:
            for m in tar:
                rel = m.name.removeprefix("./")
                if not m.isfile() or not any(fnmatch.fnmatch(rel, p) for p in patterns):
                    continue
                if rel.startswith("/") or ".." in Path(rel).parts:
                    raise WolfError(f"{deb}: member {m.name!r} would leave the unpack folder")
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(m)
                assert src is not None  # a regular file
                with target.open("wb") as w:
                    shutil.copyfileobj(src, w, 1 << 20)
                out.append(target)
    if not out:
        raise WolfError(f"{deb}: no member matches {', '.join(patterns)}")
    return out


class _Limited:
    """A read-only view of ``size`` bytes of a file from its current position."""

    def __init__(self, fh: Any, size: int) -> None:
        self.fh, self.left = fh, size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data: bytes = self.fh.read(n)
        self.left -= len(data)
        return data
