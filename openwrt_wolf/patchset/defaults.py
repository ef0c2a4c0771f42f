"""Default package selection per device, read from an OpenWrt tree the way its build does it.

OpenWrt's target scan (include/scan.mk with DUMP=1) writes each target's Default-Packages into
tmp/.targetinfo; scripts/target-metadata.pl turns that into Kconfig, where each device profile
`select`s DEFAULT_<package>. We run those two real steps on a scratch copy of the tree's
target files and evaluate the `select ... if <condition>` lines for a given USE_WOLFSSL value,
so a patched and a pristine tree can be compared package by package.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import proc
from ..errors import WolfError
from . import series

DEFAULT_TARGETS = ("ath79/generic", "ramips/mt76x8", "malta/be")
_SCAN_TIMEOUT = 600.0


@dataclass
class TargetDefaults:
    target: str
    default_packages: list[str]  # the Default-Packages line of the scan, in order
    profiles: dict[str, list[str]] = field(default_factory=dict)  # profile -> DEFAULT_* selected


@dataclass
class DefaultsReport:
    tree: str
    use_wolfssl: bool
    targets: dict[str, TargetDefaults]


def _scratch_copy(tree: Path, boards: set[str], dest: Path) -> None:
    """Only what the target scan reads: include/, scripts/, rules.mk and the chosen boards."""
    for part in ("include", "scripts"):
        shutil.copytree(tree / part, dest / part, symlinks=True)
    shutil.copy2(tree / "rules.mk", dest / "rules.mk")
    for b in sorted(boards):
        src = tree / "target" / "linux" / b
        if not src.is_dir():
            raise WolfError(f"no target/linux/{b} in {tree}", hint="check --targets")
        shutil.copytree(src, dest / "target" / "linux" / b, symlinks=True)
    generic = tree / "target" / "linux" / "generic"
    if generic.is_dir():
        shutil.copytree(generic, dest / "target" / "linux" / "generic", symlinks=True)
    (dest / "tmp" / "info").mkdir(parents=True)


def scan(tree: Path, targets: tuple[str, ...], work: Path) -> tuple[str, str]:
    """Run the real target scan and Kconfig generator; return (.targetinfo, Kconfig text)."""
    for f in ("include/scan.mk", "scripts/target-metadata.pl", "rules.mk"):
        if not (tree / f).is_file():
            raise WolfError(f"{tree} is not an OpenWrt tree (no {f})", hint="pass --tree PATH")
    gawk = shutil.which("gawk")
    if not gawk:
        raise WolfError("gawk not found (OpenWrt's scan.awk needs it)", hint="apt-get install gawk")
    top = work / "openwrt"
    if targets == ("all",):
        boards = {
            d.name for d in (tree / "target" / "linux").iterdir() if (d / "Makefile").is_file()
        }
    else:
        boards = {t.split("/")[0] for t in targets}
    _scratch_copy(tree, boards, top)
    bindir = work / "bin"
    bindir.mkdir()
    (bindir / "awk").symlink_to(gawk)  # scan.mk calls plain `awk`
    env = {"PATH": f"{bindir}:{Path('/usr/bin')}:{Path('/bin')}", "TOPDIR": str(top)}
    proc.run(
        [
            "make",
            "-r",
            "-s",
            "-f",
            "include/scan.mk",
            "SCAN_TARGET=targetinfo",
            "SCAN_DIR=target/linux",
            "SCAN_NAME=target",
            "SCAN_DEPTH=3",
            "SCAN_EXTRA=",
            "SCAN_MAKEOPTS=TARGET_BUILD=1",
            f"TOPDIR={top}",
            "SCAN_COOKIE=1",
        ],
        cwd=top,
        env=env,
        timeout=_SCAN_TIMEOUT,
    )
    info = top / "tmp" / ".targetinfo"
    text = info.read_text(encoding="utf-8") if info.is_file() else ""
    if "Target:" not in text:
        raise WolfError(f"the target scan of {tree} produced no target info")
    kconfig = proc.run(
        ["perl", "scripts/target-metadata.pl", "config", "tmp/.targetinfo"],
        cwd=top,
        env=env,
        timeout=_SCAN_TIMEOUT,
    ).output
    return text, kconfig


def parse_default_packages(targetinfo: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in targetinfo.splitlines():
        if line.startswith("Target: "):
            current = line.split(":", 1)[1].strip()
        elif line.startswith("Default-Packages:") and current:
            out[current] = line.split(":", 1)[1].split()
    return out


def _holds(cond: str, symbols: dict[str, bool]) -> bool:
    """A conjunction of (possibly negated) symbols, as target-metadata.pl writes them."""
    for lit in filter(None, (x.strip() for x in cond.split("&&"))):
        neg = lit.startswith("!")
        val = symbols.get(lit.lstrip("!"), False)
        if val == neg:
            return False
    return True


def device_selects(kconfig: str, conf: str, symbols: dict[str, bool]) -> dict[str, list[str]]:
    """DEFAULT_* packages each profile (`config TARGET_<conf>_<profile>`) selects: DEVICE_*
    profiles, or a legacy target's single `Default` profile (malta)."""
    out: dict[str, list[str]] = {}
    head = re.compile(rf"^config TARGET_{re.escape(conf)}_(\S+)$")
    sel = re.compile(r"^\s+select DEFAULT_(\S+?)(?: if (.+))?$")
    depends = f"depends on TARGET_{conf}"
    profiles: set[str] = set()  # blocks that depend on the target itself; subtarget configs
    current: str | None = None  # such as TARGET_lantiq_xrx200_legacy also match `head`
    for line in kconfig.splitlines():
        m = head.match(line)
        if m:
            current = m.group(1)
            out[current] = []
            continue
        if current is None:
            continue
        if line and not line[0].isspace():
            current = None
        elif line.strip() == depends:
            profiles.add(current)
        elif (s := sel.match(line)) and _holds(s.group(2) or "", symbols):
            out[current].append(s.group(1))
    return {k: sorted(v) for k, v in out.items() if k in profiles}


