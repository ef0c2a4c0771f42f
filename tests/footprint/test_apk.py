"""apk on wolfCrypt: apk-tools 3.0.5 built natively against wolfSSL (our backend patch, the
USE_WOLFSSL minimal library), OpenSSL and Mbed TLS (the footprint lab's host builds). Each
verifies packages and indexes the others signed (apk's own mkpkg/mkndx --sign-key and verify),
and rejects a tampered file and a wrong key with apk's own error. Independent oracles: the
openssl CLI checks apk-wolfssl's signature bytes, and signs a package itself (no apk involved)
that every build must accept; the key id is computed from openssl's DER output."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.footprint import apk
from tests.conftest import need_tools, upstream_source
from tests.footprint.adbfile import ADB, SIG, AdbFile, signature_block

# cold: library builds; one worker (its tests wait on the module's builds)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700), pytest.mark.xdist_group("apk")]

LIBS = ("wolfssl", "openssl", "mbedtls")
SIGNERS = ("wolfssl", "openssl")  # apk 3.0.5's mbedtls backend cannot sign (docs/patches.md)
KEYS = ("ec", "rsa")
TOOLS = (
    "meson",
    "ninja",
    "pkg-config",
    "patch",
    "openssl",
    "x86_64-linux-gnu-gcc",
    "cmake",
    "autoreconf",
    "libtoolize",
    "perl",
    "make",
)
VERSIONS = {"wolfssl": "5.9.2"}  # 25.12.5's 5.9.1 is not in Debian's archive (CI's only source)
UNTRUSTED = "UNTRUSTED signature"  # apk's message for APKE_SIGNATURE_UNTRUSTED (src/print.c)


def _run(*argv: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], check=check, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def apks() -> dict[str, Path]:
    need_tools(*TOOLS)
    upstream_source(str(apk.data()["apk"]["upstream"]))  # apk-tools, through the fetcher
    return {lib: apk.native_build(lib, version=VERSIONS.get(lib)).binary for lib in LIBS}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ec: P-256 as OpenWrt's package/Makefile makes its build key (SEC1 PEM); rsa: 2048-bit
    PKCS#8, as abuild-keygen makes Alpine's. Each public key alone in its own keys dir."""
    need_tools("openssl")
    d = tmp_path_factory.mktemp("apk-keys")
    _run("openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", d / "ec.pem")
    _run(
        "openssl",
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        d / "rsa.pem",
    )
    _run("openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", d / "other.pem")
    for name in ("ec", "rsa", "other"):
        (d / f"keys-{name}").mkdir()
        _run(
            "openssl",
            "pkey",
            "-in",
            d / f"{name}.pem",
            "-pubout",
            "-out",
            d / f"keys-{name}" / f"{name}.pem.pub",
        )
    return d


def _files(tmp: Path) -> Path:
    root = tmp / "root"
    (root / "usr" / "share" / "hello").mkdir(parents=True, exist_ok=True)
    (root / "usr" / "share" / "hello" / "hello.txt").write_text("hello from openwrt-wolf\n")
    return root


def _mkpkg(apk_bin: Path, out: Path, tmp: Path, key: Path | None, name: str = "hello") -> Path:
    argv: list[str | Path] = [
        apk_bin,
        "mkpkg",
        "-c",
        "none",
        "--info",
        f"name:{name}",
        "--info",
        "version:1.0-r1",
        "--info",
        "arch:noarch",
        "--info",
        "description:apk signing test",
        "--files",
        _files(tmp),
        "--output",
        out,
    ]
    if key is not None:
        argv[2:2] = ["--sign-key", key]
    _run(*argv)
    return out


def _verify(apk_bin: Path, keys_dir: Path, f: Path) -> subprocess.CompletedProcess[str]:
    return _run(apk_bin, "verify", "-v", "--keys-dir", keys_dir, f, check=False)


def _ok(res: subprocess.CompletedProcess[str], f: Path) -> None:
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{f.name}: OK" in res.stdout + res.stderr


