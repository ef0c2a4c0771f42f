"""TLS flavours as data (data/flavours.toml)."""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import WolfError
from ..paths import DATA_DIR


@dataclass(frozen=True)
class Flavour:
    name: str  # mbedtls, wolfssl, openssl
    title: str
    library: str
    openwrt_default: bool
    lib_globs: tuple[str, ...]
    raw: dict[str, Any]  # everything else the data file says (per-release package changes)


@cache
def _raw() -> dict[str, Any]:
    return tomllib.loads((DATA_DIR / "flavours.toml").read_text())


@cache
def flavours() -> dict[str, Flavour]:
    out = {}
    for name, spec in _raw()["flavour"].items():
        out[name] = Flavour(
            name=name,
            title=spec["title"],
            library=spec["library"],
            openwrt_default=spec.get("openwrt_default", False),
            lib_globs=tuple(spec["lib_globs"]),
            raw=spec,
        )
    return out


def glue_globs() -> tuple[str, ...]:
    return tuple(_raw()["common"]["glue_globs"])


def names() -> list[str]:
    return list(flavours())


def get(name: str) -> Flavour:
    try:
        return flavours()[name.strip().lower()]
    except KeyError:
        close = difflib.get_close_matches(name, names(), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"one of: {', '.join(names())}"
        raise WolfError(f"unknown flavour {name!r}", hint=hint) from None


def resolve_many(spec: str) -> list[Flavour]:
    """'all' or a comma-separated list."""
    if spec.strip() == "all":
        return list(flavours().values())
    out = [get(n.strip()) for n in spec.split(",") if n.strip()]
    if not out:
        raise WolfError(f"no flavour in {spec!r}", hint=f"one or more of: {', '.join(names())}")
    return out
