"""The cross toolchain: Debian's mips-linux-gnu gcc by default (hard-float glibc sysroot), or
an OpenWrt SDK/toolchain given with --toolchain (soft-float musl, OpenWrt's real compiler)."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import WolfError
from ..host import hosttools
from .spec import Arch


def cross_tools(arch: Arch, given: str | None = None) -> list[str]:
    """Debian's cross compiler, binutils and C headers for `arch` (data/footprint/arch.toml),
    as host tool names (data/hosttools.toml); none when --toolchain gives another compiler.
    The build host's own arch needs none either: Debian's gcc and binutils are the group's."""
    if given or not arch.qemu:
        return []
    p = arch.debian_prefix
    return [f"{p}gcc", f"{p}strip", f"{p}size", f"{arch.sysroot}/include/stdio.h"]


def host_tools(arch: Arch, given: str | None = None) -> list[str]:
    """Every host tool the footprint lab needs for `arch`: the group's and the cross ones."""
    return [*hosttools.groups()["footprint"], *cross_tools(arch, given)]


@dataclass(frozen=True)
class Toolchain:
    prefix: str  # e.g. /usr/bin/mips-linux-gnu- ; tools are prefix + name
    version: str  # gcc -dumpfullversion
    target: str  # gcc -dumpmachine
    soft_float: bool  # configured --with-float=soft (OpenWrt's); Debian's mips is hard-float
    origin: str  # "debian" or the --toolchain path
    gcc_sha256: str
    sysroot: str  # where qemu-user finds the target's dynamic loader and C library

    def tool(self, name: str) -> str:
        return f"{self.prefix}{name}"

    @property
    def identity(self) -> str:
        """What the cache key needs: a different compiler binary is a different build."""
        return f"{self.target} gcc {self.version} {self.gcc_sha256[:16]} {self.prefix}"

    @property
    def float_abi(self) -> str:
        return "soft-float" if self.soft_float else "hard-float"


def _hint(arch: Arch) -> str:
    return (
        f"install Debian's cross toolchain: apt-get install {' '.join(arch.debian_packages)}; "
        "or pass --toolchain with an OpenWrt SDK/toolchain directory or a gcc path"
    )


def _gcc_in(path: Path) -> Path | None:
    """A *-gcc inside a toolchain or SDK directory (bin/, or staging_dir/toolchain-*/bin/)."""
    patterns = ("*-gcc", "bin/*-gcc", "staging_dir/toolchain-*/bin/*-gcc", "toolchain-*/bin/*-gcc")
    for pattern in patterns:
        hits = sorted(p for p in path.glob(pattern) if p.is_file() and "-gcc-" not in p.name)
        if hits:
            return hits[0]
    return None


def given(arch: Arch, path: str) -> Path:
    """The *-gcc of --toolchain PATH, found without running anything (checked before the
    lab installs its tools)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise WolfError(f"--toolchain {path}: no such file or directory", hint=_hint(arch))
    hit = _gcc_in(p) if p.is_dir() else (p if p.name.endswith("gcc") else None)
    if hit is None:
        raise WolfError(f"--toolchain {path}: no *-gcc compiler there", hint=_hint(arch))
    return hit


def find(arch: Arch, path: str | None = None) -> Toolchain:
    if path is None:
        found = shutil.which(f"{arch.debian_prefix}gcc")
        if not found:
            raise WolfError(f"cross compiler {arch.debian_prefix}gcc not found", hint=_hint(arch))
        if not Path(arch.sysroot, "include", "stdio.h").exists():
            raise WolfError(f"no C library headers in {arch.sysroot}/include", hint=_hint(arch))
        gcc = Path(found)
        origin = "debian"
    else:
        gcc = given(arch, path)
        origin = str(Path(path).expanduser())
    prefix = str(gcc)[: -len("gcc")]
    try:
        version = proc.run([gcc, "-dumpfullversion"], timeout=30).output.strip()
        target = proc.run([gcc, "-dumpmachine"], timeout=30).output.strip()
        verbose = proc.run([gcc, "-v"], timeout=30).output
        printed = proc.run([gcc, "-print-sysroot"], timeout=30, check=False).output.strip()
    except WolfError as e:
        raise WolfError(f"the compiler {gcc} does not run: {e.message}", hint=_hint(arch)) from None
    if target.split("-")[0] != arch.debian_prefix.split("-")[0]:
        raise WolfError(f"{gcc} targets {target}, not {arch.name}", hint=_hint(arch))
    digest = hashlib.sha256(Path(gcc).resolve().read_bytes()).hexdigest()
    if origin == "debian":
        sysroot = arch.sysroot
    else:  # OpenWrt's toolchains keep the C library beside bin/
        sysroot = printed if printed and printed != "/" else str(Path(gcc).parent.parent)
    return Toolchain(
        prefix=prefix,
        version=version,
        target=target,
        soft_float="--with-float=soft" in verbose,
        origin=origin,
        gcc_sha256=digest,
        sysroot=sysroot,
    )
