"""OpenWrt's ImageBuilder, driven through its own make interface
(target/imagebuilder/files/Makefile): `make info`, `make manifest`, `make image PROFILE=
PACKAGES= BIN_DIR= [FILES=]`; the kernel and rootfs pieces it leaves in $(KDIR)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..catalogue import names
from ..errors import CommandError, WolfError
from ..files import outputs
from ..host import hosttools
from ..paths import DATA_DIR
from ..trust import untrusted

MAKE_TIMEOUT = 3 * 3600.0  # the SDK's compile; the ImageBuilder's phases have their own


def phase_timeout(phase: str) -> float:
    """Seconds one make phase (info, manifest, image) may take: data/imagebuilders.toml
    [timeouts], or $OPENWRT_WOLF_TIMEOUT_<PHASE> for a slow machine. A hung `make info`
    must not be waited on for the hours an image may need."""
    name = f"OPENWRT_WOLF_TIMEOUT_{phase.upper()}"
    if value := os.environ.get(name):
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not 0 < seconds < float("inf"):
            raise WolfError(f"${name} {value!r} is not a number of seconds")
        return seconds
    raw = tomllib.loads((DATA_DIR / "imagebuilders.toml").read_text())
    return float(raw["timeouts"].get(phase, MAKE_TIMEOUT))


# What OpenWrt prints when an image does not fit (check-size, tplink-safeloader, mktplinkfw2).
# check-size's size is empty when a tool before it failed and the recipe removed the image.
SIZE_LINES = re.compile(
    r"(WARNING: Image file .* is too big: *\d* > \d+"
    r"|partition too big \(more than \d+ bytes\)"
    r"|images are too big by \d+ bytes"
    r"|kernel image is too big)"
)
PHASES = ("Installing packages...", "Finalizing root filesystem...", "Building images...",
          "Calculating checksums...")  # fmt: skip


@dataclass(frozen=True)
class Info:
    """`make info`: the target, OpenWrt's default packages and every profile's packages."""

    target: str
    default_packages: tuple[str, ...]
    profiles: dict[str, tuple[str, ...]]

    def defaults(self, profile: str) -> list[str]:
        """BUILD_PACKAGES before user packages: DEFAULT_PACKAGES + the profile's, where
        "-name" removes name (the same arithmetic as the ImageBuilder Makefile)."""
        pkgs = sorted(set(self.default_packages) | set(self.profiles.get(profile, ())))
        removed = {p[1:] for p in pkgs if p.startswith("-")}
        return [p for p in pkgs if not p.startswith("-") and p not in removed]


def parse_info(text: str) -> Info:
    target = ""
    defaults: tuple[str, ...] = ()
    profiles: dict[str, tuple[str, ...]] = {}
    current = None
    for line in text.splitlines():
        if m := re.match(r'^Current Target: "(.+)"', line):
            target = m.group(1)
        elif line.startswith("Default Packages:"):
            defaults = tuple(line.split(":", 1)[1].split())
        elif m := re.match(r"^(\S+):$", line):
            current = m.group(1)
            profiles[current] = ()
        elif current and (m := re.match(r"^\s+Packages:(.*)$", line)):
            profiles[current] = tuple(m.group(1).split())
    if not target or not profiles:
        raise WolfError(
            "`make info` printed no target or no profiles: is this an OpenWrt ImageBuilder?"
        )
    return Info(target, defaults, profiles)


def package_errors(
    text: str, requested: Iterable[str] = (), known: Iterable[str] = ()
) -> str | None:
    """OpenWrt's resolver messages (apk on 25.12+, opkg on 24.10) as one line, or None.
    apk and opkg name packages with their ABI suffix (libustream-openssl20201210): a name
    that is a `requested` one or a `known` one (the device's default packages) plus such a
    suffix is reported by that name."""
    missing = set(re.findall(r"^\s+(\S+) \(no such package\):", text, re.M))
    missing |= set(re.findall(r"Cannot install package (\S+)\.", text))
    conflicts: set[str] = set()
    for a, b in re.findall(r"^\s+([^\s:]+):\n\s+conflicts: ([^\s\[]+)", text, re.M):
        conflicts |= {a, b}
    conflicts |= set(re.findall(r"check_data_file_clashes: Package (\S+) wants", text))
    # opkg (24.10): "The following packages conflict with A:" then "check_conflicts_for: \tB"
    conflicts |= set(re.findall(r"The following packages conflict with (\S+):", text))
    conflicts |= set(re.findall(r"check_conflicts_for: \t(\S+)", text))
    conflicts |= set(re.findall(r"is already provided by package\s+\*\s+(\S+)", text))
    conflicts |= set(re.findall(r"ERROR: (\S+): trying to overwrite", text))
    conflicts |= set(re.findall(r"trying to overwrite \S+ owned by (\S+)\.", text))
    asked = {w.lstrip("-") for w in requested} | set(known)
    missing = {_plain(m, asked) for m in missing}
    known = asked | missing  # opkg's "Cannot install package" names what it was asked for
    conflicts = {_plain(_strip_version(c), known) for c in conflicts}
    missing -= conflicts
    if not missing and not conflicts:
        return None
    parts = []
    if missing:
        parts.append(f"unknown packages: {', '.join(sorted(missing))}")
    if conflicts:
        parts.append(f"conflicting packages: {', '.join(sorted(conflicts))}")
    return "; ".join(parts)


def _strip_version(name: str) -> str:
    # apk prints name-version (e.g. libustream-wolfssl-2025.10.03-r1)
    return re.sub(r"-\d[^-]*-r\d+$", "", name)


def _plain(name: str, known: set[str]) -> str:
    # opkg's Package: is <name><ABI_VERSION> (include/package-pack.mk), e.g. libmbedtls21,
    # libwolfssl5.9.1.ee39414e; only a requested name is taken off, never a guess
    if name in known:
        return name
    longest = sorted(known, key=lambda k: (-len(k), k))  # libfoo2 before libfoo
    return next((k for k in longest if re.fullmatch(rf"{re.escape(k)}\d[\w.]*", name)), name)


class ImageBuilder:
    """One unpacked ImageBuilder tree (a working copy: make writes into it)."""

    def __init__(self, top: Path) -> None:
        self.top = top
        if not (top / "Makefile").is_file():
            raise WolfError(
                f"{top} is not an ImageBuilder (no Makefile)",
                hint="give the unpacked openwrt-imagebuilder-* directory",
            )

    def make(
        self,
        target: str,
        *variables: str,
        log: Path,
        on_line: Callable[[str], None] | None = None,
    ) -> proc.Completed:
        return proc.run(
            ["make", target, *(names.make_variable(v) for v in variables)],
            cwd=self.top,
            timeout=phase_timeout(target),
            logfile=log,
            on_line=on_line,
            env={"MAKEFLAGS": ""},  # an outer make's jobserver must not leak into the IB
        )

    def info(self, log: Path) -> Info:
        try:
            return parse_info(self.make("info", log=log).output)
        except CommandError as e:
            raise _make_error(e, "make info") from None

    def manifest(
        self, profile: str, packages: str, log: Path, known: Iterable[str] = ()
    ) -> dict[str, str]:
        """`make manifest`: the packages the image would hold; the resolver's refusal as one
        clear line (names as requested, or as `known` names them: the default packages)."""
        try:
            out = self.make(
                "manifest", f"PROFILE={profile}", f"PACKAGES={packages}", "STRIP_ABI=1", log=log
            ).output
        except CommandError as e:
            text = "\n".join(e.tail)
            why = package_errors(_log_text(e) or text, packages.split(), known)
            if why:
                raise WolfError(
                    f"impossible package selection for {profile}: {why}",
                    hint=f"check the flavour in data/flavours.toml or --packages; log: {log}",
                ) from None
            raise _make_error(e, "make manifest") from None
        manifest = {}
        for line in out.splitlines():
            m = re.match(r"^(\S+) - (\S+)$", line.strip())
            if m:
                manifest[m.group(1)] = m.group(2)
        return manifest

    def image(
        self,
        profile: str,
        packages: str,
        bin_dir: Path,
        log: Path,
        *,
        files: Path | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> tuple[int, list[str]]:
        """`make image`; returns make's exit status and OpenWrt's own size lines.

        check-size only warns and deletes, so make succeeds; tplink-safeloader and mktplinkfw2
        exit 1 inside the recipe and make fails. A failure whose output holds such a size line
        is a too-big image (status non-zero, lines returned), anything else a make failure."""
        args = [f"PROFILE={profile}", f"PACKAGES={packages}", f"BIN_DIR={bin_dir}"]
        if files:
            args.append(f"FILES={files}")
        try:
            done = self.make("image", *args, log=log, on_line=on_line)
        except CommandError as e:
            lines = size_lines(_log_text(e))
            if lines and "timed out" not in e.message:
                return 2, lines
            raise _make_error(e, "make image") from None
        return done.returncode, size_lines(done.output)

    def mirrored_repositories(self, base: str, target: str, arch: str) -> list[str]:
        """The `repositories` lines (apk, 25.12+) that take packages from ``base``, a mirror
        of one release (<mirror>/releases/<version>): the ImageBuilder's own lines, written by
        FeedSourcesAppendAPK with %U = OpenWrt's release URL, moved to ``base``. A standalone
        ImageBuilder (CONFIG_IB_STANDALONE, as a buildroot makes it) has none: it gets the
        lines FeedSourcesAppendAPK writes, for the feeds a directory ``base`` holds."""
        own = self.top / "repositories"
        lines = []
        if own.is_symlink() or own.exists():  # anything but a small regular file: one line
            text = untrusted.read_text(own, "ImageBuilder repositories file", MAX_REPOSITORIES)
            for line in text.splitlines():
                m = _REPO_LINE.match(line.strip())
                if m:
                    lines.append(f"{m.group(1)}{base}/{m.group(2)}")
        if lines or re.match(r"^https?://", base):
            return lines
        top = Path(base)
        t, s = target.split("/")
        found = [top / "targets" / t / s / "packages" / "packages.adb"]
        feeds = sorted((top / "packages" / arch).glob("*/packages.adb"))
        found += [f for f in feeds if f.parent.name == "base"]
        found += [f for f in feeds if f.parent.name != "base"]
        return [str(f) for f in found if f.is_file()]

    @contextlib.contextmanager
    def repositories(self, lines: list[str]) -> Iterator[None]:
        """`repositories` holds ``lines`` while the block runs; the ImageBuilder's own file
        (or its absence) afterwards. Written by a new file renamed over it (a link there is
        replaced, never written through); an own file that is not a regular one is refused."""
        own = self.top / "repositories"
        kept = None
        if own.is_symlink() or own.exists():
            kept = untrusted.read_bytes(own, "ImageBuilder repositories file", MAX_REPOSITORIES)
        outputs.replace_bytes(own, "".join(f"{ln}\n" for ln in lines).encode())
        try:
            yield
        finally:
            if kept is None:
                own.unlink(missing_ok=True)
            else:
                outputs.replace_bytes(own, kept)

    def kdir(self, target: str) -> Path:
        """$(KDIR) = build_dir/target-<arch>_<libc>/linux-<target>_<subtarget>, where the
        ImageBuilder ships the kernels and writes root.squashfs."""
        t, s = target.split("/")
        found = sorted(self.top.glob(f"build_dir/target-*/linux-{t}_{s}"))
        if not found:
            raise WolfError(f"{self.top}: no build_dir/target-*/linux-{t}_{s} (KDIR)")
        return found[0]

    def clean_pieces(self, target: str) -> None:
        """Remove what `make image` generates in KDIR (root.*, tmp/), so the pieces measured
        afterwards are this build's. The shipped kernels stay."""
        k = self.kdir(target)
        for p in k.glob("root.*"):
            p.unlink()
        shutil.rmtree(k / "tmp", ignore_errors=True)


MAX_REPOSITORIES = 64 * 1024  # bytes of an ImageBuilder's repositories file


# FeedSourcesAppendAPK's lines after VERSION_SED_SCRIPT: "[# ]<release URL>/targets/<t>/<s>/
# packages/packages.adb" (or kmods/<kernel>/), "[# ]<release URL>/packages/<arch>/<feed>/..."
_REPO_LINE = re.compile(
    r"^(#\s*)?\S+/(targets/[^/\s]+/[^/\s]+/(?:packages|kmods/[^/\s]+)/packages\.adb"
    r"|packages/[^/\s]+/[^/\s]+/packages\.adb)$"
)


_IMAGE_FILE = re.compile(r"Image file (\S+) is")


def size_lines(text: str) -> list[str]:
    """OpenWrt's lines about an image that does not fit, as a record keeps them: check-size's
    image path cut to its name (the path is the build machine's: records of one request on two
    workers must be equal)."""
    return [_IMAGE_FILE.sub(lambda m: f"Image file {Path(m[1]).name} is", ln.strip())
            for ln in text.splitlines() if SIZE_LINES.search(ln)]  # fmt: skip


def _log_text(e: CommandError) -> str:
    # the resolver's message can be longer than the tail: read the command's part of the log
    if not e.log:
        return ""
    try:
        text = Path(e.log).read_text(errors="replace")
    except OSError:
        return ""
    return text[text.rfind("\n$ ") + 1 :]


def _make_error(e: CommandError, what: str) -> WolfError:
    if e.message.startswith("timed out"):
        phase = what.split()[-1]
        return CommandError(
            f"{what} did not finish within {phase_timeout(phase):g} s and was stopped (a hung "
            f"ImageBuilder? more time: OPENWRT_WOLF_TIMEOUT_{phase.upper()}=SECONDS)",
            tail=e.tail,
            log=e.log,
        )
    text = _log_text(e) or "\n".join(e.tail)
    if "No space left on device" in text:
        return WolfError(
            f"disk full during {what} (No space left on device); log: {e.log}",
            hint="free space in the cache directory or set OPENWRT_WOLF_CACHE to a bigger disk",
        )
    if "Prerequisite check failed" in text:
        absent = re.findall(r"Checking '([^']+)'\.\.\. failed", text)
        cat = hosttools.catalogue()
        named = [f"{t} ({cat[t].package})" if t in cat else t for t in absent]
        return WolfError(
            f"the ImageBuilder's prerequisite check failed: missing {', '.join(named) or '?'}",
            hint="install them with apt-get (Debian package names in parentheses)",
        )
    return CommandError(f"{what} failed (exit status non-zero)", tail=e.tail, log=e.log)
