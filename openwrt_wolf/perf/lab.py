"""`invoke perf`: per flavour, the footprint lab's build of its TLS library (cached), the
library's own benchmark tool built against it, run on the target (test `crypto`); uhttpd and
uclient-fetch of the userland (footprint/userland.py) on the target for the tests
`handshake`, `memory` and `soak`; one record per (flavour, target, test) in the results
store."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import WolfError
from ..footprint import lab as fp_lab
from ..footprint import spec, toolchain, userland
from ..host import hosttools
from ..results import store
from . import crypto, handshake, memory, net, netlab, programs, qemu, soak
from .model import (
    CRYPTO,
    HANDSHAKE,
    MEMORY,
    SOAK,
    CryptoSpeed,
    Handshakes,
    HeapUse,
    Soak,
    record_key,
)
from .runner import QemuRunner

FLAVOURS = ("mbedtls", "wolfssl", "openssl")
TARGETS = ("qemu",)
TESTS = ("crypto", "handshake", "memory", "soak")
NetTest = Callable[[netlab.NetLab], Handshakes | HeapUse | Soak]
NET_TESTS: dict[str, tuple[str, NetTest]] = {
    "handshake": (HANDSHAKE, handshake.measure),
    "memory": (MEMORY, memory.measure),
    "soak": (SOAK, soak.measure),
}
Result = CryptoSpeed | Handshakes | HeapUse | Soak


@dataclass(frozen=True)
class Request:
    flavours: tuple[str, ...] = FLAVOURS
    target: str = "qemu"
    tests: tuple[str, ...] = TESTS
    quick: bool = False
    arch: str = "mips_24kc"
    release: str | None = None
    versions: tuple[tuple[str, str], ...] = (("wolfssl", "5.9.2"),)
    wolfssl_config: str = "minimal"  # the USE_WOLFSSL minimal mode (openwrt: package defaults)
    ecc: str = "sp-p256"  # the minimal mode's ECC choice
    toolchain: str | None = None
    clock: str = "cpu"  # cpu: benchmark clocks count process CPU time (cpuclock shim)
    store: str | None = None
    notes: list[str] = field(default_factory=list)


def _config(req: Request, flavour: str) -> tuple[str, str | None]:
    if flavour == "wolfssl":
        return req.wolfssl_config, (req.ecc if req.wolfssl_config == "minimal" else None)
    return "openwrt", None


def run(req: Request, say: Callable[[str], None] = print) -> list[Result]:
    for f in req.flavours:
        if f not in FLAVOURS:
            raise WolfError(f"unknown flavour {f!r}", hint=f"flavours: {', '.join(FLAVOURS)}, all")
    if req.target not in TARGETS:
        raise WolfError(f"unknown or unsupported target {req.target!r}",
                        hint=f"targets this lab runs: {', '.join(TARGETS)}")  # fmt: skip
    if req.clock not in ("cpu", "wall"):
        raise WolfError(f"--clock {req.clock!r}: expected cpu or wall")
    arch = spec.get_arch(req.arch)
    needed = hosttools.groups()["footprint"]
    if req.toolchain:
        needed = [t for t in needed if not t.startswith((arch.debian_prefix, arch.sysroot))]
    net_tests = [t for t in req.tests if t in NET_TESTS]
    hosttools.ensure([*needed, arch.qemu, "patch", *(["openssl", "gcc"] if net_tests else [])])
    tc = toolchain.find(arch, req.toolchain)
    conf = crypto.settings()
    runner = qemu.find(arch, tc, str(conf["qemu"]["cpu"]))
    st = store.FileStore(paths.store_dir(req.store))
    results: list[Result] = []
    work = Path(tempfile.mkdtemp(prefix="wolf-perf-"))
    try:
        pki = net.make_pki(work / "pki", int(conf["net"]["page_bytes"]),
                           int(conf["net"]["download_bytes"])) if net_tests else None  # fmt: skip
        probe = net.probe() if net_tests else None
        for flavour in req.flavours:
            results += _flavour(req, flavour, tc, runner, conf, st, say, work, pki, probe)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def _flavour(
    req: Request, flavour: str, tc: toolchain.Toolchain, runner: qemu.QemuUser,
    conf: dict[str, Any], st: store.FileStore, say: Callable[[str], None], work: Path,
    pki: net.Pki | None, probe: net.Probe | None,
) -> list[Result]:  # fmt: skip
    results: list[Result] = []
    config, ecc = _config(req, flavour)
    fp_req = fp_lab.Request(arch=req.arch, release=req.release, libraries=(flavour,),
                            configs=(config,), ecc=(ecc,) if ecc else (),
                            toolchain=req.toolchain, versions=req.versions)  # fmt: skip
    (bs,) = fp_lab.plan(fp_req, soft_float=tc.soft_float)
    say(f"perf: {flavour}: library {bs.label} (footprint lab)")
    if "crypto" in req.tests:
        results.append(_crypto(req, flavour, bs, tc, fp_req, runner, conf, st, say))
    if pki is None or probe is None:
        return results
    ub = userland.build(flavour, arch=req.arch, toolchain_path=req.toolchain)
    if flavour == "wolfssl" and (req.wolfssl_config, req.ecc) != ("minimal", "sp-p256"):
        say(f"perf: wolfssl: uhttpd/uclient-fetch use the userland's library "
            f"({ub.library.config}), not --wolfssl-config/--ecc")  # fmt: skip
    lab = netlab.NetLab(
        flavour=flavour, ub=ub, heaptrack=programs.shim("heaptrack", bs, tc),
        runner=QemuRunner(runner, work / flavour), probe=probe, pki=pki,
        conf=netlab.sizes(conf["net"], req.quick), quick=req.quick, clock="wall", say=say,
    )  # fmt: skip
    for test in (t for t in req.tests if t in NET_TESTS):
        kind, measure_test = NET_TESTS[test]
        say(f"perf: {flavour}: {test} on {req.target}{' (quick)' if req.quick else ''}")
        res = measure_test(lab)
        st.put(store.Record(kind=kind, key=record_key(flavour, req.target, test),
                            release=bs.release, device=None, flavour=flavour,
                            data=res.to_dict()))  # fmt: skip
        results.append(res)
    return results


def _crypto(
    req: Request, flavour: str, bs: spec.BuildSpec, tc: toolchain.Toolchain,
    fp_req: fp_lab.Request, runner: qemu.QemuUser, conf: dict[str, Any], st: store.FileStore,
    say: Callable[[str], None],
) -> CryptoSpeed:  # fmt: skip
    fp = fp_lab.build_one(bs, tc, fp_req)
    fp_root = fp_lab.build_root() / fp.cache_key
    tool = conf["tool"][flavour]
    say(f"perf: {flavour}: building {tool['title']}")
    prog = programs.bench_program(bs, tc, fp, fp_root, quick=req.quick, tool=tool)
    env = {}
    if req.clock == "cpu":
        env["LD_PRELOAD"] = str(programs.shim("cpuclock", bs, tc))
    session = crypto.Session(program=prog, argv=runner.argv, env=env)
    if "run_timeout" in tool:  # Mbed TLS: a hang is killed early and retried once
        session.timeout, session.retries = float(tool["run_timeout"]), 1
    say(f"perf: {flavour}: running {tool['title']} on {req.target}"
        f"{' (quick)' if req.quick else ''}")  # fmt: skip
    result = crypto.measure(
        flavour=flavour, library=bs.library, version=bs.version, config=bs.config,
        ecc=bs.ecc, footprint_key=fp.cache_key, session=session,
        where=runner.where(req.clock), quick=req.quick,
    )  # fmt: skip
    st.put(store.Record(kind=CRYPTO, key=record_key(flavour, req.target, "crypto"),
                        release=bs.release, device=None, flavour=flavour,
                        data=result.to_dict()))  # fmt: skip
    return result
