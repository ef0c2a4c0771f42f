"""Crypto speed: each library's own benchmark tool (wolfCrypt's benchmark, `openssl speed`,
Mbed TLS's benchmark) run on the target at 1 KiB and 16 KiB blocks, parsed from the tool's own
output, its labels mapped to the lab's ids by data/perf/perf.toml."""

from __future__ import annotations

import re
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CommandError, WolfError
from ..results.perf import CryptoSpeed, Where
from . import parse
from .place import Place
from .programs import BenchProgram, data_file

RUN_TIMEOUT = 1800.0  # one tool run; emulated RSA under load is slow, a hang is killed


def settings() -> dict[str, Any]:
    return tomllib.loads(data_file("perf.toml").read_text())


@dataclass
class Session:
    """One tool on one place (perf/place.py): ``program`` as the place sees it (paths there),
    and what it printed."""

    program: BenchProgram
    place: Place
    env: dict[str, str]
    on_line: Callable[[str], None] | None = None
    retries: int = 0
    timeout: float = RUN_TIMEOUT

    def __post_init__(self) -> None:
        self.commands: list[str] = []
        self.outputs: list[str] = []  # the tool's own output per run, kept in the record

    def run(self, variant: str, args: list[str]) -> str:
        env = {"LD_LIBRARY_PATH": str(self.program.libdir), **self.env}
        last: CommandError | None = None
        for _ in range(1 + self.retries):
            try:
                ran = self.place.run(str(self.program.exes[variant]), args, env,
                                     timeout=self.timeout, on_line=self.on_line)  # fmt: skip
            except CommandError as e:
                last = e
                continue
            self.commands.append(ran.command)
            self.outputs.append(ran.output)
            return ran.output
        assert last is not None
        tail = " | ".join(last.tail[-3:])
        raise WolfError(
            f"{self.program.source} failed{' twice' if self.retries else ''}: {last.message}"
            f"{': ' + tail if tail else ''}",
            hint="the log above has its output; a hang under qemu-user is retried once",
        )


def _wolfssl_algorithms(help_text: str) -> set[str]:
    """The algorithm options this build of wolfCrypt's benchmark knows (its -? text)."""
    block = help_text.split("Available algorithms include:", 1)[-1]
    block = block.split("-lng", 1)[0]
    return set(re.findall(r"(?<!\S)-[a-z0-9-]+", block))


def _collect(labels: dict[str, str], printed: dict[str, float], into: dict[str, float]) -> None:
    for ident, label in labels.items():
        if label in printed:
            into[ident] = round(printed[label], 4)


def run_wolfssl(s: Session, tool: dict[str, Any], blocks: list[int]) -> parse.Parsed:
    # algorithm options this build lacks are left out: the tool would stop on them
    known = _wolfssl_algorithms(s.run("all", ["-?"]))
    ciphers = [a for a in tool["cipher_args"] if a in known]
    out = parse.Parsed()
    for size in blocks:
        got = parse.wolfcrypt(s.run("all", [*ciphers, str(size)]))
        out.mib_per_s.update({f"{k} {size}": v for k, v in got.mib_per_s.items()})
    ops = [a for a in tool["op_args"] if a in known]
    out.ms_per_op.update(parse.wolfcrypt(s.run("all", [*ops, *tool["op_flags"]])).ms_per_op)
    return out


def run_openssl(s: Session, tool: dict[str, Any], blocks: list[int], seconds: int) -> parse.Parsed:
    out = parse.Parsed()
    for ident, *args in tool["cipher_runs"]:
        for size in blocks:
            got = parse.openssl_mr(
                s.run("all", ["speed", "-mr", "-seconds", str(seconds), *args, "-bytes", str(size)])
            )
            out.mib_per_s.update(got.mib_per_s)
        del ident  # the id is for the reader of perf.toml; labels come from the tool
    got = parse.openssl_mr(s.run("all", ["speed", "-mr", "-seconds", str(seconds),
                                         *tool["op_args"]]))  # fmt: skip
    out.ms_per_op.update(got.ms_per_op)
    return out


def run_mbedtls(s: Session, tool: dict[str, Any], blocks: list[int]) -> parse.Parsed:
    """One algorithm per run: the tool hangs at random under qemu-user (a lost SIGALRM), so
    each run has a short timeout and one retry (Session.retries)."""
    out = parse.Parsed()
    for size in blocks:
        for arg in tool["cipher_args"]:
            got = parse.mbedtls(s.run(str(size), [arg]))
            out.mib_per_s.update({f"{k} {size}": v for k, v in got.mib_per_s.items()})
    for args in tool["op_runs"]:
        out.ms_per_op.update(parse.mbedtls(s.run(str(blocks[0]), list(args))).ms_per_op)
    return out


def measure(
    *,
    flavour: str,
    library: str,
    version: str,
    config: str,
    ecc: str | None,
    footprint_key: str,
    session: Session,
    where: Where,
    quick: bool,
) -> CryptoSpeed:
    conf = settings()
    tool = conf["tool"][library]
    blocks = [int(b) for b in conf["blocks"]["sizes"]]
    start = time.monotonic()
    if library == "wolfssl":
        printed = run_wolfssl(session, tool, blocks)
    elif library == "openssl":
        secs = int(tool["quick_seconds" if quick else "seconds"])
        printed = run_openssl(session, tool, blocks, secs)
    elif library == "mbedtls":
        printed = run_mbedtls(session, tool, blocks)
    else:
        raise WolfError(f"no benchmark tool for library {library!r}")
    ms: dict[str, float] = {}
    _collect(tool["operations"], printed.ms_per_op, ms)
    mib: dict[str, dict[str, float]] = {}
    for ident, label in tool["ciphers"].items():
        for size in blocks:
            value = printed.mib_per_s.get(f"{label} {size}")
            if value is not None:
                mib.setdefault(ident, {})[str(size)] = round(value, 4)
    missing = [i for i in conf["operations"] if i not in ms]
    missing += [i for i in conf["ciphers"] if i not in mib]
    notes = []
    if library == "mbedtls":
        notes.append(
            "RSA sign/verify = the tool's RSA private/public operation; ECDH = its static "
            "handshake (shared secret only), like the others' agree/derive"
        )
    return CryptoSpeed(
        flavour=flavour, library=library, version=version, config=config, ecc=ecc,
        tool=str(tool["title"]), where=where, ms_per_op=ms, mib_per_s=mib, missing=missing,
        quick=quick, commands=list(session.commands), outputs=list(session.outputs),
        seconds=round(time.monotonic() - start, 1), footprint_key=footprint_key, notes=notes,
    )  # fmt: skip
