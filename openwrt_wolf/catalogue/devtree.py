"""Read device facts from an OpenWrt source tree, the way its build would see them.

For each target/subtarget: the target Makefile and <subtarget>/target.mk give ARCH, CPU_TYPE
and FEATURES (-> arch packages and the squashfs block size); image/Makefile with the .mk files
it includes gives Device/Default and every `define Device/<name>` listed in TARGET_DEVICES.
Each device is evaluated as include/image.mk's `define Device` does it: Device/InitProfile,
Device/Init, Device/Default, then Device/<name>, all call-expanded first and then eval'd.
The device's DTS gives the firmware partition, a cross-check of IMAGE_SIZE.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ..errors import WolfError
from ..paths import DATA_DIR
from ..units import parse_size
from . import dts
from .devices import Partition
from .mk import Make, MakeError, Refused, Work, read_defines, read_source

# include/image.mk's `define Device` runs these stanzas in this order
_STANZAS = ("Device/InitProfile", "Device/Init", "Device/Default")
# The squashfs block size rule of config/Config-images.in, for trees that predate it there
_FALLBACK_BLOCK_RULE = [("64", "LOW_MEMORY_FOOTPRINT"),
                        ("1024", "SMALL_FLASH && !LOW_MEMORY_FOOTPRINT"), ("256", "")]  # fmt: skip
_FALLBACK_FEATURES = {"low_mem": ["LOW_MEMORY_FOOTPRINT"], "small_flash": ["SMALL_FLASH"]}


@dataclass(frozen=True)
class Subtarget:
    target: str
    subtarget: str
    arch_packages: str  # ARCH_CPU_TYPE[_CPU_SUBTYPE], e.g. mips_24kc
    features: tuple[str, ...]
    squashfs_block: int  # CONFIG_TARGET_SQUASHFS_BLOCK_SIZE's default for these FEATURES
    profiles: int = 0  # devices in TARGET_DEVICES; 0 for a legacy image Makefile (malta)

    @property
    def path(self) -> str:
        return f"{self.target}/{self.subtarget}"


@dataclass
class TreeDevice:
    profile: str
    target: str
    subtarget: str
    arch_packages: str
    squashfs_block: int
    title: str
    soc: str
    image_size: int | None
    image_size_text: str  # as the Makefile spells it ("7360k"), for writing it back
    kernel_size: int | None
    kernel_size_text: str
    blocksize: int | None
    blocksize_text: str
    recipe: str
    sysupgrade: str  # the resolved IMAGE/sysupgrade.bin pipeline ("" when it has none)
    images: tuple[str, ...]  # IMAGES: the image files the device builds
    device_packages: tuple[str, ...]
    supported_devices: tuple[str, ...]
    tplink: dict[str, str] = field(default_factory=dict)  # TPLINK_* variables, lower-cased
    firmware: dts.Firmware | None = None
    broken: bool = False  # BROKEN := 1: OpenWrt does not build it by default
    notes: list[str] = field(default_factory=list)

    @property
    def target_path(self) -> str:
        return f"{self.target}/{self.subtarget}"

    @property
    def firmware_partition(self) -> Partition | None:
        return self.firmware.partition if self.firmware else None

    @property
    def flash_size(self) -> int | None:
        """The flash size the DTS implies: partitions' end, rounded up to a power of two."""
        end = self.firmware.flash_end if self.firmware else None
        if not end:
            return None
        size = 1
        while size < end:
            size *= 2
        return size

    def dts_unknown_reason(self) -> str:
        """Why dts_check() is 'unknown', in words that group devices (no file names)."""
        if self.image_size is None:
            return "the device sets no IMAGE_SIZE (NAND/UBI or size from the build config)"
        note = self.firmware.note if self.firmware else "no DTS"
        note = re.sub(r"target/linux/\S+\.dts", "its .dts", note)
        return re.sub(r" \(includes not in the tree: .*\)", " (includes missing)", note)

    def dts_check(self) -> str:
        """'ok', 'differs' or 'unknown': IMAGE_SIZE against the DTS firmware partition."""
        part = self.firmware_partition
        if self.image_size is None or part is None:
            return "unknown"
        return "ok" if part.size == self.image_size else "differs"


@dataclass(frozen=True)
class Unreadable:
    profile: str
    target: str
    subtarget: str
    reason: str


