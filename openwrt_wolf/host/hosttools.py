"""Host tools as data (data/hosttools.toml): which command comes from which Debian package,
checking for them, and installing missing ones with apt on first use."""

from __future__ import annotations

import os
import shutil
import tomllib
from dataclasses import dataclass
from functools import cache

from .. import proc
from ..errors import WolfError
from ..paths import DATA_DIR


@dataclass(frozen=True)
class HostTool:
    name: str  # a command on PATH, or an absolute path of a file a package ships
    package: str
    why: str
    path: str | None = None

    def present(self) -> bool:
        if self.name.startswith("/"):
            return os.path.exists(self.name)
        return shutil.which(self.name) is not None or bool(self.path and os.path.exists(self.path))


@cache
def catalogue() -> dict[str, HostTool]:
    raw = tomllib.loads((DATA_DIR / "hosttools.toml").read_text())
    tools = {name: HostTool(name, **spec) for name, spec in raw["tools"].items()}
    tools |= {name: HostTool(name, **spec) for name, spec in raw["files"].items()}
    return tools


@cache
def groups() -> dict[str, list[str]]:
    raw = tomllib.loads((DATA_DIR / "hosttools.toml").read_text())
    return {k: list(v) for k, v in raw["groups"].items()}


def group(name: str) -> str:
    """A group name from the command line, checked against data/hosttools.toml."""
    if name not in groups():
        raise WolfError(f"unknown host tool group {name!r}", hint=f"one of: {', '.join(groups())}")
    return name


def tools_for(group_or_names: str | list[str]) -> list[HostTool]:
    names = groups()[group(group_or_names)] if isinstance(group_or_names, str) else group_or_names
    cat = catalogue()
    unknown = [n for n in names if n not in cat]
    if unknown:
        raise WolfError(f"host tool(s) not in data/hosttools.toml: {', '.join(unknown)}")
    return [cat[n] for n in names]


def missing(group_or_names: str | list[str]) -> list[HostTool]:
    return [t for t in tools_for(group_or_names) if not t.present()]


def _can_install() -> list[str] | None:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo"):
        return ["sudo", "-n"]
    return None


def ensure(group_or_names: str | list[str], *, install: bool = True) -> None:
    """Make sure the tools are there: apt-get install the missing ones when we may (root or
    password-less sudo), else one line naming the Debian packages to install."""
    absent = missing(group_or_names)
    if not absent:
        return
    packages = sorted({t.package for t in absent})
    names = ", ".join(t.name for t in absent)
    prefix = _can_install() if install and shutil.which("apt-get") else None
    if prefix is None:
        raise WolfError(
            f"missing host tools: {names}",
            hint=f"install them with: sudo apt-get install {' '.join(packages)}",
        )
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    proc.run([*prefix, "apt-get", "update", "-qq"], timeout=600, env=env)
    proc.run(
        [*prefix, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
        timeout=1800,
        env=env,
    )
    still = missing(group_or_names)
    if still:
        raise WolfError(f"still missing after apt-get install: {', '.join(t.name for t in still)}")
