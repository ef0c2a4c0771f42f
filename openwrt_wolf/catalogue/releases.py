"""Releases as data (data/releases.toml)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from ..errors import WolfError
from ..paths import DATA_DIR, PROJECT_ROOT

DEFAULT_RELEASE = "25.12.5"


@dataclass(frozen=True)
class Release:
    name: str  # "25.12.5", "24.10.8", "snapshot"
    tag: str
    commit: str
    kernel: str
    package_manager: str  # "apk" or "opkg"
    download: str  # path under the download server: releases/25.12.5, snapshots
    profiles_json: bool
    versions: dict[str, str] = field(default_factory=dict)
    date: str | None = None
    patches: str | None = None  # the USE_WOLFSSL series that fits, relative to the project
    # include/version.mk's default VERSION_NUMBER in its tree, SDK and ImageBuilder
    # ("SNAPSHOT" on main); the release's name when not given
    version: str | None = None

    @property
    def version_number(self) -> str:
        return self.version or self.name

    def patches_dir(self) -> Path:
        if not self.patches:
            raise WolfError(
                f"no USE_WOLFSSL series for OpenWrt {self.name}",
                hint="refresh one: ./wolf patch --refresh --tree TREE --into patches/<dir>",
            )
        return PROJECT_ROOT / self.patches

    def target_url(self, base: str, target: str, subtarget: str) -> str:
        return f"{base.rstrip('/')}/{self.download}/targets/{target}/{subtarget}/"


@cache
def _raw() -> dict[str, object]:
    return tomllib.loads((DATA_DIR / "releases.toml").read_text())


@cache
def releases() -> dict[str, Release]:
    raw = _raw()["release"]
    assert isinstance(raw, dict)
    return {name: Release(name=name, **spec) for name, spec in raw.items()}


def server_base() -> str:
    server = _raw()["server"]
    assert isinstance(server, dict)
    return str(server["base"])


def get(name: str | None) -> Release:
    name = name or DEFAULT_RELEASE
    if name in ("main", "master", "snapshots"):
        name = "snapshot"
    try:
        return releases()[name.removeprefix("v")]
    except KeyError:
        known = ", ".join(releases())
        raise WolfError(f"unknown release {name!r}", hint=f"known releases: {known}") from None


def parse_openwrt_release(text: str) -> dict[str, str]:
    """/etc/openwrt_release (an image's, a router's): shell assignments DISTRIB_X='value'."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s*(DISTRIB_\w+)=(['\"]?)(.*)\2\s*$", line)
        if m:
            out[m.group(1)] = m.group(3)
    return out
