"""Test certificates made with the openssl CLI from a declarative list (the conformance
suite's [cert.*] tables): key type, issuer, subject, SANs, CA or not, validity relative to
now, and optionally a damaged signature. Every certificate is signed by `openssl ca`, which
takes explicit start and end dates (OpenSSL 3.0's `x509 -req` has only -days)."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import proc
from ..errors import WolfError

TIMEOUT = 60.0
KEYS = {
    "ec": ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
    "rsa": ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
}
CA_CONF = """\
[ca]
default_ca = lab
[lab]
database = {dir}/index.txt
new_certs_dir = {dir}/issued
serial = {dir}/serial
default_md = sha256
policy = any
unique_subject = no
email_in_dn = no
[any]
commonName = optional
"""


@dataclass(frozen=True)
class CertSpec:
    name: str
    subject: str  # the CN
    issuer: str  # another certificate's name, or "self"
    key: str = "ec"  # ec (P-256) | rsa (2048)
    san: tuple[str, ...] = ()  # openssl's subjectAltName syntax: DNS:x, IP:1.2.3.4
    ca: bool = False
    not_before: int = -1  # days from now
    not_after: int = 30
    corrupt: bool = False  # flip the last byte of the signature

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any]) -> CertSpec:
        known = {"subject", "issuer", "key", "san", "ca", "not_before", "not_after", "corrupt"}
        if unknown := set(d) - known:
            raise WolfError(f"certificate {name}: unknown field(s) {', '.join(sorted(unknown))}")
        fields: dict[str, Any] = {k: tuple(v) if k == "san" else v for k, v in d.items()}
        spec = cls(name=name, **fields)
        if spec.key not in KEYS:
            raise WolfError(f"certificate {name}: key {spec.key!r} is not one of {list(KEYS)}")
        return spec


@dataclass(frozen=True)
class Issued:
    cert: Path  # PEM
    key: Path  # PEM, the certificate's own private key


def _date(days: int) -> str:
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=days)
    return when.strftime("%Y%m%d%H%M%SZ")  # GeneralizedTime, as `openssl ca -startdate` takes


def _extensions(spec: CertSpec) -> str:
    lines = ["[v3]", "subjectKeyIdentifier = hash"]
    if spec.issuer != "self":
        lines.append("authorityKeyIdentifier = keyid")
    if spec.ca:
        lines += ["basicConstraints = critical, CA:TRUE",
                  "keyUsage = critical, keyCertSign, cRLSign"]  # fmt: skip
    else:
        lines.append("basicConstraints = CA:FALSE")
    if spec.san:
        lines.append("subjectAltName = " + ", ".join(spec.san))
    return "\n".join(lines) + "\n"


def _order(specs: Mapping[str, CertSpec]) -> list[CertSpec]:
    """Issuers before what they sign; an unknown issuer or a loop is an error."""
    done: list[CertSpec] = []
    seen: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in seen:
            return
        if name in path or name not in specs:
            raise WolfError(f"certificate {path[-1]}: issuer {name!r} unknown or in a loop")
        spec = specs[name]
        if spec.issuer != "self":
            visit(spec.issuer, (*path, name))
        seen.add(name)
        done.append(spec)

    for name in specs:
        visit(name, ())
    return done


def _run(args: list[str | Path], cwd: Path) -> str:
    return proc.run(["openssl", *args], cwd=cwd, timeout=TIMEOUT).output


def _corrupt(pem: Path, cwd: Path) -> None:
    """Flip the last byte of the DER (inside the signature value) and write the PEM back."""
    der = bytearray(base64.b64decode("".join(pem.read_text().splitlines()[1:-1])))
    der[-1] ^= 0x01
    body = base64.encodebytes(bytes(der)).decode().replace("\n", "")
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    text = "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"
    pem.write_text(text)
    _run(["x509", "-in", pem, "-noout"], cwd)  # still parses: only the signature is wrong


def make(specs: Mapping[str, CertSpec], d: Path) -> dict[str, Issued]:
    """Every certificate of specs in d (<name>.crt, <name>.key); returns them by name."""
    db = d / "ca-db"
    (db / "issued").mkdir(parents=True, exist_ok=True)
    (db / "index.txt").write_text("")
    (db / "serial").write_text("1000\n")
    conf = d / "ca.cnf"
    conf.write_text(CA_CONF.format(dir=db))
    out: dict[str, Issued] = {}
    for spec in _order(specs):
        key, csr, crt, ext = (d / f"{spec.name}{s}" for s in (".key", ".csr", ".crt", ".ext"))
        _run(["genpkey", *KEYS[spec.key], "-out", key], d)
        _run(["req", "-new", "-key", key, "-subj", f"/CN={spec.subject}", "-out", csr], d)
        ext.write_text(_extensions(spec))
        signer: list[str | Path] = (
            ["-selfsign", "-keyfile", key]
            if spec.issuer == "self"
            else ["-cert", out[spec.issuer].cert, "-keyfile", out[spec.issuer].key]
        )
        _run(["ca", "-batch", "-config", conf, "-notext", "-in", csr, "-out", crt,
              "-startdate", _date(spec.not_before), "-enddate", _date(spec.not_after),
              "-extfile", ext, "-extensions", "v3", *signer], d)  # fmt: skip
        if spec.corrupt:
            _corrupt(crt, d)
        out[spec.name] = Issued(cert=crt, key=key)
    return out