@dataclass
class TreeRead:
    tree: str
    version: str | None
    subtargets: list[Subtarget] = field(default_factory=list)
    devices: list[TreeDevice] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def subtarget(self, target: str, subtarget: str) -> Subtarget | None:
        return next((s for s in self.subtargets if (s.target, s.subtarget) == (target, subtarget)),
                    None)  # fmt: skip


# --- the tree -------------------------------------------------------------------------------


def check_tree(tree: Path) -> Path:
    need = ("include/image.mk", "target/linux", "rules.mk")
    missing = [n for n in need if not (tree / n).exists()]
    if not tree.is_dir() or missing:
        raise WolfError(
            f"{tree} is not an OpenWrt source tree (no {', '.join(missing) or 'directory'})",
            hint="give the top directory of an OpenWrt checkout, e.g. /work/trees/openwrt-25.12.5",
        )
    return tree.resolve()


def _tree_text(tree: Path, rel: str) -> str | None:
    """A file of the tree (read_source: a regular file inside it, bounded), None when absent."""
    path = tree / rel
    return read_source(path, tree.resolve(), "file") if os.path.lexists(path) else None


def tree_version(tree: Path) -> str | None:
    """VERSION_NUMBER's default in include/version.mk (e.g. 25.12.5; SNAPSHOT on main)."""
    text = _tree_text(tree, "include/version.mk")
    if text is None:
        return None
    m = re.search(r"^VERSION_NUMBER:=\$\(if \$\(VERSION_NUMBER\),\$\(VERSION_NUMBER\),([^)]+)\)",
                  text, re.M)  # fmt: skip
    return m.group(1).strip() if m else None


def targets(tree: Path) -> list[str]:
    base = tree / "target/linux"
    return sorted(p.name for p in base.iterdir() if (p / "Makefile").is_file())


@cache
def recipe_patterns() -> dict[str, tuple[tuple[str, ...], list[str]]]:
    """kind -> (the IMAGES names its pipeline builds, the pipelines)."""
    raw = tomllib.loads((DATA_DIR / "recipes.toml").read_text())
    return {kind: (tuple(spec.get("images", ["sysupgrade.bin"])), list(spec["sysupgrade"]))
            for kind, spec in raw["recipe"].items()}  # fmt: skip


def sysupgrade_images() -> list[str]:
    """Every image name a recipe kind is recognised by, sysupgrade.bin first."""
    names = [n for images, _ in recipe_patterns().values() for n in images]
    return list(dict.fromkeys(["sysupgrade.bin", *names]))


def _pipeline(text: str) -> str:
    return " | ".join(" ".join(step.split()) for step in text.split("|"))


def recipe_kind(pipeline: str, blocksize: str, image: str = "sysupgrade.bin") -> str:
    """The catalogue's recipe kind for a resolved IMAGE/<image> pipeline."""
    have = _pipeline(pipeline)
    for kind, (images, patterns) in recipe_patterns().items():
        if image not in images:
            continue
        for pat in patterns:
            if _pipeline(pat.replace("$(BLOCKSIZE)", blocksize)) == have:
                return kind
    return "other"


# --- squashfs block size from FEATURES ------------------------------------------------------


def _feature_symbols(tree: Path) -> dict[str, list[str]]:
    """FEATURES word -> Kconfig symbols it selects (scripts/target-metadata.pl)."""
    text = _tree_text(tree, "scripts/target-metadata.pl")
    if text is None:
        return _FALLBACK_FEATURES
    out: dict[str, list[str]] = {}
    for m in re.finditer(r'/\^([\w-]+)\$/ and \$ret \.= "([^"]*)"', text):
        out[m.group(1)] = re.findall(r"select (\w+)", m.group(2))
    return out or _FALLBACK_FEATURES


def _block_rule(tree: Path) -> list[tuple[str, str]]:
    """(value, condition) defaults of TARGET_SQUASHFS_BLOCK_SIZE in config/Config-images.in."""
    text = _tree_text(tree, "config/Config-images.in")
    if text is None:
        return _FALLBACK_BLOCK_RULE
    # [ \t]*, not \s*: over a run of blank lines \s* made the search take its square
    m = re.search(
        r"config TARGET_SQUASHFS_BLOCK_SIZE\n(.*?)(?:\n[ \t]*help|\n[ \t]*config )", text, re.S
    )
    if not m:
        return _FALLBACK_BLOCK_RULE
    rule = re.findall(r"^[ \t]*default (\d+)(?: if (.+))?$", m.group(1), re.M)
    return [(v, c.strip()) for v, c in rule] or _FALLBACK_BLOCK_RULE


