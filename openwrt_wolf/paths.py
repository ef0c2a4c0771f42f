"""Where things live on disk: results store, download cache, logs. Environment overrides first."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(__file__).resolve().parent / "data"


def store_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Results store: --store, else $OPENWRT_WOLF_STORE, else ./results of the project."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get("OPENWRT_WOLF_STORE")
    return Path(env).expanduser() if env else PROJECT_ROOT / "results"


def cache_dir() -> Path:
    """Downloads and builds reused across runs: $OPENWRT_WOLF_CACHE or ~/.cache/openwrt-wolf."""
    env = os.environ.get("OPENWRT_WOLF_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "openwrt-wolf"
