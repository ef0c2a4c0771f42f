"""What a 25.12 stand-in ImageBuilder is made with besides the OpenWrt tree and its image
tools: apk-tools 3.0.5 for the host, the test's own signing key, and the TLS packages' payloads
as compiled code, the footprint lab's MIPS builds at OpenWrt's settings (all cached per
machine; a cold run builds them once, shared with tests/footprint)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from openwrt_wolf.footprint import apk, lab, spec, toolchain, userland

# the stock 25.12.5 libwolfssl: OpenWrt's own options (the userland's is USE_WOLFSSL minimal);
# 5.9.1 is not reachable from CI, 5.9.2 is (docs/testing.md)
WOLFSSL_VERSION = "5.9.2"


@dataclass(frozen=True)
class Kit:
    apk: Path  # apk-tools 3.0.5 for the host (staging_dir/host/bin/apk)
    key: (
        Path  # EC private key (PEM) signing packages.adb; its public key is key.with_suffix(".pub")
    )
    payloads: dict[str, dict[str, Path]]  # package (ABI-less) -> {installed path: file}


def signing_key(dest: Path) -> Path:
    """A P-256 key as OpenWrt's build makes its apk key (openssl ecparam), and its public key."""
    dest.mkdir(parents=True, exist_ok=True)
    key = dest / "standin-key.pem"
    if not key.is_file():
        subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout",
                        "-out", str(key)], check=True, capture_output=True, timeout=60)  # fmt: skip
        subprocess.run(["openssl", "ec", "-in", str(key), "-pubout", "-out",
                        str(key.with_suffix(".pub"))], check=True, capture_output=True,
                       timeout=60)  # fmt: skip
    return key


def _library(fp_files: list[str], root: Path) -> dict[str, Path]:
    return {f"/usr/lib/{name}": root / "installed" / name for name in fp_files}


def tls_payloads(arch: str = "mips_24kc") -> dict[str, dict[str, Path]]:
    """The files the TLS packages install, stripped as OpenWrt installs them: the libraries
    (libmbedtls, libwolfssl, libopenssl), libustream-*, px5g-*, apk-mbedtls and apk-openssl."""
    out: dict[str, dict[str, Path]] = {}
    for flavour in userland.FLAVOURS:
        ub = userland.build(flavour, arch=arch)
        inst = ub.root / "measure" / "installed"
        out[f"libustream-{flavour}"] = {"/lib/libustream-ssl.so": inst / "libustream-ssl.so"}
        if ub.px5g is not None:
            out[f"px5g-{flavour}"] = {"/usr/sbin/px5g": inst / "px5g"}
        fp = ub.library
        if flavour == "wolfssl":  # the stock package: OpenWrt's options, not USE_WOLFSSL's
            tc = toolchain.find(spec.get_arch(arch))
            bs = spec.resolve("wolfssl", userland.release(), "openwrt", arch, ecc=None,
                              soft_float=tc.soft_float, version=WOLFSSL_VERSION)  # fmt: skip
            fp = lab.build_one(bs, tc, lab.Request(arch=arch, libraries=("wolfssl",),
                                                   configs=("openwrt",)))  # fmt: skip
        else:  # apk-mbedtls, apk-openssl (25.12 has no apk-wolfssl)
            comp = apk.for_footprint(ub.library)
            out[f"apk-{flavour}"] = {
                "/usr/bin/apk": apk.root() / comp.cache_key / "measure" / "installed" / "apk"
            }
        out[f"lib{flavour}"] = _library([f.name for f in fp.files], lab.build_root() / fp.cache_key)
    for files in out.values():
        for f in files.values():
            if not f.is_file():
                raise RuntimeError(f"the footprint lab's build has no {f}")
    return out


def make_kit(dest: Path, arch: str = "mips_24kc") -> Kit:
    """The kit in dest (the caller holds a lock on it). The payloads are copied there: the
    lab measures a component again (strip, sstrip) whenever it is asked for one."""
    host_apk = apk.native_build("openssl").binary  # Debian's OpenSSL: no lab build needed
    payloads: dict[str, dict[str, Path]] = {}
    for pkg, files in tls_payloads(arch).items():
        (dest / "payloads" / pkg).mkdir(parents=True, exist_ok=True)
        payloads[pkg] = {}
        for path, src in files.items():
            copy = dest / "payloads" / pkg / Path(path).name
            shutil.copyfile(src, copy)
            payloads[pkg][path] = copy
    return Kit(host_apk, signing_key(dest), payloads)