def _kconfig_true(cond: str, symbols: set[str]) -> bool:
    """Evaluate a Kconfig condition of symbols, !, &&, || and parentheses."""
    tokens = re.findall(r"\w+|&&|\|\||!|\(|\)", cond)
    if len(tokens) > 100:  # OpenWrt's has 6; each token may be a level of recursion below
        raise Refused(f"config/Config-images.in: a block size condition of {len(tokens)} tokens")
    pos = 0

    def atom() -> bool:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok == "!":
            return not atom()
        if tok == "(":
            v = disj()
            pos += 1  # ')'
            return v
        return tok in symbols

    def conj() -> bool:
        nonlocal pos
        v = atom()
        while pos < len(tokens) and tokens[pos] == "&&":
            pos += 1
            v = atom() and v
        return v

    def disj() -> bool:
        nonlocal pos
        v = conj()
        while pos < len(tokens) and tokens[pos] == "||":
            pos += 1
            v = conj() or v
        return v

    try:
        return disj() if tokens else True
    except IndexError:  # "(" or "!" with nothing after it
        raise Refused("config/Config-images.in: a block size condition that ends early") from None


def squashfs_block(features: tuple[str, ...], tree: Path) -> int:
    fmap = _feature_symbols(tree)
    symbols = {s for f in features for s in fmap.get(f, [])}
    for value, cond in _block_rule(tree):
        if not cond or _kconfig_true(cond, symbols):
            return int(value) * 1024
    return 256 * 1024


# --- target and subtargets ------------------------------------------------------------------


def _seed(tree: Path, target: str, work: Work) -> Make:
    m = Make(root=tree, work=work)
    for name, value in {
        "TOPDIR": str(tree),
        "INCLUDE_DIR": str(tree / "include"),
        "SCRIPT_DIR": str(tree / "scripts"),
        "PLATFORM_DIR": str(tree / "target/linux" / target),
        "BOARD": target,
        "comma": ",",
        "space": " ",
        "empty": "",
        "BuildTarget": "",  # the build itself: nothing to read there
        "BuildImage": "",
    }.items():
        m.set(name, value)
    m.set("qstrip", '$(strip $(subst ",,$(1)))', recursive=True)
    return m


def read_subtargets(
    tree: Path, target: str, work: Work | None = None
) -> list[tuple[Subtarget, Make]]:
    """Each subtarget with the Make variables its target Makefile + target.mk leave; ``work``
    is what the read may still cost (a new read's when None)."""
    work = work or Work()
    tdir = tree / "target/linux" / target
    probe = _seed(tree, target, work)
    probe.include = lambda word: None
    probe.eval_file(tdir / "Makefile")
    names = probe.get("SUBTARGETS").split() or sorted(
        p.parent.name for p in tdir.glob("*/target.mk")
    )
    out = []
    for sub in names or ["generic"]:
        m = _seed(tree, target, work)
        m.set("SUBTARGET", sub)
        sub_mk = tdir / sub / "target.mk"

        def hook(word: str, sub_mk: Path = sub_mk) -> Path | None:
            # include/target.mk pulls in the subtarget's target.mk: that part is what we need
            here = word.endswith("include/target.mk") and os.path.lexists(sub_mk)
            return sub_mk if here else None  # read_source refuses what is no regular file

        m.include = hook
        m.eval_file(tdir / "Makefile")
        arch, cpu, cpusub = m.get("ARCH"), m.get("CPU_TYPE"), m.get("CPU_SUBTYPE")
        cpu = cpu or _default_cpu_types(tree).get(arch, "")
        arch_pkgs = m.get("ARCH_PACKAGES").strip() or (
            arch + (f"_{cpu}" if cpu else "") + (f"_{cpusub}" if cpusub else "")
        )
        features = tuple(m.get("FEATURES").split())
        out.append((Subtarget(target, sub, arch_pkgs, features, squashfs_block(features, tree)), m))
    return out


