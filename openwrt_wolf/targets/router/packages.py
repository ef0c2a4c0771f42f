"""Installed packages on a router (apk on 25.12+, opkg on 24.10) and whether they match a TLS
flavour (data/flavour_packages.toml)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from typing import Any

from ...catalogue import flavours
from ...errors import WolfError
from ...paths import DATA_DIR
from ..target import Target

# apk prints name-version. A version is apk's grammar (digits and dots, a letter, _suffixes,
# a ~hash, an optional -rN): px5g-mbedtls-11, libudebug-2026.01.16~875e1a7a; the first "-"
# whose rest is one splits, as names hold "-<digit>" too (kmod-8021q) and end in an ABI
# version (libwolfssl5.9.1.e624513f-5.9.1-r1).
_APK_VERSION = re.compile(r"\d+(\.\d+)*[a-z]?(_[a-z]+\d*)*(~[0-9a-f]+)?(-r\d+)?")


@dataclass(frozen=True)
class FlavourRule:
    flavour: str
    required: tuple[str, ...]
    forbidden: tuple[str, ...]
    apk_keeps: tuple[str, ...] = ()  # forbidden, but apk (no backend for the flavour) needs them


@dataclass(frozen=True)
class PackageCheck:
    manager: str  # apk or opkg
    flavour: str
    installed: dict[str, str]  # name -> version
    tls_packages: tuple[str, ...]  # installed names any rule of any flavour mentions
    missing: tuple[str, ...]  # required globs that matched nothing
    unwanted: tuple[str, ...]  # installed packages a forbidden glob matched

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unwanted


@cache
def rules() -> dict[str, FlavourRule]:
    raw: dict[str, Any] = tomllib.loads((DATA_DIR / "flavour_packages.toml").read_text())
    out = {}
    for name, spec in raw["flavour"].items():
        out[name] = FlavourRule(
            name,
            tuple(spec["required"]),
            tuple(spec["forbidden"]),
            tuple(spec.get("apk_keeps", ())),
        )
    unknown = set(out) - set(flavours.names())
    if unknown:
        raise WolfError(
            f"flavour_packages.toml names unknown flavours: {', '.join(sorted(unknown))}"
        )
    return out


def rule(flavour: str) -> FlavourRule:
    name = flavours.get(flavour).name
    try:
        return rules()[name]
    except KeyError:
        raise WolfError(f"no package rules for flavour {name} in flavour_packages.toml") from None


def parse_apk(output: str) -> dict[str, str]:
    """`apk list --installed`: `name-version arch {origin} (license) [installed]` per line."""
    out = {}
    for line in output.splitlines():
        token = line.split(" ", 1)[0].strip()
        if not token or "[installed]" not in line:
            continue
        cut = next((i for i, c in enumerate(token) if c == "-" and i > 0
                    and _APK_VERSION.fullmatch(token, i + 1)), None)  # fmt: skip
        if cut is not None:
            out[token[:cut]] = token[cut + 1 :]
    return out


def parse_opkg(output: str) -> dict[str, str]:
    """`opkg list-installed`: `name - version` per line."""
    out = {}
    for line in output.splitlines():
        name, sep, version = line.partition(" - ")
        if sep and name.strip() and " " not in name.strip():
            out[name.strip()] = version.strip()
    return out


def installed(target: Target, *, timeout: float = 60.0) -> tuple[str, dict[str, str]]:
    """(package manager, installed packages) of a running OpenWrt."""
    res = target.run("apk list --installed", timeout=timeout)
    if res.exit_status == 0:
        return "apk", parse_apk(res.output)
    res2 = target.run("opkg list-installed", timeout=timeout)
    if res2.exit_status == 0:
        return "opkg", parse_opkg(res2.output)
    raise WolfError(
        f"cannot list packages on {target.name}: apk said {res.output.strip()[-120:]!r}, "
        f"opkg said {res2.output.strip()[-120:]!r}",
        hint="is this OpenWrt?",
    )


def check(manager: str, pkgs: dict[str, str], flavour: str) -> PackageCheck:
    r = rule(flavour)
    names = sorted(pkgs)
    missing = tuple(g for g in r.required if not fnmatch.filter(names, g))
    unwanted = tuple(sorted({n for g in r.forbidden for n in fnmatch.filter(names, g)}))
    if manager == "apk":
        unwanted = tuple(
            n for n in unwanted if not any(fnmatch.fnmatchcase(n, g) for g in r.apk_keeps)
        )
    globs = {g for fr in rules().values() for g in (*fr.required, *fr.forbidden)}
    tls = tuple(n for n in names if any(fnmatch.fnmatchcase(n, g) for g in globs))
    return PackageCheck(manager, r.flavour, dict(pkgs), tls, missing, unwanted)