def _rejected(res: subprocess.CompletedProcess[str], f: Path) -> None:
    assert res.returncode != 0, res.stdout + res.stderr
    assert f"{f.name}: {UNTRUSTED}" in res.stdout + res.stderr


def _key_id(keys: Path, name: str) -> bytes:
    """apk's key id from openssl's own DER: SHA-512 of PKCS#1 RSAPublicKey / the EC point."""
    pub = keys / f"keys-{name}" / f"{name}.pem.pub"
    if name == "rsa":
        der = subprocess.run(
            ["openssl", "rsa", "-pubin", "-in", str(pub), "-RSAPublicKey_out", "-outform", "DER"],
            check=True,
            capture_output=True,
        ).stdout
    else:
        spki = subprocess.run(
            ["openssl", "pkey", "-pubin", "-in", str(pub), "-outform", "DER"],
            check=True,
            capture_output=True,
        ).stdout
        der = spki[-65:]  # the uncompressed P-256 point ends the SubjectPublicKeyInfo
        assert der[0] == 4
    return hashlib.sha512(der).digest()[:16]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("verifier", LIBS)
@pytest.mark.parametrize("signer", SIGNERS)
def test_package_signed_by_one_backend_verifies_with_another(
    apks: dict[str, Path], keys: Path, tmp_path: Path, signer: str, verifier: str, key: str
) -> None:
    pkg = _mkpkg(apks[signer], tmp_path / f"hello-{signer}.apk", tmp_path, keys / f"{key}.pem")
    _ok(_verify(apks[verifier], keys / f"keys-{key}", pkg), pkg)
    _rejected(_verify(apks[verifier], keys / "keys-other", pkg), pkg)  # the wrong key


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("verifier", LIBS)
@pytest.mark.parametrize("signer", SIGNERS)
def test_index_signed_by_one_backend_verifies_with_another(
    apks: dict[str, Path], keys: Path, tmp_path: Path, signer: str, verifier: str, key: str
) -> None:
    pkgs = [_mkpkg(apks["openssl"], tmp_path / f"{n}.apk", tmp_path, None, n) for n in ("a", "b")]
    idx = tmp_path / f"packages-{signer}.adb"
    _run(
        apks[signer],
        "mkndx",
        "-c",
        "none",
        "--allow-untrusted",
        "--sign-key",
        keys / f"{key}.pem",
        "--output",
        idx,
        *pkgs,
    )
    _ok(_verify(apks[verifier], keys / f"keys-{key}", idx), idx)
    _rejected(_verify(apks[verifier], keys / "keys-other", idx), idx)


@pytest.mark.parametrize("verifier", LIBS)
def test_tampered_package_is_rejected(
    apks: dict[str, Path], keys: Path, tmp_path: Path, verifier: str
) -> None:
    pkg = _mkpkg(apks["wolfssl"], tmp_path / "hello.apk", tmp_path, keys / "ec.pem")
    _ok(_verify(apks[verifier], keys / "keys-ec", pkg), pkg)  # pristine: accepted
    adb = AdbFile.parse(pkg.read_bytes())
    i = next(n for n, (k, _) in enumerate(adb.blocks) if k == ADB)
    body = bytearray(adb.blocks[i][1])
    at = body.index(b"hello")
    body[at] = ord("j")  # the package is now called "jello": same size, other signed bytes
    adb.blocks[i] = (ADB, bytes(body))
    bad = tmp_path / "tampered.apk"
    bad.write_bytes(adb.serialize())
    _rejected(_verify(apks[verifier], keys / "keys-ec", bad), bad)


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("signer", SIGNERS)
def test_signature_bytes_verify_with_openssl_cli(
    apks: dict[str, Path], keys: Path, tmp_path: Path, signer: str, key: str
) -> None:
    """The signature block apk wrote, checked by `openssl dgst -verify` over the message
    apk's format defines, and its key id against the id computed from openssl's DER."""
    pkg = _mkpkg(apks[signer], tmp_path / "hello.apk", tmp_path, keys / f"{key}.pem")
    adb = AdbFile.parse(pkg.read_bytes())
    sig = adb.payload(SIG)
    assert sig[0] == 0 and sig[1] == 4  # v0, SHA-512
    assert sig[2:18] == _key_id(keys, key)
    (tmp_path / "msg").write_bytes(adb.signed_message(sig))
    (tmp_path / "sig").write_bytes(sig[18:])
    res = _run(
        "openssl",
        "dgst",
        "-sha512",
        "-verify",
        keys / f"keys-{key}" / f"{key}.pem.pub",
        "-signature",
        tmp_path / "sig",
        tmp_path / "msg",
        check=False,
    )
    assert res.returncode == 0 and "Verified OK" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("verifier", LIBS)
