"""OpenWrt's buildroot (a full source tree), driven through its own interface: the USE_WOLFSSL
patch set applied with openwrt_wolf.patchset.series, a .config seed (templates/buildroot-config.j2,
data/buildroot.toml), `make defconfig`, `make -j N`, and what the build leaves in
bin/targets/<t>/<s>/ and in $(KDIR) = build_dir/target-*/linux-<t>_<s>/.

One tree holds one .config, so its builds run one after the other (the driver locks it)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import shutil
import stat
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .. import proc
from ..catalogue import names
from ..catalogue.devices import Device
from ..errors import CommandError, WolfError
from ..files.locks import locked
from ..patchset import series
from ..paths import DATA_DIR
from . import packages
from .imagebuilder import size_lines

MAKE_TIMEOUT = 12 * 3600.0  # a first full build compiles the toolchain
DEFCONFIG_TIMEOUT = 1800.0
MODES = ("defaults", "patchset", "explicit")


@dataclass(frozen=True)
class FlavourConfig:
    """data/buildroot.toml for one flavour."""

    name: str
    config: tuple[tuple[str, str], ...]  # Kconfig symbols (no CONFIG_) and their values
    packages: str  # one of MODES
    # what the patch set swaps beyond data/flavours.toml (apk-mbedtls -> apk-wolfssl)
    replace: tuple[tuple[str, str], ...] = ()
    # the SDK's .config symbols for the patch set's packages (a release SDK has no USE_WOLFSSL)
    sdk_config: tuple[tuple[str, str], ...] = ()

    def notes(self, notes: tuple[str, ...], cfg: dict[str, str] | None = None) -> tuple[str, ...]:
        """The flavour's notes as they hold in this tree: a note naming a package the patch
        set replaces (flavours.toml's "apk has no wolfSSL backend ... apk-mbedtls stays",
        true of OpenWrt's own packages) gives way to what the patch set does instead. With
        the expanded .config, only the swaps it shows (new package =y) count."""
        done = [(o, n) for o, n in self.replace if cfg is None or cfg.get(f"PACKAGE_{n}") == "y"]
        if not done:
            return notes
        kept = tuple(n for n in notes if not any(old in n for old, _ in done))
        swaps = ", ".join(f"{new} replaces {old}" for old, new in done)
        return (*kept, f"the USE_WOLFSSL patch set: {swaps}")

    def symbols(self) -> list[str]:
        """The config part of the request: what the seed sets besides packages."""
        return [f"CONFIG_{k}={v}" for k, v in self.config]


@cache
def _data() -> dict[str, object]:
    return tomllib.loads((DATA_DIR / "buildroot.toml").read_text())


# CONFIG_SDK / CONFIG_IB: the buildroot also makes OpenWrt's SDK and ImageBuilder archives
SDK_IB = (("IB", "y"), ("SDK", "y"))


def stages() -> list[tuple[str, str]]:
    """(name, make target) of each build stage, in order (data/buildroot.toml)."""
    raw = _data().get("stages", [["world", ""]])
    assert isinstance(raw, list)
    return [(str(n), str(t)) for n, t in raw]


def flavour(name: str, *, sdk_ib: bool = False) -> FlavourConfig:
    """The flavour's selection; ``sdk_ib`` adds CONFIG_SDK=y and CONFIG_IB=y to its seed."""
    spec = _data().get("flavour", {})
    assert isinstance(spec, dict)
    fl = spec.get(name)
    if not isinstance(fl, dict):
        raise WolfError(
            f"flavour {name} has no buildroot selection in data/buildroot.toml",
            hint="add a [flavour.<name>] table there",
        )
    mode = str(fl.get("packages", ""))
    if mode not in MODES:
        raise WolfError(
            f"data/buildroot.toml: flavour {name}: packages = {mode!r}",
            hint=f"one of: {', '.join(MODES)}",
        )
    config = {str(k): str(v) for k, v in dict(fl.get("config", {})).items()}
    if sdk_ib:
        config.update(SDK_IB)
    swap = {str(k): str(v) for k, v in dict(fl.get("replace", {})).items()}
    names.packages([*swap, *swap.values()], "data/buildroot.toml replace")
    sdk = {str(k): str(v) for k, v in dict(fl.get("sdk_config", {})).items()}
    return FlavourConfig(name, tuple(sorted(config.items())), mode, tuple(sorted(swap.items())),
                   tuple(sorted(sdk.items())))  # fmt: skip


def seed_changes(
    r: packages.Rules,
    fl: FlavourConfig,
    *,
    luci_https: bool,
    extra: tuple[str, ...],
    defaults: list[str] | None = None,
) -> packages.Changes:
    """The packages the seed names. Only the "explicit" mode names the flavour's
    replacements, and given the device's ``defaults`` only those whose package is one of
    them (as with the ImageBuilder); with "patchset" the patched Kconfig swaps OpenWrt's
    defaults itself."""
    extra = tuple(packages.expand(r, extra))  # before the replacements are dropped below
    if fl.packages != "explicit":
        r = dataclasses.replace(r, replace=())
    return packages.changes(r, defaults, luci_https=luci_https, extra=extra)


def patch_set_hash(patches_dir: Path) -> str:
    """Every series' name and its patches' names and contents, in order."""
    h = hashlib.sha256()
    for s in series.load(patches_dir):
        h.update(f"series {s.name}\0".encode())
        for p in s.patches:
            h.update(f"{p.name}\0{p.sha256()}\0".encode())
    return h.hexdigest()[:32]


def parse_config(text: str) -> dict[str, str]:
    """A .config as {symbol without CONFIG_: value}; "# CONFIG_X is not set" gives "n"."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if m := re.match(r"^CONFIG_([A-Za-z0-9_.+-]+)=(.*)$", line):
            out[m.group(1)] = m.group(2).strip('"')
        elif m := re.match(r"^# CONFIG_([A-Za-z0-9_.+-]+) is not set$", line):
            out[m.group(1)] = "n"
    return out


def target_symbols(dev: Device) -> list[str]:
    """scripts/target-metadata.pl: TARGET_<board>, TARGET_<board>_<subtarget> and, for a
    device (Target-Profile: DEVICE_<name>), TARGET_<board>_<subtarget>_DEVICE_<name> (malta:
    its one profile, `target_profile` in the catalogue, TARGET_malta_be_Default);
    confstr turns "/", "." and "-" of the target into "_"."""
    board = re.sub(r"[/.-]", "_", dev.target)
    sub = f"{board}_{re.sub(r'[/.-]', '_', dev.subtarget)}"
    # targets without device profiles (malta) have one Target-Profile, named in the catalogue
    profile = str(dev.extra.get("target_profile") or f"DEVICE_{dev.profile}")
    return [f"TARGET_{board}", f"TARGET_{sub}", f"TARGET_{sub}_{profile}"]


def render_seed(c: packages.Changes, fl: FlavourConfig, dev: Device, release: str) -> str:
    """The .config seed (templates/buildroot-config.j2)."""
    symbols = target_symbols(dev)
    board, sub = (s.removeprefix("TARGET_") for s in symbols[:2])
    return packages.render(
        "buildroot-config.j2",
        flavour=fl.name,
        release=release,
        board=board,
        subtarget=sub.removeprefix(f"{board}_"),
        profile=dev.profile,
        profile_symbol=symbols[2],
        config=(*dev.buildroot_config, *fl.config),
        remove=c.remove,
        add=c.add,
    )


def drop_truncated_objects(top: Path) -> list[Path]:
    """Remove the empty `*.o` files under build_dir/: a build killed hard (SIGKILL, a lost
    machine) leaves the object the compiler was writing empty but newer than its source, and
    make, resuming from OpenWrt's stamps, links it ("undefined reference" to everything in it).
    No compiler writes an empty object, so none of these is a real one. Links are not
    followed; the paths removed, relative to top."""
    gone: list[Path] = []
    root = top / "build_dir"
    for d, _dirs, files in os.walk(root):
        for name in files:
            if not name.endswith(".o"):
                continue
            p = Path(d) / name
            with contextlib.suppress(OSError):
                st = p.lstat()
                if stat.S_ISREG(st.st_mode) and st.st_size == 0:
                    p.unlink()
                    gone.append(p.relative_to(top))
    return sorted(gone)


class Tree:
    """One OpenWrt source tree (git checkout or release source tarball)."""

    def __init__(self, top: Path) -> None:
        self.top = top.expanduser().resolve()
        if not self.top.is_dir():
            raise WolfError(f"--tree {self.top} is not a directory", hint="give an OpenWrt tree")
        for need in ("Makefile", "include/target.mk", "config/Config-build.in"):
            if not (self.top / need).is_file():
                raise WolfError(
                    f"{self.top} is not an OpenWrt buildroot (no {need})",
                    hint="give the top of an OpenWrt source tree (git clone or source tarball)",
                )

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """The tree itself, against a second openwrt-wolf run on it (a build, `invoke
        sources`), whatever cache either uses: the lock file lives in the tree."""
        return locked(self.top / ".wolf-tree.lock")

    def seed_for(
        self,
        dev: Device,
        r: packages.Rules,
        fl: FlavourConfig,
        release: str,
        log: Path,
        *,
        luci_https: bool = False,
        extra: tuple[str, ...] = (),
    ) -> tuple[str, packages.Changes]:
        """The flavour's .config seed for the device and the package changes in it. The
        "explicit" flavours replace only what the device has by default, which this tree's
        `make defconfig` of the device alone tells (it rewrites .config)."""
        defaults = self.defaults(dev, release, log) if fl.packages == "explicit" else None
        changes = seed_changes(r, fl, luci_https=luci_https, extra=extra, defaults=defaults)
        return self.seed(changes, fl, dev, release), changes

    def identity(self) -> str:
        """The tree's version for the request hash: git HEAD, else the `version` file a
        release source tarball carries (scripts/getver.sh's output). Uncommitted edits other
        than the patch set are not part of it (use --force after editing the tree)."""
        if (self.top / ".git").exists():
            try:
                out = proc.run(["git", "-C", str(self.top), "rev-parse", "HEAD"], timeout=60)
            except CommandError as e:
                raise WolfError(f"cannot read the git HEAD of {self.top}: {e.message}") from None
            return f"git:{out.output.strip()}"
        v = self.top / "version"
        if v.is_file() and v.read_text().strip():
            return f"version:{v.read_text().strip()}"
        raise WolfError(
            f"cannot identify the tree {self.top}: neither a git checkout nor a `version` file",
            hint="use a git checkout or an OpenWrt source tarball (it has a `version` file)",
        )

    def apply_patches(self, patches_dir: Path) -> list[series.Outcome]:
        """The patch set, idempotently: an applied series is left as it is."""
        return series.apply(self.top, series.load(patches_dir))

    def seed(self, c: packages.Changes, fl: FlavourConfig, dev: Device, release: str) -> str:
        return render_seed(c, fl, dev, release)

    def _make(
        self, argv: list[str], log: Path, timeout: float, on_line: Callable[[str], None] | None
    ) -> proc.Completed:
        return proc.run(argv, cwd=self.top, timeout=timeout, logfile=log, on_line=on_line,
                        env=self.make_env())  # fmt: skip

    def make_env(self) -> dict[str, str]:
        """The environment of a make over this tree's packages (here or in an SDK): an outer
        make's jobserver must not leak in; substituted sources may need variables
        (wolf-substitutions.json "env", build/sources/dl.py)."""
        from .sources.dl import read_substitutions

        subs = read_substitutions(self.top)
        env = {**dict(subs.env if subs else ()), "MAKEFLAGS": ""}
        if os.geteuid() == 0:  # GNU tar's and coreutils' configure refuse root without it
            env["FORCE_UNSAFE_CONFIGURE"] = "1"
        return env

    def defconfig(self, seed: str, log: Path) -> dict[str, str]:
        """Write the seed as .config, expand it with `make defconfig`, return the result."""
        from ..files.outputs import Owned  # a link at .config replaced, not written through

        Owned(self.top, "the OpenWrt tree").write_text(".config", seed)
        try:
            self._make(["make", "defconfig"], log, DEFCONFIG_TIMEOUT, None)
        except CommandError as e:
            raise CommandError("make defconfig failed", tail=e.tail, log=e.log) from None
        return parse_config((self.top / ".config").read_text())

    def defaults(self, dev: Device, release: str, log: Path) -> list[str]:
        """The device's default packages: what `make defconfig` selects from a seed that
        names only the device."""
        seed = self.seed(packages.Changes((), (), ()), FlavourConfig("mbedtls", (), "defaults"),
                         dev, release)  # fmt: skip
        cfg = self.defconfig(seed, log)
        return sorted(k.removeprefix("PACKAGE_") for k, v in cfg.items()
                      if k.startswith("PACKAGE_") and v == "y")  # fmt: skip

    def clean_outputs(self, dev: Device) -> None:
        """Remove the previous build's images and rootfs pieces: make does not, and a stale
        image would be measured when this build's was deleted as too big."""
        shutil.rmtree(self.bin_dir(dev), ignore_errors=True)
        for k in self._kdirs(dev):
            for p in k.glob("root.*"):
                p.unlink()

    def make(
        self,
        jobs: int,
        log: Path,
        on_line: Callable[[str], None] | None = None,
        phases: dict[str, float] | None = None,
        on_stage: Callable[[str], None] | None = None,
    ) -> tuple[int, list[str]]:
        """`make -j N` stage by stage (data/buildroot.toml `stages`): make's status and
        OpenWrt's own size lines; each stage's seconds go into ``phases`` as make:<stage>.
        As with the ImageBuilder, a failure whose output names a too-big image is that,
        anything else a make failure naming its stage."""
        output: list[str] = []
        if dropped := drop_truncated_objects(self.top):
            note = (f"removed {len(dropped)} empty object file(s) a killed build left, so make "
                    f"compiles them again: {', '.join(str(p) for p in dropped[:5])}")  # fmt: skip
            with log.open("a", encoding="utf-8") as f:
                f.write(note + "\n")
            if on_line:
                on_line(note)
        for name, target in stages():
            if on_stage:
                on_stage(name)
            t = time.monotonic()
            try:
                status, lines = self._make_one(jobs, target, log, on_line)
            finally:
                if phases is not None:
                    phases[f"make:{name}"] = time.monotonic() - t
            output += lines
            if status != 0:
                return status, output
        return 0, output

    def _make_one(
        self, jobs: int, target: str, log: Path, on_line: Callable[[str], None] | None
    ) -> tuple[int, list[str]]:
        argv = ["make", f"-j{jobs}", *([target] if target else [])]
        try:
            done = self._make(argv, log, MAKE_TIMEOUT, on_line)
        except CommandError as e:
            text = _command_log(e)
            lines = size_lines(text)
            if lines and "timed out" not in e.message:
                return 2, lines
            if "No space left on device" in text:
                raise WolfError(
                    f"disk full during make -j{jobs} (No space left on device); log: {e.log}",
                    hint="free space where the tree is",
                ) from None
            raise CommandError(f"{' '.join(argv)} failed", tail=e.tail, log=e.log) from None
        return done.returncode, size_lines(done.output)

    def bin_dir(self, dev: Device) -> Path:
        return self.top / "bin" / "targets" / dev.target / dev.subtarget

    def _kdirs(self, dev: Device) -> list[Path]:
        return sorted(self.top.glob(f"build_dir/target-*/linux-{dev.target}_{dev.subtarget}"))

    def kdir(self, dev: Device) -> Path:
        """$(KDIR), where the build leaves <profile>-kernel.bin and root.squashfs."""
        found = self._kdirs(dev)
        if not found:
            raise WolfError(
                f"{self.top}: make left no build_dir/target-*/linux-{dev.target}_"
                f"{dev.subtarget} (KDIR)"
            )
        return found[0]


def verify(
    cfg: dict[str, str], dev: Device, fl: FlavourConfig, r: packages.Rules, c: packages.Changes
) -> None:
    """The expanded .config has what the flavour needs; else one line naming the symbol.
    (Kconfig drops symbols it does not know and overrides what a `select` forces.)"""
    hint = "see the .config in the tree; `make menuconfig` shows the symbol's dependencies"
    for sym in target_symbols(dev):
        if cfg.get(sym) != "y":
            raise WolfError(
                f"CONFIG_{sym} is not =y after make defconfig: the tree has no such "
                f"target or device ({dev.profile})",
                hint="check the release of the tree and the device name",
            )
    for sym, want in dev.buildroot_config:
        if (cfg.get(sym) or "n") != want:
            raise WolfError(
                f"CONFIG_{sym}={want} is not in the .config after make defconfig "
                f"({cfg.get(sym) or 'unknown to the tree'}); the catalogue's {dev.profile} "
                "needs it",
                hint=hint,
            )
    for sym, want in fl.config:
        got = cfg.get(sym)
        if (got or "n") != want:
            why = "unknown to the tree's Kconfig" if got is None else f"={got}"
            patched = fl.packages == "patchset"
            raise WolfError(
                f"CONFIG_{sym}={want} is not in the .config after make defconfig ({why}); "
                f"the {fl.name} flavour needs it",
                hint="is the USE_WOLFSSL patch set applied? `invoke patch --status --tree PATH`"
                if patched
                else hint,
            )
    # the patch set's own swaps, where the tree's Kconfig knows the new package (the
    # stand-in tree of the tests has no apk-wolfssl)
    swaps = [(old, new) for old, new in fl.replace if f"PACKAGE_{new}" in cfg]
    for old, new in (*r.replace, *swaps):
        if cfg.get(f"PACKAGE_{old}") == "y":
            raise WolfError(
                f"CONFIG_PACKAGE_{old}=y after make defconfig: the {fl.name} flavour replaces "
                f"it with {new}",
                hint=hint,
            )
    for old, new in swaps:  # each must have happened
        if cfg.get(f"PACKAGE_{new}") != "y":
            raise WolfError(
                f"CONFIG_PACKAGE_{new} is not =y after make defconfig: the patch set replaces "
                f"{old} with it",
                hint="is the USE_WOLFSSL patch set applied? `invoke patch --status --tree PATH`",
            )
    swapped = any(cfg.get(f"PACKAGE_{new}") == "y" for _, new in r.replace)
    if fl.packages != "defaults" and r.replace and not swapped:
        raise WolfError(
            f"CONFIG_PACKAGE_{r.replace[0][1]} is not =y after make defconfig (nor any "
            f"other {fl.name} replacement)",
            hint=hint,
        )
    for name in c.add:
        if cfg.get(f"PACKAGE_{name}") != "y":
            raise WolfError(
                f"CONFIG_PACKAGE_{name} is not =y after make defconfig: the tree has no such "
                "package or its dependencies are not met",
                hint="run `./scripts/feeds install` for feed packages; " + hint,
            )
    for name in c.remove:
        if cfg.get(f"PACKAGE_{name}") == "y":
            raise WolfError(
                f"CONFIG_PACKAGE_{name}=y after make defconfig, the request removes it "
                "(another package selects it)",
                hint=hint,
            )


def read_manifest(bin_dir: Path, dev: Device) -> dict[str, str]:
    """The image's "name - version" manifest: per device with per-device rootfs, else the
    subtarget's one."""
    found = sorted(bin_dir.glob(f"*{dev.profile}.manifest")) or sorted(bin_dir.glob("*.manifest"))
    out: dict[str, str] = {}
    if found:
        for line in found[0].read_text().splitlines():
            if m := re.match(r"^(\S+) - (\S+)$", line.strip()):
                out[m.group(1)] = m.group(2)
    return out


def _command_log(e: CommandError) -> str:
    if not e.log:
        return "\n".join(e.tail)
    try:
        text = Path(e.log).read_text(errors="replace")
    except OSError:
        return "\n".join(e.tail)
    return text[text.rfind("\n$ ") + 1 :]
