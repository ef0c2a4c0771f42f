"""Parsers for the library benchmark tools' own output. Each returns the tool's labels as it
printed them (whitespace collapsed): throughput in MiB/s and public-key operations in
milliseconds per operation; data/perf/perf.toml maps the labels to the lab's ids."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

UNITS = {"B": 1, "bytes": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3,
         "KB": 1000, "kB": 1000, "MB": 1000**2, "GB": 1000**3}  # fmt: skip
MIB = 1024**2


@dataclass
class Parsed:
    mib_per_s: dict[str, float] = field(default_factory=dict)
    ms_per_op: dict[str, float] = field(default_factory=dict)


def _label(text: str) -> str:
    return " ".join(text.replace("[", " ").replace("]", " ").split())


# AES-128-GCM-enc             25 MiB took 1.083 seconds,   23.076 MiB/s
_WOLF_SYM = re.compile(
    r"^(?P<label>\S.*?)\s+(?P<amount>[\d.]+) (?P<unit>\w+) took (?P<secs>[\d.]+) seconds?,"
    r"\s+(?P<rate>[\d.]+) (?P<rate_unit>\w+)/s"
)
# ECDSA [      SECP256R1]   256     sign       200 ops took 1.235 sec, avg 6.177 ms, ...
_WOLF_ASYM = re.compile(
    r"^(?P<label>\S.*?)\s+(?P<ops>\d+) ops took (?P<secs>[\d.]+) sec, avg (?P<ms>[\d.]+) ms"
)


def wolfcrypt(output: str) -> Parsed:
    """wolfCrypt's benchmark (wolfcrypt/benchmark/benchmark.c), default text output."""
    out = Parsed()
    for line in output.splitlines():
        if m := _WOLF_ASYM.match(line):
            out.ms_per_op[_label(m["label"])] = float(m["ms"])
        elif (m := _WOLF_SYM.match(line)) and m["rate_unit"] in UNITS:
            out.mib_per_s[_label(m["label"])] = float(m["rate"]) * UNITS[m["rate_unit"]] / MIB
    return out


#   AES-GCM-128              :      23456 KiB/s,          0 cycles/byte
#   ECDSA-secp256r1          :     161.33 sign/s
_MBED = re.compile(r"^\s+(?P<label>\S.*?)\s+:\s+(?P<value>[\d.]+) (?P<what>[^,]+?)/s")


def mbedtls(output: str) -> Parsed:
    """Mbed TLS's programs/test/benchmark (with our patch: 2 decimals on ops/s)."""
    out = Parsed()
    for line in output.splitlines():
        m = _MBED.match(line)
        if not m:
            continue
        value, what = float(m["value"]), m["what"].strip()
        if what == "KiB":
            out.mib_per_s[_label(m["label"])] = value / 1024
        elif value > 0:
            out.ms_per_op[f"{_label(m['label'])} {what}"] = 1000.0 / value
    return out


# +R<n> lines: count, bits or name, seconds (apps/speed.c, -mr)
_OSSL_R = {
    "+R1": "rsa {} sign", "+R2": "rsa {} verify", "+R7": "ecdsa {} sign",
    "+R8": "ecdsa {} verify", "+R9": "ecdh {} derive", "+R15": "{} keygen",
    "+R16": "{} encaps", "+R17": "{} decaps", "+R18": "{} keygen", "+R19": "{} sign",
    "+R20": "{} verify",
}  # fmt: skip


def openssl_mr(output: str) -> Parsed:
    """`openssl speed -mr` (machine-readable): +H:<block sizes>, then per cipher or digest
    +F:<n>:<name>:<bytes/s per size> (labels "<name> <size>"); public-key operations from
    +R<n>:<count>:<bits or name>:<seconds> (labels e.g. "rsa 2048 sign", "ecdh 253 derive",
    "ML-KEM-768 encaps")."""
    out = Parsed()
    sizes: list[int] = []
    for line in output.splitlines():
        parts = line.strip().split(":")
        tag = parts[0]
        if tag == "+H":
            sizes = [int(p) for p in parts[1:] if p]
        elif tag == "+F" and len(parts) >= 3:
            for size, rate in zip(sizes, parts[3:], strict=False):
                if float(rate) > 0:
                    out.mib_per_s[f"{parts[2]} {size}"] = float(rate) / MIB
        elif tag in _OSSL_R and len(parts) >= 4:
            count, secs = int(parts[1]), float(parts[-1])
            if count > 0 and secs > 0:
                out.ms_per_op[_OSSL_R[tag].format(parts[2])] = secs * 1000.0 / count
    return out


PARSERS = {"wolfcrypt": wolfcrypt, "mbedtls": mbedtls, "openssl": openssl_mr}
