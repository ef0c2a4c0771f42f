"""`invoke perf`: per flavour, the footprint lab's build of its TLS library (cached), the
library's own benchmark tool built against it, run on the target; one record per
(flavour, target, test) in the results store."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths
from ..errors import WolfError
from ..footprint import lab as fp_lab
from ..footprint import spec, toolchain
from ..host import hosttools
from ..results import store
from ..targets.router.ssh import Login
from . import crypto, places, programs
from .model import CRYPTO, CryptoSpeed, record_key
from .place import Place

FLAVOURS = ("mbedtls", "wolfssl", "openssl")
TARGETS = ("qemu", "router", "vm")
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
    login: Login | None = None  # --target router: how to reach it over SSH
    image: str | None = None  # --target vm: the malta image (kernel ELF) to boot
    initrd: str | None = None  # --target vm: with this initramfs
    append: str | None = None  # --target vm: kernel command line
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
    vm = places.VmOptions(req.image, req.initrd, req.append) if req.image else None
    with places.opened(req.target, login=req.login, vm=vm, say=say) as remote:
        arch_name = req.arch if remote is None else places.lab_arch(remote.platform, remote.target)
        arch = spec.get_arch(arch_name)
        # the cross toolchain only where it is the one used
        needed = [
            t
            for t in hosttools.groups()["footprint"]
            if arch.debian_prefix == "mips-linux-gnu-" or "mips-linux-gnu" not in t
        ]
        if req.toolchain:
            needed = [t for t in needed if not t.startswith((arch.debian_prefix, arch.sysroot))]
        hosttools.ensure([*needed, *([arch.qemu] if remote is None else []), "patch"])
        tc = toolchain.find(arch, req.toolchain)
        conf = crypto.settings()
        place: Place
        if remote is None:
            place = places.qemu_place(arch, tc, str(conf["qemu"]["cpu"]))
        else:
            places.check_libc(remote, tc)
            place = remote
        return _run_all(dataclasses.replace(req, arch=arch_name), place, tc, conf, say)


def _run_all(
    req: Request, place: Place, tc: toolchain.Toolchain, conf: dict[str, object],
    say: Callable[[str], None],
) -> list[CryptoSpeed]:  # fmt: skip
    st = store.FileStore(paths.store_dir(req.store))
    tools = conf["tool"]
    assert isinstance(tools, dict)
    results = []
    for flavour in req.flavours:
        config, ecc = _config(req, flavour)
        fp_req = fp_lab.Request(arch=req.arch, release=req.release, libraries=(flavour,),
                                configs=(config,), ecc=(ecc,) if ecc else (),
                                toolchain=req.toolchain, versions=req.versions)  # fmt: skip
        (bs,) = fp_lab.plan(fp_req, soft_float=tc.soft_float)
        say(f"perf: {flavour}: library {bs.label} (footprint lab, {req.arch})")
        fp = fp_lab.build_one(bs, tc, fp_req)
        fp_root = fp_lab.build_root() / fp.cache_key
        tool = tools[flavour]
        say(f"perf: {flavour}: building {tool['title']}")
        prog = programs.bench_program(bs, tc, fp, fp_root, quick=req.quick, tool=tool)
        with _placed(place, flavour, prog, bs, tc, req.clock, say) as (placed, env):
            session = crypto.Session(program=placed, place=place, env=env)
            if "run_timeout" in tool:  # Mbed TLS: a hang is killed early and retried once
                session.timeout, session.retries = float(tool["run_timeout"]), 1
            say(f"perf: {flavour}: running {tool['title']} on {req.target}"
                f"{' (quick)' if req.quick else ''}")  # fmt: skip
            result = crypto.measure(
                flavour=flavour, library=bs.library, version=bs.version, config=bs.config,
                ecc=bs.ecc, footprint_key=fp.cache_key, session=session,
                where=place.where(req.clock), quick=req.quick,
            )  # fmt: skip
        st.put(store.Record(kind=CRYPTO, key=record_key(flavour, req.target, "crypto"),
                            release=bs.release, device=None, flavour=flavour,
                            data=result.to_dict()))  # fmt: skip
        results.append(result)
    return results


@contextlib.contextmanager
def _placed(
    place: Place, flavour: str, prog: programs.BenchProgram, bs: spec.BuildSpec,
    tc: toolchain.Toolchain, clock: str, say: Callable[[str], None],
) -> Iterator[tuple[programs.BenchProgram, dict[str, str]]]:  # fmt: skip
    """The tool, its library build and the clock shim where the place runs them; uploads
    (router, VM) are removed again after this flavour: a router's /tmp is its RAM."""
    local = [*prog.exes.values(), prog.libdir]
    if clock == "cpu":
        local.append(programs.shim("cpuclock", bs, tc))
    if place.target != "qemu":
        files = [f for p in local for f in ([p] if p.is_file() else p.iterdir())]
        size = sum(f.stat().st_size for f in files if not f.is_symlink())
        say(
            f"perf: {flavour}: uploading {len(prog.exes)} program(s), the library build and "
            f"{'the clock shim' if clock == 'cpu' else 'no shim'} ({size:,} B) to {place.target}"
        )
    made: list[str] = []
    try:
        exes = {}
        for variant, exe in prog.exes.items():
            exes[variant] = Path(place.put(exe, f"{flavour}-{exe.name}"))
            made.append(str(exes[variant]))
        libdir = place.put_dir(prog.libdir, f"{flavour}-lib")
        made.append(libdir)
        env = {}
        if clock == "cpu":
            env["LD_PRELOAD"] = place.put(local[-1], f"{flavour}-cpuclock.so")
            made.append(env["LD_PRELOAD"])
        yield dataclasses.replace(prog, exes=exes, libdir=Path(libdir)), env
    finally:
        for path in made:
            # a lost connection must not hide the error that brought us here; close() checks
            # at the end that the whole upload directory is gone
            with contextlib.suppress(WolfError):
                place.remove(path)
