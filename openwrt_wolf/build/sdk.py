"""OpenWrt's SDK, driven through its own interface (target/sdk/files/Makefile,
scripts/feeds): feeds.conf with our local feed, `scripts/feeds update -a`, `scripts/feeds
install -p wolf <names>`, a .config selecting them, `make defconfig`, `make
package/<dir>/compile`, and the packages it leaves in bin/packages/<arch>/<feed>/.

With a base feed (an OpenWrt source tree, the patch set applied to it) the SDK also compiles
the packages the patch set changes, and those linking the flavour's library (their ABI
dependency names its build), for an ImageBuilder that has OpenWrt's own.

The packages are then put where the ImageBuilder takes local packages (its packages/
directory, whose index `make image` regenerates) and the image is assembled there."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..catalogue import names
from ..errors import CommandError, WolfError
from ..files import outputs
from ..firmware.imageformats import bounded
from . import packages

MAKE_TIMEOUT = 6 * 3600.0
FEED = "wolf"
BASE = "base"
LOCAL_MARK = ".openwrt-wolf-local"  # in an ImageBuilder's packages/: what we put there
BUILT_MARK = ".openwrt-wolf-built"  # in an SDK's bin/packages/: the files our runs made
ABI_AND_VERSION = r"(?:[0-9][0-9A-Za-z.]*)?-[0-9][^/]*"  # after a package's name in its file
ALL_OFF = ("ALL", "ALL_NONSHARED", "ALL_KMODS")  # target/sdk/files/Config.in
MAX_INDEX = 64 * 1024 * 1024  # a feed index (feeds/base.index is ~2 MB)
_SOURCE_DIR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*(/[A-Za-z0-9][A-Za-z0-9._+-]*)*")


# what a failing step prints first; with -j the last lines are make's, not the cause
_FIRST_ERROR = re.compile(r"CMake Error|\berror:|\*\*\* No rule|: No such file or directory$")


# scripts/download.pl's last word, then make's line naming the file it was to fetch
_GAVE_UP = "No more mirrors to try - giving up."
_DL_TARGET = re.compile(r"\*\*\* \[[^\]]*?/dl/([^/\]\s]+)\] Error")


def _log_part(log: Path, start: int) -> str:
    try:
        with log.open("rb") as f:
            f.seek(start)
            return f.read(MAX_INDEX).decode(errors="replace")
    except OSError:
        return ""


def first_error(log: Path, start: int) -> str:
    """The first line of the log after ``start`` that names a cause, read bounded. A source
    OpenWrt's download.pl could not fetch is named with the options that give it here."""
    text = _log_part(log, start)
    if _GAVE_UP in text:
        m = _DL_TARGET.search(text)
        what = m[1] if m else "a source file"
        return (f"{what} could not be downloaded (OpenWrt's mirrors are out of reach); give it "
                "with --sources DIR (directories of source files or git repositories) or "
                "--sources-url URL")[:300]  # fmt: skip
    hit = next((ln.strip() for ln in text.splitlines() if _FIRST_ERROR.search(ln)), "")
    return hit[:300]


@dataclass(frozen=True)
class Source:
    """One package of a feed index (scripts/metadata.pm's .packageinfo): its source
    directory inside the feed (libs/wolfssl), version and dependencies."""

    directory: str
    version: str
    depends: tuple[str, ...]

    @property
    def make_name(self) -> str:
        """What `make package/<name>/compile` takes: the source directory's name, not the
        package's (libwolfssl is built by package/wolfssl)."""
        return self.directory.rsplit("/", 1)[-1]


def read_index(text: str, feed: str, where: str) -> dict[str, Source]:
    """Package name -> Source, from a feed index or tmp/.packageinfo ("Source-Makefile:
    feeds/<feed>/<dir>/Makefile" or "package/<dir>/Makefile", then its Package: stanzas)."""
    out: dict[str, Source] = {}
    directory: str | None = None
    name: str | None = None
    for line in text.splitlines():
        key, _, value = line.partition(": ")
        if key == "Source-Makefile":
            rel = value.strip().removesuffix("/Makefile")
            for prefix in (f"feeds/{feed}/", "package/"):
                if rel.startswith(prefix):
                    rel = rel[len(prefix) :]
                    break
            directory = rel if _SOURCE_DIR.fullmatch(rel) and ".." not in rel.split("/") else None
            name = None
        elif key == "Package" and directory is not None:
            name = names.package(value.strip(), where, group=False)
            out[name] = Source(directory, "", ())
        elif name is not None and key == "Version":
            out[name] = Source(directory or "", value.strip(), out[name].depends)
        elif name is not None and key == "Depends":
            # +libwolfssl, @USE_WOLFSSL, +PACKAGE_x:libfoo (conditional: the package named)
            deps = tuple(d.lstrip("+@").rsplit(":", 1)[-1] for d in value.split())
            out[name] = Source(out[name].directory, out[name].version, deps)
    return out