def _default_cpu_types(tree: Path) -> dict[str, str]:
    """include/target.mk's `CPU_TYPE ?= ...` per ARCH (aarch64: generic), which the subtarget
    stands in for when it is read in its place: armsr/armv8 is aarch64_generic."""
    text = _tree_text(tree, "include/target.mk") or ""
    found = re.findall(r"ifeq \(\$\(ARCH\),([\w.-]+)\)\s*\n\s*CPU_TYPE \?= ?(\S+)", text)
    return dict(found)


# --- devices --------------------------------------------------------------------------------


def _image_env(tree: Path, target: str, sub_env: Make) -> Make:
    """The image Makefile's variables and defines, as they stand when BuildImage runs."""
    image_dir = tree / "target/linux" / target / "image"
    env = sub_env.copy()
    env.cwd = image_dir
    text = _tree_text(tree, "include/image.mk")
    if text is None:
        raise MakeError("cannot read include/image.mk: No such file or directory")
    env.vars.update(read_defines(text, _STANZAS[:2]))

    def hook(word: str) -> Path | None:
        p = Path(word)
        if not p.is_absolute():
            return image_dir / p
        # rules.mk, image.mk and friends: the build's machinery, not device facts
        return p if p.is_relative_to(tree / "target/linux" / target) else None

    env.include = hook
    env.eval_file(image_dir / "Makefile")
    return env


def _size(env: Make, name: str, profile: str, notes: list[str]) -> tuple[int | None, str]:
    text = env.get(name, (profile,)).strip()
    if not text:
        return None, ""
    try:
        return parse_size(text, what=name), text
    except WolfError:
        shell = [n for n in env.notes if n.startswith("skipped $(shell")]
        if not shell:
            raise
        # e.g. mediatek's sd-card images: 64 + CONFIG_TARGET_ROOTFS_PARTSIZE megabytes
        notes.append(f"{name} depends on the build configuration ({shell[-1][8:]}...)")
        return None, ""


def _resolved(env: Make, name: str, profile: str, keep: tuple[str, ...] = ()) -> str:
    """A variable expanded until no $ is left (image recipes are expanded twice by make)."""
    e = env.copy()
    for k in keep:
        e.set(k, f"\x00{k}\x00")
    text = e.get(name, (profile,))
    for _ in range(4):
        if "$" not in text:
            break
        text = e.expand(text, (profile,))
    for k in keep:
        text = text.replace(f"\x00{k}\x00", f"$({k})")
    return " ".join(text.split())


def _device_env(base: Make, profile: str) -> Make:
    stanza = f"Device/{profile}"
    if not base.defined(stanza):
        raise MakeError(f"TARGET_DEVICES lists it, but no `define {stanza}` exists")
    # Like `$(eval $(call BuildImage))`: every stanza is call-expanded against the image
    # Makefile's globals first, then the result is eval'd in the device's own variables.
    text = "\n".join(
        base.expand(base.raw(s) or "", (profile,)) for s in (*_STANZAS, stanza) if base.defined(s)
    )
    env = base.copy()
    env.eval(text, (profile,), where=stanza)
    return env


def device_variables(
    tree: Path, target: str, subtarget: str, profile: str, names: Sequence[str]
) -> dict[str, str]:
    """The named variables of one device, and every TPLINK_* it sets, expanded as its image
    recipes see them (KERNEL, IMAGE/sysupgrade.bin, IMAGE_SIZE, ...)."""
    tree = check_tree(Path(tree))
    for st, sub_env in read_subtargets(tree, target, Work()):
        if st.subtarget != subtarget:
            continue
        try:
            env = _device_env(_image_env(tree, target, sub_env), profile)
            names = [*names, *sorted(k for k in env.vars if k.startswith("TPLINK_"))]
            return {n: _resolved(env, n, profile) for n in dict.fromkeys(names)}
        except MakeError as e:
            raise WolfError(f"{target}/{subtarget} {profile}: cannot read it: {e}") from None
    raise WolfError(f"no subtarget {target}/{subtarget} in {tree}")