def collect(
    tree: Path, targets: tuple[str, ...] = DEFAULT_TARGETS, *, use_wolfssl: bool = False
) -> DefaultsReport:
    """Default-Packages and per-profile selections of ``targets`` (or ("all",))."""
    with tempfile.TemporaryDirectory(prefix="wolf-defaults-") as tmp:
        info, kconfig = scan(tree, targets, Path(tmp))
    defaults = parse_default_packages(info)
    symbols = {"USE_WOLFSSL": use_wolfssl, "TARGET_PER_DEVICE_ROOTFS": False}
    report: dict[str, TargetDefaults] = {}
    if targets == ("all",):  # every leaf target (subtargets, or boards without any)
        parents = {t.split("/")[0] for t in defaults if "/" in t}
        targets = tuple(sorted(t for t in defaults if t not in parents))
    for t in targets:
        if t not in defaults:
            raise WolfError(f"target {t} not found in the scan of {tree}", hint="check --targets")
        conf = t.replace("/", "_").replace("-", "_")
        report[t] = TargetDefaults(t, defaults[t], device_selects(kconfig, conf, symbols))
    return DefaultsReport(str(tree), use_wolfssl, report)


@dataclass
class Change:
    target: str
    profile: str  # "" for the Default-Packages line
    removed: list[str]
    added: list[str]


def compare(before: DefaultsReport, after: DefaultsReport) -> list[Change]:
    changes: list[Change] = []
    for t, b in before.targets.items():
        a = after.targets[t]
        if b.default_packages != a.default_packages:
            changes.append(
                Change(
                    t,
                    "",
                    sorted(set(b.default_packages) - set(a.default_packages)),
                    sorted(set(a.default_packages) - set(b.default_packages)),
                )
            )
        for dev in sorted(set(b.profiles) | set(a.profiles)):
            bp, ap = set(b.profiles.get(dev, [])), set(a.profiles.get(dev, []))
            if bp != ap:
                changes.append(Change(t, dev, sorted(bp - ap), sorted(ap - bp)))
    return changes


def patched_copy(tree: Path, dest: Path) -> Path:
    """A copy of the scan inputs of ``tree`` with our series applied (the tree is untouched)."""
    openwrt_series = [s for s in series.load() if s.subdir == ""]
    # the scan's inputs, and every package directory the series patches
    touched = {str(Path(f).parent) for s in openwrt_series for f in s.touched()}
    parts = {"include", "scripts", "target", "config"} | {
        t for t in touched if t.startswith("package/") and (tree / t).is_dir()
    }
    for part in sorted(parts):
        if (tree / part).is_dir() and not (dest / part).exists():
            shutil.copytree(tree / part, dest / part, symlinks=True)
    for f in ("rules.mk", "Config.in"):
        shutil.copy2(tree / f, dest / f)
    series.apply(dest, openwrt_series)
    return dest


@dataclass
class DefaultsComparison:
    """Pristine tree vs. patched copy, USE_WOLFSSL off and on: what a release engineer checks."""

    tree: str
    targets: list[str]
    profiles: int
    default_packages: dict[str, list[str]]  # the pristine scan's Default-Packages per target
    off_changes: list[Change]
    on_changes: list[Change]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DefaultsComparison:
        return cls(
            d["tree"],
            list(d["targets"]),
            d["profiles"],
            {k: list(v) for k, v in d["default_packages"].items()},
            [Change(**c) for c in d["off_changes"]],
            [Change(**c) for c in d["on_changes"]],
        )


def compare_tree(tree: Path, targets: tuple[str, ...], work: Path) -> DefaultsComparison:
    before = collect(tree, targets)
    patched = patched_copy(tree, work / "patched")
    off = collect(patched, targets, use_wolfssl=False)
    on = collect(patched, targets, use_wolfssl=True)
    return DefaultsComparison(
        str(tree),
        sorted(before.targets),
        sum(len(t.profiles) for t in before.targets.values()),
        {t: td.default_packages for t, td in before.targets.items()},
        compare(before, off),
        compare(before, on),
    )
