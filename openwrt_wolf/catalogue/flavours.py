"""TLS flavours as data (data/flavours.toml): the one place that knows a flavour's packages —
its library, the per-release package changes the build makes, what a flashed router must
show — read here into one typed model that every stage uses."""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import WolfError
from ..paths import DATA_DIR


@dataclass(frozen=True)
class PackageChanges:
    """One release's [flavour.<name>.release.<release>] table: what the build changes in
    OpenWrt's default packages (the comment above those tables says what each key means)."""

    replace: tuple[tuple[str, str], ...]  # sorted (from, to)
    add: tuple[str, ...]
    remove: tuple[str, ...]
    luci_https: tuple[str, ...]
    notes: tuple[str, ...]
    sdk_luci_https: tuple[str, ...] = ()  # built from the local feed by the SDK
    stock_notes: tuple[str, ...] = ()  # true of OpenWrt's own packages only (--stock)
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()  # `@name` in --packages expands to these


@dataclass(frozen=True)
class Installed:
    """[flavour.<name>.installed]: globs of the packages a flashed router must (not) show."""

    required: tuple[str, ...]
    forbidden: tuple[str, ...]
    apk_keeps: tuple[str, ...] = ()  # forbidden, but apk (no backend for the flavour) needs them


@dataclass(frozen=True)
class Flavour:
    name: str  # mbedtls, wolfssl, openssl
    title: str
    library: str
    openwrt_default: bool
    lib_globs: tuple[str, ...]
    releases: dict[str, PackageChanges]  # release name -> the build's package changes
    installed: Installed
    patched: bool = False  # the patch set makes its default build (`--stock`: OpenWrt's own)
    patch_set: Installed | None = None  # [flavour.<name>.patch_set]: what its image must hold


@cache
def _raw() -> dict[str, Any]:
    return tomllib.loads((DATA_DIR / "flavours.toml").read_text())


def _changes(spec: dict[str, Any]) -> PackageChanges:
    return PackageChanges(
        replace=tuple(sorted(spec.get("replace", {}).items())),
        add=tuple(spec.get("add", ())),
        remove=tuple(spec.get("remove", ())),
        luci_https=tuple(spec.get("luci_https", ())),
        notes=tuple(spec.get("notes", ())),
        sdk_luci_https=tuple(spec.get("sdk_luci_https", ())),
        stock_notes=tuple(spec.get("stock_notes", ())),
        groups=tuple(sorted((k, tuple(v)) for k, v in spec.get("groups", {}).items())),
    )


@cache
def flavours() -> dict[str, Flavour]:
    out = {}
    for name, spec in _raw()["flavour"].items():
        inst = spec["installed"]
        out[name] = Flavour(
            name=name,
            title=spec["title"],
            library=spec["library"],
            openwrt_default=spec.get("openwrt_default", False),
            lib_globs=tuple(spec["lib_globs"]),
            releases={rel: _changes(r) for rel, r in spec.get("release", {}).items()},
            installed=Installed(
                tuple(inst["required"]), tuple(inst["forbidden"]), tuple(inst.get("apk_keeps", ()))
            ),
            patched=bool(spec.get("patched", False)),
            patch_set=_patch_set(spec),
        )
    return out


def _patch_set(spec: dict[str, Any]) -> Installed | None:
    ps = spec.get("patch_set")
    return Installed(tuple(ps["required"]), tuple(ps["forbidden"])) if ps else None


@cache
def _library_package() -> re.Pattern[str]:
    libs = "|".join(re.escape(f.library) for f in flavours().values())
    return re.compile(rf"^lib({libs})(?:-?\d[\w.]*)?$")


def library_of_package(package: str) -> str | None:
    """The TLS library a manifest's package is, with or without the ABI suffix (libmbedtls,
    libmbedtls21, libwolfssl5.9.1.e624513f -> mbedtls, wolfssl), not its companions
    (libopenssl-conf): None."""
    m = _library_package().match(package)
    return m.group(1) if m else None


def glue_globs() -> tuple[str, ...]:
    return tuple(_raw()["common"]["glue_globs"])


def openwrt_default() -> Flavour:
    """The flavour OpenWrt's own images have (data/flavours.toml's openwrt_default: Mbed TLS):
    the one rule every stage asks."""
    return next(f for f in flavours().values() if f.openwrt_default)


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
