"""The benchmark tools' output formats, as the tools print them (lines copied from runs of
wolfCrypt's benchmark 5.9.2, Mbed TLS 3.6.6's benchmark with our patch and openssl 3.5.7
speed -mr under qemu-user); expected values worked out by hand from the lines."""

from __future__ import annotations

import pytest

from openwrt_wolf.perf import parse

WOLFCRYPT = """\
wolfCrypt Benchmark (block bytes 1024, min 1.0 sec each)
AES-128-GCM-enc             25 MiB took 1.083 seconds,   23.076 MiB/s
CHA-POLY                    15 MiB took 1.252 seconds,   11.985 MiB/s
SHA-256                    512 KiB took 1.000 seconds,  512.000 KiB/s
RSA     2048     sign       100 ops took 19.768 sec, avg 197.677 ms,     5.059 ops/sec
ECDHE [      SECP256R1]   256    agree       200 ops took 1.201 sec, avg 6.003 ms,   166.583 ops/sec
CURVE  25519    agree       500 ops took 1.222 sec, avg 2.444 ms,   409.198 ops/sec
ML-KEM 768    192    encap       900 ops took 1.083 sec, avg 1.203 ms,   831.071 ops/sec
Benchmark complete
"""

MBEDTLS = """
  SHA-256                  :      87852 KiB/s,          0 cycles/byte
  AES-GCM-128              :       8194 KiB/s,          0 cycles/byte
  RSA-2048                 :     250.00  public/s
  ECDSA-secp256r1          :     331.00 sign/s
  ECDH-secp256r1           :     171.00 static handshake/s
"""

OPENSSL = """\
+DT:AES-128-GCM:1:1024
+R:31000:AES-128-GCM:1.000000
+H:1024
+F:22:AES-128-GCM:31744000.00
+R1:64:2048:0.99
+R2:2500:2048:1.00
+R9:2273:253:1.00
+R15:2622:ML-KEM-768:1.00
"""


def test_wolfcrypt() -> None:
    p = parse.wolfcrypt(WOLFCRYPT)
    assert p.mib_per_s == {"AES-128-GCM-enc": 23.076, "CHA-POLY": 11.985, "SHA-256": 0.5}
    assert p.ms_per_op == {
        "RSA 2048 sign": 197.677,
        "ECDHE SECP256R1 256 agree": 6.003,
        "CURVE 25519 agree": 2.444,
        "ML-KEM 768 192 encap": 1.203,
    }


def test_mbedtls() -> None:
    p = parse.mbedtls(MBEDTLS)
    assert p.mib_per_s == {"SHA-256": 87852 / 1024, "AES-GCM-128": 8194 / 1024}
    assert p.ms_per_op == pytest.approx(
        {"RSA-2048 public": 4.0, "ECDSA-secp256r1 sign": 1000 / 331,
         "ECDH-secp256r1 static handshake": 1000 / 171}
    )  # fmt: skip


def test_openssl_mr() -> None:
    p = parse.openssl_mr(OPENSSL)
    assert p.mib_per_s == {"AES-128-GCM 1024": 31744000 / 1024 / 1024}
    assert p.ms_per_op == pytest.approx(
        {"rsa 2048 sign": 990 / 64, "rsa 2048 verify": 1000 / 2500,
         "ecdh 253 derive": 1000 / 2273, "ML-KEM-768 keygen": 1000 / 2622}
    )  # fmt: skip


def test_other_lines_are_ignored() -> None:
    assert parse.wolfcrypt("Benchmark complete\n------") == parse.Parsed()
    assert parse.mbedtls("  AES-GCM-128 : FAILED: -0x0010\n") == parse.Parsed()
    assert parse.openssl_mr("+F2:0:2048:1.0:2.0:3.0:4.0\nversion: 3.5.7\n") == parse.Parsed()