@dataclass(frozen=True)
class BaseFeed:
    """The sdk backend's base feed: an OpenWrt tree (the patch set applied), what the image
    installs, and what the flavour's build needs."""

    tree: Path
    wanted: frozenset[str]  # the packages the image installs (defaults, changes), by name
    library: str  # the flavour's library package (libwolfssl)
    touched: tuple[str, ...]  # tree paths the patch set changes (package/libs/wolfssl/Makefile)
    config: tuple[tuple[str, str], ...]  # Kconfig symbols (data/buildroot.toml sdk_config)
    env: tuple[tuple[str, str], ...] = ()  # the tree's make environment (substitutions' needs)
    dl: Path | None = None  # the SDK's DOWNLOAD_FOLDER: the tree's verified sources
    identity: str = ""  # the tree's (build/basefeed.py): part of the kept packages' key
    patch_set: str = ""  # the patch set's hash

    def choose(self, index: dict[str, Source]) -> dict[str, Source]:
        """The packages to compile: the library, and of what the image installs those that
        depend on it or are the flavour's variant of a package whose source directory the
        patch set changes (apk-wolfssl). Not the rest of a changed directory: hostapd-common
        (package/network/services/hostapd, which patch 0003 changes for the wpad variants)
        neither links the library nor changes with it."""
        if self.library not in index:
            raise WolfError(
                f"the base feed of {self.tree} has no package {self.library}",
                hint="give the OpenWrt tree of the SDK's release",
            )
        out = {}
        for name in sorted(self.wanted | {self.library}):
            src = index.get(name)
            if src is None:
                continue
            changed = any(t.startswith(f"package/{src.directory}/") for t in self.touched)
            variant = name.endswith("-" + self.library.removeprefix("lib"))
            if name == self.library or (changed and variant) or self.library in src.depends:
                out[name] = src
        return out


def feed_hash(feed: Path) -> str:
    """The patch-set part of the request hash: every file of the local feed, by path."""
    if not feed.is_dir():
        raise WolfError(
            f"local feed {feed} does not exist",
            hint="give --feed DIR (the patch set's feeds/wolf), or use --backend imagebuilder",
        )
    h = hashlib.sha256()
    for f in sorted(p for p in feed.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(feed)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:32]


