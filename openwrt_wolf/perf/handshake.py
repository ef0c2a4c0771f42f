"""TLS 1.3 handshakes to uhttpd on the target, from the host (as the reference measured from a
laptop): per group (X25519, P-256, X25519MLKEM768) the host client offers only that group and
only ecdsa_secp256r1_sha256, so the server signs with its P-256 certificate every time. One
`openssl s_client -brief` handshake per group first is the session's witness (version, group,
signature); then the probe times `repeats` full handshakes (no resumption, no tickets) after
one warm-up, and reports each session's negotiated version, group and signature itself.
The server's CPU time over those handshakes (/proc) gives its CPU per handshake: on a loaded
machine the wall times include waiting for a core, the CPU time does not."""

from __future__ import annotations

import re
import statistics
import time

from ..results.perf import Handshakes, metric
from . import net
from .netlab import NetLab

# what `s_client -brief` prints for each group: 3.0's "Server Temp Key", 3.5's line for a KEM
GROUP_LINE = {"x25519": r"Server Temp Key: X25519\b",
              "p256": r"Server Temp Key: ECDH, prime256v1\b",
              "x25519mlkem768": r"Negotiated TLS1\.3 group: X25519MLKEM768\b"}  # fmt: skip
HOST_LACKS = ("x25519mlkem768",)  # Debian 12's OpenSSL 3.0: s_client from OpenSSL 3.5 instead
PROBE_GROUP = {"x25519": "x25519", "p256": "secp256r1", "x25519mlkem768": "X25519MLKEM768"}
WHO_HAS_MLKEM = ("X25519MLKEM768: OpenSSL 3.5 offers it by default; Mbed TLS 3.6 has no ML-KEM; "
                 "wolfSSL 5.9 only when built with ML-KEM (--enable-mlkem), which the USE_WOLFSSL "
                 "minimal mode is not")  # fmt: skip


def witness_ok(text: str, group: str) -> bool:
    return bool(re.search(r"Protocol version: TLSv1\.3\b", text)
                and re.search(GROUP_LINE[group], text)
                and re.search(r"Signature type: (ECDSA|ecdsa_secp256r1_sha256)$", text, re.M)
                and "Verification: OK" in text)  # fmt: skip


def measure(lab: NetLab) -> Handshakes:
    start = time.monotonic()
    repeats = int(lab.conf["handshakes"])
    ms: dict[str, list[float]] = {}
    sessions: dict[str, str] = {}
    negotiated: dict[str, dict[str, str]] = {}
    missing: dict[str, str] = {}
    cpu_ms: dict[str, float] = {}
    with lab.uhttpd() as (served, port):
        for group in lab.conf["groups"]:
            pr = lab.probe if group in HOST_LACKS else None
            witness = net.s_client_brief(lab.place.address, port, lab.pki.ca, group, pr)
            sessions[group] = witness
            warm = lab.probe_run(port, group=group, handshake_only=True)
            if warm.failed or not witness_ok(witness, group):
                why = warm.errors[0] if warm.errors else witness[-300:]
                missing[group] = f"the server refused a handshake offering only {group}: {why}"
                if group == "x25519mlkem768":
                    missing[group] += f" ({WHO_HAS_MLKEM})"
                lab.say(f"perf: {lab.flavour}: handshake {group}: none ({missing[group][:120]})")
                continue
            cpu0 = served.cpu_seconds()
            run = lab.probe_run(port, group=group, count=repeats, handshake_only=True,
                                timeout=net.TIMEOUT + 30 * repeats)  # fmt: skip
            cpu = served.cpu_seconds() - cpu0
            if run.failed:
                missing[group] = f"{run.failed} of {repeats} handshakes failed: {run.errors[0]}"
                continue
            odd = [c for c in run.conns if (c.version, c.group) != ("TLSv1.3", PROBE_GROUP[group])]
            if odd:  # never expected: the client offered nothing else
                missing[group] = f"a session negotiated {odd[0].version} {odd[0].group}"
                continue
            c = run.conns[0]
            negotiated[group] = {"version": c.version, "group": c.group, "sig": c.sig}
            ms[group] = [x.ms for x in run.conns]
            cpu_ms[group] = round(cpu * 1000 / repeats, 2)
            lab.say(f"perf: {lab.flavour}: handshake {group}: median "
                    f"{statistics.median(ms[group]):.2f} ms of {repeats}, server CPU "
                    f"{cpu_ms[group]:.1f} ms each")  # fmt: skip
    medians = {g: round(statistics.median(v), 3) for g, v in ms.items()}
    metrics = {f"handshake_{g}_ms": metric(v, "ms") for g, v in medians.items()}
    metrics |= {f"handshake_{g}_cpu_ms": metric(v, "ms") for g, v in cpu_ms.items()}
    return Handshakes(common=lab.common(metrics, time.monotonic() - start), repeats=repeats,
                      ms=ms, median_ms=medians, sessions=sessions, negotiated=negotiated,
                      missing=missing, server_cpu_ms=cpu_ms)  # fmt: skip