def test_package_signed_by_openssl_cli_verifies(
    apks: dict[str, Path], keys: Path, tmp_path: Path, verifier: str, key: str
) -> None:
    """No apk signs here: an unsigned package gets a signature block made with `openssl dgst
    -sign`; every build must accept it, and reject it after one signed byte changes."""
    pkg = _mkpkg(apks["openssl"], tmp_path / "unsigned.apk", tmp_path, None)
    adb = AdbFile.parse(pkg.read_bytes())
    assert SIG not in [k for k, _ in adb.blocks]
    header = signature_block(_key_id(keys, key), b"")
    (tmp_path / "msg").write_bytes(adb.signed_message(header))
    signature = _run(
        "openssl",
        "dgst",
        "-sha512",
        "-sign",
        keys / f"{key}.pem",
        "-out",
        tmp_path / "sig",
        tmp_path / "msg",
    )
    assert signature.returncode == 0
    at = [k for k, _ in adb.blocks].index(ADB) + 1
    adb.blocks.insert(at, (SIG, header + (tmp_path / "sig").read_bytes()))
    signed = tmp_path / "signed.apk"
    signed.write_bytes(adb.serialize())
    _ok(_verify(apks[verifier], keys / f"keys-{key}", signed), signed)
    adb.blocks[at - 1] = (ADB, adb.blocks[at - 1][1].replace(b"hello", b"jello", 1))
    bad = tmp_path / "tampered.apk"
    bad.write_bytes(adb.serialize())
    _rejected(_verify(apks[verifier], keys / f"keys-{key}", bad), bad)


def test_wolfssl_build_uses_only_wolfcrypt(apks: dict[str, Path]) -> None:
    """apk-wolfssl imports wolfCrypt's native API only (nm as oracle): no wolfSSL_* call of
    the OpenSSL compatibility layer, so the minimal library's wc_* export list covers it."""
    need_tools("nm")
    out = _run("nm", "-D", "--undefined-only", apks["wolfssl"]).stdout
    wolf = sorted(line.split()[-1] for line in out.splitlines() if "wc_" in line or "wolf" in line)
    assert "wc_ecc_verify_hash" in wolf and "wc_RsaSSL_VerifyInline" in wolf
    assert all(n.startswith(("wc_", "wolfCrypt_")) for n in wolf), wolf


# --- apk-wolfssl under attack: every forged or damaged signature is refused ---------------
# Each attack starts from a package apk-wolfssl signed (accepted first, by the same verifier)
# and changes one thing; apk must answer UNTRUSTED (adb.c: any signature that does not
# verify with a trusted key leaves the file untrusted). The forged signatures are made by
# `openssl dgst -sign` over the exact message apk's format defines (adbfile.py).

