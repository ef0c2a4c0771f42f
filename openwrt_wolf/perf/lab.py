"""`invoke perf`: per flavour, the footprint lab's build of its TLS library (cached), the
library's own benchmark tool built against it, run on the target; one record per
(flavour, target, test) in the results store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .. import paths
from ..errors import WolfError
from ..footprint import lab as fp_lab
from ..footprint import spec, toolchain
from ..host import hosttools
from ..results import store
from . import crypto, programs, qemu
from .model import CRYPTO, CryptoSpeed, record_key

FLAVOURS = ("mbedtls", "wolfssl", "openssl")
TARGETS = ("qemu",)
TESTS = ("crypto",)


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


def run(req: Request, say: Callable[[str], None] = print) -> list[CryptoSpeed]:
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
    hosttools.ensure([*needed, arch.qemu, "patch"])
    tc = toolchain.find(arch, req.toolchain)
    conf = crypto.settings()
    runner = qemu.find(arch, tc, str(conf["qemu"]["cpu"]))
    st = store.FileStore(paths.store_dir(req.store))
    results = []
    for flavour in req.flavours:
        config, ecc = _config(req, flavour)
        fp_req = fp_lab.Request(arch=req.arch, release=req.release, libraries=(flavour,),
                                configs=(config,), ecc=(ecc,) if ecc else (),
                                toolchain=req.toolchain, versions=req.versions)  # fmt: skip
        (bs,) = fp_lab.plan(fp_req, soft_float=tc.soft_float)
        say(f"perf: {flavour}: library {bs.label} (footprint lab)")
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
        results.append(result)
    return results