class SDK:
    def __init__(self, top: Path) -> None:
        self.top = top
        if not (top / "scripts" / "feeds").is_file() or not (top / "Makefile").is_file():
            raise WolfError(
                f"{top} is not an OpenWrt SDK (no scripts/feeds or Makefile)",
                hint="give the unpacked openwrt-sdk-* directory",
            )

    def _run(
        self, argv: list[str], log: Path, what: str, env: tuple[tuple[str, str], ...] = ()
    ) -> proc.Completed:
        start = log.stat().st_size if log.is_file() else 0
        try:
            return proc.run(argv, cwd=self.top, timeout=MAKE_TIMEOUT, logfile=log,
                            env={**dict(env), "MAKEFLAGS": ""})  # fmt: skip
        except CommandError as e:
            first = first_error(log, start)
            msg = f"SDK {what} failed" + (f": {first}" if first else "")
            raise CommandError(msg, tail=e.tail, log=e.log) from None

    def build(
        self, names: tuple[str, ...], *, release: str, flavour: str, feed: Path | None, log: Path,
        jobs: int = 1, base: BaseFeed | None = None,
        before_compile: Callable[[list[str]], tuple[tuple[str, str], ...] | None] | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> list[Path]:  # fmt: skip
        """Compile the named packages of the local feed and, with a base feed, the packages
        it chooses; returns the package files. ``before_compile`` gets the package
        directories the SDK's make compiles (its closure, fill their sources there) and may
        return the make environment from then on;
        ``on_step`` a line per step."""
        step = on_step or (lambda s: None)
        for n in names:  # before any work: the feed is a folder of package folders
            if feed is None or not (feed / n / "Makefile").is_file():
                raise WolfError(
                    f"package {n} is not in the local feed {feed}",
                    hint="check data/flavours.toml sdk_luci_https and the feed",
                )
        conf = packages.feeds_conf(
            release, flavour, feed.resolve() if feed and names else None,
            base=base.tree / "package" if base else None, upstream=bool(names),
        )  # fmt: skip
        old = self.top / "feeds.conf"
        if not old.is_file() or old.read_text(errors="replace") != conf:
            # OpenWrt's scan caches package metadata in tmp/; it names the old feeds' paths
            shutil.rmtree(self.top / "tmp", ignore_errors=True)
        self._owned().write_text("feeds.conf", conf)
        env = base.env if base else ()
        step("scripts/feeds update -a")
        try:
            self._run(["./scripts/feeds", "update", "-a"], log, "feeds update", env)
        except CommandError as e:
            if not names:
                raise
            # the local feed's packages build against OpenWrt's own feeds (luci.mk)
            raise CommandError(
                f"{e.message}; the local feed's {', '.join(names)} needs OpenWrt's feeds "
                "from git.openwrt.org (data/feeds.toml); without them use --backend "
                "imagebuilder --luci-https (luci-light, uhttpd, px5g-wolfssl)",
                tail=e.tail,
                log=e.log,
            ) from None
        chosen = self._choose(base) if base else {}
        if chosen:
            self._run(["./scripts/feeds", "install", "-p", BASE, *chosen], log, "feeds install",
                      env)  # fmt: skip
        if names:
            self._run(["./scripts/feeds", "install", "-p", FEED, *names], log, "feeds install")
        for n in names:
            if not (self.top / "package" / "feeds" / FEED / n).exists():
                raise WolfError(
                    f"package {n} is not in the local feed {feed}",
                    hint="check data/flavours.toml sdk_luci_https and the feed",
                )
        step("make defconfig")
        self._configure([*names, *chosen], base, log)
        wanted = {FEED: list(names), BASE: list(chosen)}
        self._clear_stale(wanted)
        if before_compile is not None:
            # sources filled now may need their build variables (a substitute's
            # CMAKE_POLICY_VERSION_MINIMUM): the environment the fill returns
            env = before_compile(self.closure(log)) or env
        dirs = [*names, *dict.fromkeys(s.make_name for s in chosen.values())]
        for i, d in enumerate(dirs, 1):
            step(f"make package/{d}/compile ({i}/{len(dirs)})")
            self._run(["make", f"package/{d}/compile", f"-j{jobs}", "V=s"], log,
                      f"make package/{d}/compile", env)  # fmt: skip
        out = [self._built(FEED, n, r"[-_][^/]+", log) for n in names]
        # an ABI-versioned package's file names its ABI (libwolfssl5.9.2.0ca03cd3-5.9.2-r1.apk);
        # the version starts with a digit (libwolfssl-benchmark-... is another package) and
        # is not the index's (a git hash is shortened: 2024.07.28~99bd3d2b-r1)
        out += [self._built(BASE, n, ABI_AND_VERSION, log) for n in chosen]
        self._mark(out)
        return out

    def closure(self, log: Path) -> list[str]:
        """The package directories the SDK's make compiles for its .config, as paths
        below package/ (feeds/base/wolfssl, toolchain): the selected ones and what their
        compile depends on (its tmp/.packagedeps)."""
        from .sources.listing import compile_closure

        selected, added = compile_closure(self.top, log)
        return sorted({*selected, *added})

    # --- which package files are this run's ----------------------------------------------
    def _mark_file(self) -> Path:
        return self.top / "bin" / "packages" / BUILT_MARK

    def _mine(self) -> set[str]:
        """The package files earlier runs of ours left in bin/packages (by name)."""
        mark = self._mark_file()
        if not self._ours(mark):
            return set()
        text = bounded.read_file(mark, "SDK package list", MAX_INDEX).decode(errors="replace")
        return {ln.strip() for ln in text.splitlines() if ln.strip()}

    def _mark(self, files: list[Path]) -> None:
        mine = self._mine() | {str(f.relative_to(self.top / "bin" / "packages")) for f in files}
        o = self._owned()
        o.write_text(f"bin/packages/{BUILT_MARK}", "".join(f"{n}\n" for n in sorted(mine)))
        o.unlink(f"bin/packages/{BUILT_MARK}-pending")

    def _ours(self, mark: Path) -> bool:
        """Is the mark a regular file (no link at its name or on the way: a list is read
        only from a file we wrote there, one a link names is another's)?"""
        st = self._owned().stat(mark.relative_to(self.top))
        return st is not None and stat.S_ISREG(st.st_mode)

    def _owned(self) -> outputs.Owned:
        """The SDK, unpacked by us: what we write in it follows no link (a link at a file's
        name is replaced, a folder on the way that is one refused)."""
        return outputs.Owned(self.top, "the SDK")

    def _pending_file(self) -> Path:
        return self.top / "bin" / "packages" / (BUILT_MARK + "-pending")

    def _pending(self) -> set[tuple[str, str]]:
        """(feed, package) an earlier run of ours was compiling when it stopped (a failed
        make, a kill): the files of those packages are that run's, not a stranger's."""
        mark = self._pending_file()
        if not self._ours(mark):
            return set()
        text = bounded.read_file(mark, "SDK package list", MAX_INDEX).decode(errors="replace")
        return {(f, n) for f, _, n in (ln.partition("\t") for ln in text.splitlines()) if n}

    def _clear_stale(self, wanted: dict[str, list[str]]) -> None:
        """Before any compile: a file for a package we take that an earlier run of ours
        made (another patch set, another option, or a run that failed after making it) is
        removed, so only this run's file can be taken; one that no run of ours made (the
        user's own compile, another tool) is refused in one line rather than guessed about.
        Then this run's packages are written down as pending until it has marked its files."""
        pkgdir = self.top / "bin" / "packages"
        mine, pending = self._mine(), self._pending()
        for feed, names_ in wanted.items():
            for name in names_:
                tail = ABI_AND_VERSION if feed == BASE else r"[-_][^/]+"
                pattern = re.compile(re.escape(name) + tail + r"\.(apk|ipk)")
                for f in sorted(pkgdir.glob(f"*/{feed}/*")):
                    if not pattern.fullmatch(f.name):
                        continue
                    rel = str(f.relative_to(pkgdir))
                    if rel in mine or (feed, name) in pending:
                        f.unlink()
                        continue
                    raise WolfError(
                        f"the SDK's bin/packages holds {rel}, which no openwrt-wolf run made: "
                        f"a package of {name} this build would not know from its own",
                        hint=f"remove it (rm {f}) or give a fresh SDK",
                    )
        pending |= {(feed, n) for feed, names_ in wanted.items() for n in names_}
        pkgdir.mkdir(parents=True, exist_ok=True)
        self._owned().write_text(f"bin/packages/{BUILT_MARK}-pending",
                                 "".join(f"{f}\t{n}\n" for f, n in sorted(pending)))  # fmt: skip

    def _choose(self, base: BaseFeed) -> dict[str, Source]:
        path = self.top / "feeds" / f"{BASE}.index"
        text = bounded.read_file(path, "feed index", MAX_INDEX).decode(errors="replace")
        return base.choose(read_index(text, BASE, str(path)))

    def _configure(self, selected: list[str], base: BaseFeed | None, log: Path) -> None:
        """A .config selecting the packages (and the flavour's symbols), expanded by
        `make defconfig`; each must hold afterwards."""
        want = [(f"PACKAGE_{n}", "m") for n in selected] + list(base.config if base else ())
        # the SDK's Config.in selects every package by default (ALL=y): a package's build
        # options would follow packages nobody asked for (libwolfssl-benchmark makes
        # libwolfssl the full library, 1.12 MB instead of 668 kB on malta/be)
        lines = [f"# CONFIG_{k} is not set\n" for k in ALL_OFF]
        lines += [f"# CONFIG_{k} is not set\n" if v == "n" else f"CONFIG_{k}={v}\n"
                  for k, v in want]  # fmt: skip
        if base and base.dl is not None:  # the tree's verified sources (`sources`)
            base.dl.mkdir(parents=True, exist_ok=True)
            # .config is make syntax: the path must be a plain word (make_variable checks)
            dl = names.make_variable(f"DOWNLOAD_FOLDER={base.dl.resolve()}")
            key, _, val = dl.partition("=")
            lines.append(f'CONFIG_{key}="{val}"\n')
        self._owned().write_text(".config", "".join(lines))
        self._run(["make", "defconfig"], log, "make defconfig", base.env if base else ())
        got = dict(
            line[len("CONFIG_"):].split("=", 1)
            for line in (self.top / ".config").read_text(errors="replace").splitlines()
            if line.startswith("CONFIG_") and "=" in line
        )  # fmt: skip

        def kept(k: str, v: str) -> bool:
            if v == "n":
                return got.get(k) not in ("y", "m")
            return got.get(k) in ({"y", "m"} if v == "m" else {v})

        lost = [k for k, v in want if not kept(k, v)]
        if lost:
            raise WolfError(
                f"the SDK's make defconfig did not keep {', '.join(lost)}",
                hint=f"a dependency is missing from its feeds; see the log: {log}",
            )

    def _built(self, feed: str, name: str, tail: str, log: Path) -> Path:
        pattern = re.compile(re.escape(name) + tail + r"\.(apk|ipk)")
        found = sorted(
            (p for p in (self.top / "bin" / "packages").glob(f"*/{feed}/*")
             if pattern.fullmatch(p.name)),
            key=lambda p: p.stat().st_mtime,
        )  # fmt: skip
        if not found:
            raise WolfError(
                f"the SDK built no package file for {name} under bin/packages/*/{feed}/",
                hint=f"see the log: {log}",
            )
        return found[-1]


def package_name(file_name: str) -> str:
    """A package file's package name (its ABI suffix kept): libwolfssl5.9.2.0ca03cd3 of
    libwolfssl5.9.2.0ca03cd3-5.9.2-r1.apk; the version is what follows the last "-" that
    begins with a digit before the release."""
    stem = re.sub(r"\.(apk|ipk)$", "", file_name)
    m = re.match(r"^(.+?)-(\d[^-]*(?:-r\d+)?)$", stem)
    return m.group(1) if m else stem


def put_local_packages(ib_top: Path, files: list[Path]) -> None:
    """Copy packages into a working copy of an ImageBuilder's packages/ (removing the ones
    we put there before), where `make image` finds them and regenerates its index. The
    ImageBuilder's own files of the same packages leave this copy: apk would take the one of
    a higher version (a substitute's older commit), and OpenWrt's of the same name is not
    the patch set's (build/driver.py check_patch_set checks what it installs)."""
    pkgdir = ib_top / "packages"
    mark = pkgdir / LOCAL_MARK
    if mark.exists():
        for name in mark.read_text().split():
            (pkgdir / name).unlink(missing_ok=True)
    ours = {package_name(f.name) for f in files}
    for f in list(pkgdir.iterdir()):
        if f.suffix in (".apk", ".ipk") and package_name(f.name) in ours:
            f.unlink()
    o = outputs.Owned(ib_top, "the ImageBuilder's working copy")  # a link there: not followed
    for f in files:
        o.copy_file(f, f"packages/{f.name}")
    o.write_text(f"packages/{LOCAL_MARK}", "".join(f"{f.name}\n" for f in files))


KEPT = "kept.json"  # in a kept-packages folder: each file's name and sha256


def keep_packages(into: Path, files: list[Path], sdk: tuple[str, str | None]) -> list[Path]:
    """The SDK's package files copied into ``into`` (the cache, keyed by what made them),
    listed last with their sha256 and the SDK's name and sha256: a folder without the list,
    or with other bytes, is never served."""
    from .. import paths
    from ..files.hashing import file_sha256

    # in the cache: a folder on the way that is a link refused, a link at a name replaced
    owned, rel = paths.in_cache(into / KEPT)
    folder = rel.rpartition("/")[0]
    out = [owned.copy_file(f, f"{folder}/{f.name}" if folder else f.name) for f in files]
    listed = {"files": {f.name: file_sha256(f) for f in out}, "sdk": sdk[0], "sha256": sdk[1]}
    owned.write_text(rel, json.dumps(listed, sort_keys=True, indent=1) + "\n")
    return out


def kept_packages(into: Path) -> tuple[list[Path], tuple[str, str | None]] | None:
    """What keep_packages put in ``into``, when every file is there with its bytes: the
    files and the SDK that made them."""
    from ..files.hashing import file_sha256
    from ..trust import untrusted

    d = untrusted.load_cached(into / KEPT, "kept SDK packages", lambda d: d)
    if not isinstance(d, dict):
        return None
    files = d.get("files")
    if not isinstance(files, dict) or not files or not isinstance(d.get("sdk"), str):
        return None
    out = []
    for name, sha in sorted(files.items()):
        f = into / str(name)
        if "/" in str(name) or not f.is_file() or file_sha256(f) != sha:
            return None
        out.append(f)
    sha = d.get("sha256")
    return out, (d["sdk"], sha if isinstance(sha, str) else None)
