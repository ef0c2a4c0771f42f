"""Host tools as data (data/hosttools.toml): which command comes from which Debian package,
checking for them, and installing missing ones with apt on first use."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import struct
import time
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .. import proc
from ..errors import WolfError
from ..paths import DATA_DIR

log = logging.getLogger("openwrt_wolf.hosttools")

# The locks apt and dpkg take (fcntl write locks, as apt's GetLock): the frontend lock first.
APT_LOCKS = (
    "/var/lib/dpkg/lock-frontend",
    "/var/lib/dpkg/lock",
    "/var/lib/apt/lists/lock",
    "/var/cache/apt/archives/lock",
)
APT_LOCK_TIMEOUT = 600  # s, like apt's own -o DPkg::Lock::Timeout=600


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
    wait_for_apt()
    # apt waits too, for a lock taken between our check and its start
    wait = f"DPkg::Lock::Timeout={APT_LOCK_TIMEOUT}"
    proc.run([*prefix, "apt-get", "-o", wait, "update", "-qq"], timeout=600 + APT_LOCK_TIMEOUT,
             env=env)  # fmt: skip
    proc.run(
        [*prefix, "apt-get", "-o", wait, "install", "-y", "-qq", "--no-install-recommends",
         *packages],
        timeout=1800 + APT_LOCK_TIMEOUT,
        env=env,
    )  # fmt: skip
    still = missing(group_or_names)
    if still:
        raise WolfError(f"still missing after apt-get install: {', '.join(t.name for t in still)}")


def apt_lock_holder(path: str) -> int | None:
    """The pid holding an apt/dpkg lock file, or None when it is free (or not there)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        # struct flock on Linux x86-64/aarch64: short type, short whence, off_t start, len, pid
        query = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        got = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        ltype, _w, _s, _l, pid = struct.unpack("hhqqi4x", got)
        return None if ltype == fcntl.F_UNLCK else pid
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EAGAIN):
            return -1
        return None
    finally:
        os.close(fd)


def _process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def wait_for_apt(timeout: float = APT_LOCK_TIMEOUT, poll: float = 1.0) -> None:
    """Wait while another apt or dpkg (an unattended upgrade, a second shell) holds its
    locks, saying so once, as apt's DPkg::Lock::Timeout does; WolfError after ``timeout``."""
    deadline = time.monotonic() + timeout
    said = False
    while True:
        held = [(p, pid) for p in APT_LOCKS if (pid := apt_lock_holder(p)) is not None]
        if not held:
            return
        path, pid = held[0]
        who = f"process {pid} ({_process_name(pid)})" if pid > 0 else "another process"
        if time.monotonic() > deadline:
            raise WolfError(
                f"apt is still busy after {timeout:g} s: {path} is held by {who}",
                hint="wait for it to finish (or stop it), then re-run",
            )
        if not said:
            log.warning("apt is busy: %s is held by %s; waiting up to %g s for it", path, who,
                        timeout)  # fmt: skip
            said = True
        time.sleep(poll)