ATTACKS = (
    "flipped-signature",  # one bit of the signature value
    "truncated-signature",  # the last byte of the signature cut off
    "empty-signature",  # the signature block's header alone
    "trailing-byte",  # one byte appended to the signature
    "grafted-signature",  # the signature block of another package, same key
    "other-key-relabelled",  # a valid signature by an untrusted key, given the trusted key id
    "ec-signature-for-rsa-key",  # EC key signs, labelled with the trusted RSA key's id
    "rsa-signature-for-ec-key",  # RSA key signs, labelled with the trusted EC key's id
    "flipped-signed-data",  # one byte of the signed ADB block
)


def _signed(apks: dict[str, Path], keys: Path, tmp: Path, key: str, name: str) -> AdbFile:
    pkg = _mkpkg(apks["wolfssl"], tmp / f"{name}-{key}.apk", tmp, keys / f"{key}.pem", name)
    return AdbFile.parse(pkg.read_bytes())


def _with_signature(adb: AdbFile, payload: bytes) -> AdbFile:
    blocks = [(k, payload if k == SIG else p) for k, p in adb.blocks]
    return AdbFile(adb.schema, blocks)


def _forge(adb: AdbFile, keys: Path, tmp: Path, signer: str, label: str) -> AdbFile:
    """`signer`'s real signature over adb's message, the header naming `label`'s key id."""
    header = signature_block(_key_id(keys, label), b"")
    (tmp / "msg").write_bytes(adb.signed_message(header))
    _run("openssl", "dgst", "-sha512", "-sign", keys / f"{signer}.pem", "-out", tmp / "sig",
         tmp / "msg")  # fmt: skip
    return _with_signature(adb, header + (tmp / "sig").read_bytes())


def _attack(name: str, apks: dict[str, Path], keys: Path, tmp: Path) -> tuple[AdbFile, str]:
    """(the attacked file, the keys dir that trusts the key it claims)"""
    key = "rsa" if name == "ec-signature-for-rsa-key" else "ec"
    adb = _signed(apks, keys, tmp, key, "hello")
    sig = adb.payload(SIG)
    header, value = sig[:18], bytearray(sig[18:])
    if name == "flipped-signature":
        value[len(value) // 2] ^= 0x01
        return _with_signature(adb, header + value), key
    if name == "truncated-signature":
        return _with_signature(adb, header + value[:-1]), key
    if name == "empty-signature":
        return _with_signature(adb, header), key
    if name == "trailing-byte":
        return _with_signature(adb, header + value + b"\0"), key
    if name == "grafted-signature":
        other = _signed(apks, keys, tmp, key, "grafted")
        return _with_signature(adb, other.payload(SIG)), key
    if name == "other-key-relabelled":
        return _forge(adb, keys, tmp, "other", "ec"), key
    if name == "ec-signature-for-rsa-key":
        return _forge(adb, keys, tmp, "ec", "rsa"), "rsa"
    if name == "rsa-signature-for-ec-key":
        return _forge(adb, keys, tmp, "rsa", "ec"), "ec"
    assert name == "flipped-signed-data"
    i = [k for k, _ in adb.blocks].index(ADB)
    body = bytearray(adb.blocks[i][1])
    body[body.index(b"hello")] ^= 0x01
    adb.blocks[i] = (ADB, bytes(body))
    return adb, key


@pytest.mark.parametrize("verifier", LIBS)
@pytest.mark.parametrize("attack", ATTACKS)
def test_attacked_signature_is_rejected(
    apks: dict[str, Path], keys: Path, tmp_path: Path, attack: str, verifier: str
) -> None:
    key = "rsa" if attack == "ec-signature-for-rsa-key" else "ec"
    pristine = _mkpkg(apks["wolfssl"], tmp_path / "pristine.apk", tmp_path, keys / f"{key}.pem")
    _ok(_verify(apks[verifier], keys / f"keys-{key}", pristine), pristine)
    adb, trusted = _attack(attack, apks, keys, tmp_path)
    bad = tmp_path / f"{attack}.apk"
    bad.write_bytes(adb.serialize())
    assert bad.read_bytes() != pristine.read_bytes()
    _rejected(_verify(apks[verifier], keys / f"keys-{trusted}", bad), bad)
