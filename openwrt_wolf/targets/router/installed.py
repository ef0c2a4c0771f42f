"""Installed packages on a router (apk on 25.12+, opkg on 24.10) and whether they match a TLS
flavour (data/flavours.toml, each flavour's `installed` globs)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from ...catalogue import flavours
from ...errors import WolfError
from ..target import Target

# apk prints name-version. A version is apk's grammar (digits and dots, a letter, _suffixes,
# a ~hash, an optional -rN): px5g-mbedtls-11, libudebug-2026.01.16~875e1a7a; the first "-"
# whose rest is one splits, as names hold "-<digit>" too (kmod-8021q) and end in an ABI
# version (libwolfssl5.9.1.e624513f-5.9.1-r1).
_APK_VERSION = re.compile(r"\d+(\.\d+)*[a-z]?(_[a-z]+\d*)*(~[0-9a-f]+)?(-r\d+)?")


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


def rules() -> dict[str, flavours.Installed]:
    """Every flavour's globs of what a flashed router must (not) show."""
    return {name: f.installed for name, f in flavours.flavours().items()}


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


def check(
    manager: str,
    pkgs: dict[str, str],
    flavour: str,
    variant: str | None = None,
    libraries: tuple[tuple[str, str], ...] = (),
) -> PackageCheck:
    """What the router runs against the flavour's rules: OpenWrt's own packages (`installed`,
    with what apk keeps) for a stock image, the patch set's (`patch_set`: apk-wolfssl, the
    native backend, no Mbed TLS at all) for a patch-set image; with the build's TLS library
    packages the SDK compiled known (``libraries``: name with ABI suffix, version), each
    installed exactly (the minimal libwolfssl's ABI suffix is not OpenWrt's full one's)."""
    fl = flavours.get(flavour)
    names = sorted(pkgs)
    ps = fl.patch_set if variant == "patch-set" else None
    r = ps or fl.installed
    missing = [g for g in r.required if not fnmatch.filter(names, g)]
    unwanted = tuple(sorted({n for g in r.forbidden for n in fnmatch.filter(names, g)}))
    if manager == "apk" and ps is None:
        unwanted = tuple(
            n for n in unwanted if not any(fnmatch.fnmatchcase(n, g) for g in r.apk_keeps)
        )
    for name, version in libraries:  # exact, ABI suffix and all
        if pkgs.get(name) != version:
            base = _strip_abi(name)
            have = ", ".join(f"{n} {pkgs[n]}" for n in names if _strip_abi(n) == base) or "none"
            missing.append(f"{name} {version} (the build's; installed: {have})")
    globs = {g for fr in rules().values() for g in (*fr.required, *fr.forbidden)}
    if fl.patch_set:  # apk-wolfssl, and what else the patch set's image is told by
        globs |= {*fl.patch_set.required, *fl.patch_set.forbidden}
    tls = tuple(n for n in names if any(fnmatch.fnmatchcase(n, g) for g in globs))
    return PackageCheck(manager, fl.name, dict(pkgs), tls, tuple(missing), unwanted)


def _strip_abi(name: str) -> str:
    """libwolfssl5.9.1.e624513f -> libwolfssl: the manifest (STRIP_ABI) and apk name a package
    with or without its ABI version."""
    return re.sub(r"[0-9][0-9A-Za-z.]*$", "", name) or name