def read_device(base: Make, profile: str, st: Subtarget, tree: Path) -> TreeDevice:
    """Evaluate one device; MakeError or WolfError says why it could not be read."""
    env = _device_env(base, profile)
    args = (profile,)
    notes: list[str] = []
    image_size, image_text = _size(env, "IMAGE_SIZE", profile, notes)
    kernel_size, kernel_text = _size(env, "KERNEL_SIZE", profile, notes)
    blocksize, block_text = _size(env, "BLOCKSIZE", profile, notes)
    images = env.get("IMAGES", args).split()
    pipeline = ""
    image = next((n for n in sysupgrade_images() if n in images and env.defined(f"IMAGE/{n}")),
                 None)  # fmt: skip
    if image is not None:
        pipeline = _resolved(env, f"IMAGE/{image}", profile)
        recipe = recipe_kind(pipeline, block_text, image)
    else:
        recipe = "other"
        notes.append(f"no sysupgrade.bin image (IMAGES: {' '.join(images) or 'none'})")
    tplink = {
        k.lower(): env.get(k, args).strip()
        for k in sorted(env.vars)
        if k.startswith("TPLINK_") and env.get(k, args).strip()
    }
    dev = TreeDevice(
        profile=profile,
        target=st.target,
        subtarget=st.subtarget,
        arch_packages=st.arch_packages,
        squashfs_block=st.squashfs_block,
        title=" ".join(env.get("DEVICE_TITLE", args).split()),
        soc=env.get("SOC", args).strip(),
        image_size=image_size,
        image_size_text=image_text,
        kernel_size=kernel_size,
        kernel_size_text=kernel_text,
        blocksize=blocksize,
        blocksize_text=block_text,
        recipe=recipe,
        sysupgrade=pipeline,
        images=tuple(images),
        device_packages=tuple(env.get("DEVICE_PACKAGES", args).split()),
        supported_devices=tuple(env.get("SUPPORTED_DEVICES", args).split()),
        tplink=tplink,
        broken=bool(env.get("BROKEN", args).strip()),
        notes=notes,
    )
    dev.firmware = _firmware(env, profile, tree, st.target)
    return dev


def _firmware(env: Make, profile: str, tree: Path, target: str) -> dts.Firmware:
    names = env.get("DEVICE_DTS", (profile,)).split()
    dts_dir_text = env.get("DEVICE_DTS_DIR", (profile,)).strip()
    image_dir = tree / "target/linux" / target / "image"
    dts_dir = (
        (image_dir / dts_dir_text).resolve()
        if dts_dir_text
        else tree / "target/linux" / target / "dts"
    )
    if not names:
        return dts.Firmware("", None, None, "the device sets no DEVICE_DTS")
    path = dts_dir / f"{names[0]}.dts"
    rel = str(path.relative_to(tree)) if path.is_relative_to(tree) else str(path)
    # a DTS outside the tree (the kernel's, or where a link leads) is not read
    inside = Path(os.path.realpath(path)).is_relative_to(tree)
    if not inside or not os.path.lexists(path):
        return dts.Firmware(rel, None, None, f"{rel} is not in the tree (kernel DTS?)")
    return dts.firmware(path, [dts_dir, tree / "target/linux" / target / "dts"], rel, tree)


def read_tree(
    tree: Path,
    want_targets: list[str] | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> TreeRead:
    """Read every device of the given targets (all targets when None)."""
    tree = check_tree(Path(tree))
    have = targets(tree)
    chosen = want_targets or have
    unknown = [t for t in chosen if t not in have]
    if unknown:
        raise WolfError(
            f"target {', '.join(unknown)} is not in {tree}/target/linux",
            hint=f"targets there: {', '.join(have)}",
        )
    result = TreeRead(str(tree), tree_version(tree))
    work = Work()  # the whole read's: a bomb in one target ends it, not just that target
    for target in chosen:
        work.target()
        try:
            subs = read_subtargets(tree, target, work)
        except MakeError as e:
            result.notes.append(f"{target}: cannot read target Makefile: {e}")
            continue
        for st, sub_env in subs:
            try:
                base = _image_env(tree, target, sub_env)
            except MakeError as e:
                result.notes.append(f"{st.path}: cannot read image Makefile: {e}")
                result.subtargets.append(st)
                continue
            profiles = list(dict.fromkeys(base.get("TARGET_DEVICES").split()))
            result.subtargets.append(
                Subtarget(
                    st.target,
                    st.subtarget,
                    st.arch_packages,
                    st.features,
                    st.squashfs_block,
                    len(profiles),
                )
            )
            for profile in profiles:
                try:
                    result.devices.append(read_device(base, profile, st, tree))
                except Refused:
                    raise  # what no OpenWrt tree holds: the read ends
                except (MakeError, WolfError) as e:
                    result.unreadable.append(Unreadable(profile, target, st.subtarget, str(e)))
            if progress:
                progress(st.path, len(profiles))
    return result
