"""Own keys for OpenWrt's keyring package, whose source (git.openwrt.org/keyring.git) is not
reachable: an ECDSA P-256 public key (PEM, what apk reads from /etc/apk/keys) and a usign
Ed25519 public key (what opkg/usign read), at the paths the package's Makefile installs
(data/sources.toml [own_keys]). Their private halves are thrown away: an image built with
them trusts no OpenWrt key, only the build's own key-build (which base-files installs)."""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from . import pack


def apk_public_pem() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def usign_public(comment: str) -> bytes:
    """usign's public key file: "Ed" + 8-byte key id + 32-byte key, base64, under a comment."""
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    blob = b"Ed" + os.urandom(8) + raw
    return f"untrusted comment: {comment}\n{base64.b64encode(blob).decode()}\n".encode()


def pack_keyring(dest: Path, subdir: str, spec: dict[str, Any]) -> None:
    """A keyring tarball with fresh public keys at spec["apk"] and spec["usign"] paths,
    packed as OpenWrt packs a checkout (sorted, owner 0, fixed mtime)."""
    with tempfile.TemporaryDirectory(prefix="wolf-keyring-", dir=dest.parent) as tmp:
        top = Path(tmp) / subdir
        for rel in spec.get("apk", []):
            (top / rel).parent.mkdir(parents=True, exist_ok=True)
            (top / rel).write_bytes(apk_public_pem())
        for rel in spec.get("usign", []):
            (top / rel).parent.mkdir(parents=True, exist_ok=True)
            (top / rel).write_bytes(usign_public("openwrt-wolf own key (no private half kept)"))
        for p in [top, *top.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        pack.pack_dir(Path(tmp), subdir, 0, dest)
