"""Runtime smoke test under qemu-user: a small C program per library (data/footprint/smoke/)
linked against the built library and run against the installed (sstripped) copy: a SHA-256
compared with Python's hashlib, a TLS context, a P-256 key."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

from .. import proc
from ..errors import CommandError, WolfError
from ..results.footprint import Smoke
from .spec import BuildSpec, smoke_source
from .toolchain import Toolchain

SMOKE_INPUT = "openwrt-wolf footprint smoke: The quick brown fox"
RUN_TIMEOUT = 60.0
CHECKS = ("sha256", "tls_context", "p256_key")


def _parse(output: str) -> dict[str, str]:
    want = hashlib.sha256(SMOKE_INPUT.encode()).hexdigest()
    seen = {}
    for line in output.splitlines():
        name, _, value = line.strip().partition(" ")
        if name in CHECKS:
            seen[name] = value
    checks = {}
    for name in CHECKS:
        got = seen.get(name)
        if got is None:
            checks[name] = "no output"
        elif name == "sha256":
            checks[name] = "ok" if got == want else f"got {got}, hashlib says {want}"
        else:
            checks[name] = got
    return checks


def run(
    spec: BuildSpec, tc: Toolchain, include: Path, lib: Path, installed: Path, work: Path
) -> Smoke:
    qemu = shutil.which(spec.arch.qemu)
    if not qemu:
        raise WolfError(f"--smoke needs {spec.arch.qemu}", hint="apt-get install qemu-user-static")
    work.mkdir(parents=True, exist_ok=True)
    exe = work / f"smoke-{spec.library}"
    proc.run(
        [tc.tool("gcc"), "-O2", "-o", exe, smoke_source(spec.lib.smoke), f"-I{include}",
         f"-L{lib}", f"-Wl,-rpath-link,{lib}", *spec.lib.smoke_libs, "-pthread"],
        timeout=300,
    )  # fmt: skip
    start = time.monotonic()
    argv: list[str | Path] = [qemu, "-L", tc.sysroot, "-E", f"LD_LIBRARY_PATH={installed}", exe,
                              SMOKE_INPUT]  # fmt: skip
    try:
        done = proc.run(argv, timeout=RUN_TIMEOUT, check=False)
        output, rc = done.output, done.returncode
    except CommandError as e:  # the timeout: recorded as a failed smoke, not a crash
        output, rc = "\n".join(e.tail) + f"\n{e.message}", -1
    checks = _parse(output)
    ok = rc == 0 and all(v == "ok" for v in checks.values())
    return Smoke(
        ok=ok, seconds=round(time.monotonic() - start, 2), checks=checks, output=output[-2000:]
    )
