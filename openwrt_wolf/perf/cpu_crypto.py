"""The ARMv8 crypto extensions on or off for every library (`perf --cpu-crypto`, issue 34):
data/perf/perf.toml [cpu_crypto.<flavour>] says how each library takes them, at build time
(wolfSSL's --enable-armasm, Mbed TLS's MBEDTLS_AESCE_C) or at run time (OpenSSL's armcap), and
which one OpenWrt ships on bcm2712."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import WolfError
from ..footprint import spec
from . import crypto

CHOICES = ("on", "off")
ARCHES = ("aarch64",)  # the ARMv8 crypto extensions: an AArch64 lab only


def _table(flavour: str) -> dict[str, Any]:
    t = crypto.settings().get("cpu_crypto", {}).get(flavour)
    if not isinstance(t, dict):
        raise WolfError(f"data/perf/perf.toml has no [cpu_crypto.{flavour}]")
    return t


def check(choice: str | None, arch: str) -> str | None:
    """--cpu-crypto: on, off or not given; only on an AArch64 lab."""
    if choice is None:
        return None
    if choice not in CHOICES:
        raise WolfError(f"--cpu-crypto {choice!r}: expected on or off")
    if not arch.startswith(ARCHES):
        raise WolfError(f"--cpu-crypto: only with an AArch64 --arch (not {arch})",
                        hint="--arch aarch64_cortex-a76")  # fmt: skip
    return choice


def shipped(flavour: str) -> str:
    """Whether OpenWrt's package of the flavour uses the extensions on bcm2712: on or off."""
    return str(_table(flavour)["default"])


def build(bs: spec.BuildSpec, flavour: str, choice: str | None) -> spec.BuildSpec:
    """The library build for the choice (its options are part of the build's cache key)."""
    if choice is None:
        return bs
    extra = tuple(_table(flavour)[choice].get("options", ()))
    return dataclasses.replace(bs, options=bs.options + extra) if extra else bs


def build_words(flavour: str, choice: str) -> str:
    """What the choice changes, as a record's note says it."""
    t = _table(flavour)[choice]
    words = [*t.get("options", ()), *(f"{k}={v}" for k, v in t.get("env", {}).items())]
    return ", ".join(str(w) for w in words)


def env(flavour: str, choice: str | None) -> dict[str, str]:
    """What every program of the flavour runs with for the choice."""
    if choice is None:
        return {}
    return {str(k): str(v) for k, v in _table(flavour)[choice].get("env", {}).items()}
