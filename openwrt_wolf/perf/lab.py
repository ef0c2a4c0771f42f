"""`invoke perf`: per flavour, the footprint lab's build of its TLS library (cached), the
library's own benchmark tool built against it, run on the target; one record per
(flavour, target, test) in the results store."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elftools.common.exceptions import ELFError

from .. import paths
from ..catalogue.flavours import names as flavour_names
from ..errors import WolfError
from ..files import elf
from ..footprint import lab as fp_lab
from ..footprint import spec, toolchain, userland
from ..host import hosttools
from ..results import store
from ..results.perf import (
    CRYPTO,
    HANDSHAKE,
    INSTRUCTIONS,
    LAB_ARCH,
    MEMORY,
    SOAK,
    CryptoSpeed,
    Handshakes,
    HeapUse,
    Instructions,
    Soak,
    WifiConnections,
    lab_variant,
    place_label,
    record_key,
)
from ..targets.router.login import Login
from . import (
    cpu_crypto,
    crypto,
    handshake,
    heap_use,
    image_boot,
    image_heap,
    image_tls,
    instructions,
    net,
    netlab,
    open_place,
    programs,
    soak,
    wifi,
    wifi_image,
)
from .place import Place

FLAVOURS = tuple(flavour_names())  # the catalogue's (data/flavours.toml)
TARGETS = ("qemu", "router", "vm")
TESTS = ("crypto", "handshake", "memory", "soak", "wifi")  # what runs when none is named
OPT_IN = ("instructions",)  # only when named: it needs qemu-user's plugins (instructions.py)
NetTest = Callable[[netlab.NetLab], Handshakes | HeapUse | Soak | Instructions]
NET_TESTS: dict[str, tuple[str, NetTest]] = {
    "handshake": (HANDSHAKE, handshake.measure),
    "memory": (MEMORY, heap_use.measure),
    "soak": (SOAK, soak.measure),
    "instructions": (INSTRUCTIONS, instructions.measure),
}
# Where the network tests run: where they have been measured. Every place can serve, signal
# and read (perf/place.py), but the tests hand the host's paths to the programs and check
# the host's files (netlab.py): uploading them to a router or VM, and measuring there, is a
# change of its own.
NET_TARGETS = ("qemu",)
WIFI_TARGETS = ("vm",)  # the x86_64 guest with mac80211_hwsim radios (perf/wifi.py)
Result = CryptoSpeed | Handshakes | HeapUse | Soak | Instructions | WifiConnections


@dataclass(frozen=True)
class Request:
    flavours: tuple[str, ...] = FLAVOURS
    target: str = "qemu"
    tests: tuple[str, ...] = TESTS
    quick: bool = False
    arch: str = LAB_ARCH  # --target qemu: which architecture qemu-user emulates
    cpu_crypto: str | None = None  # AArch64: "on"/"off" for every library (cpu_crypto.py)
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
    rootfs: str | None = None  # --target vm --test wifi: a real image's rootfs (wifi_image.py)
    packages: str | None = None  # … the build's bin/packages/<arch>
    wpad_build: str | None = None  # … the tree's hostapd build of that wpad (hostapd_cli, wpa_cli)
    notes: list[str] = field(default_factory=list)


def _config(req: Request, flavour: str) -> tuple[str, str | None]:
    if flavour == "wolfssl":
        return req.wolfssl_config, (req.ecc if req.wolfssl_config == "minimal" else None)
    return "openwrt", None


def _tests(req: Request, say: Callable[[str], None]) -> tuple[str, ...]:
    """The network tests run on qemu only (yet), the Wi-Fi test on vm only: asked for by name
    elsewhere, one line; left out of the default "all" there, with a line that says so."""
    asked_all = req.tests == TESTS
    tests = req.tests
    if "wifi" in tests and req.target not in WIFI_TARGETS:
        if not asked_all:
            raise WolfError(
                f"--test wifi runs on --target vm only, not {req.target}",
                hint="its guest is built and booted by the lab: docs/perf.md, Wi-Fi",
            )
        tests = tuple(t for t in tests if t != "wifi")
        if req.target != "router":
            say(f"perf: {req.target}: wifi left out (it runs on --target vm)")
    net_asked = [t for t in tests if t in NET_TESTS]
    if req.target in NET_TARGETS or not net_asked:
        return tests
    if not asked_all:
        raise WolfError(
            f"--test {','.join(net_asked)} runs on --target qemu only (for now), not {req.target}",
            hint="use --test crypto on a router or VM, or --test memory in a real image "
            "(--target vm --rootfs); docs/perf.md, Targets",
        )
    if req.target == "vm":
        if req.image:
            say("perf: vm: crypto (on --image) and wifi (handshake, memory and soak run on "
                "qemu for now)")  # fmt: skip
            return ("crypto", "wifi")
        say("perf: vm: wifi only (crypto needs --image; handshake, memory and soak run on qemu)")
        return ("wifi",)
    say(f"perf: {req.target}: crypto only (handshake, memory and soak run on qemu for now)")
    return ("crypto",)


def run(req: Request, say: Callable[[str], None] = print) -> list[Result]:
    for f in req.flavours:
        if f not in FLAVOURS:
            raise WolfError(f"unknown flavour {f!r}", hint=f"flavours: {', '.join(FLAVOURS)}, all")
    if req.target not in TARGETS:
        raise WolfError(f"unknown or unsupported target {req.target!r}",
                        hint=f"targets this lab runs: {', '.join(TARGETS)}")  # fmt: skip
    if req.clock not in ("cpu", "wall"):
        raise WolfError(f"--clock {req.clock!r}: expected cpu or wall")
    if req.rootfs:
        return _image(req, say)
    req = dataclasses.replace(req, tests=_tests(req, say))
    results: list[Result] = []
    others = tuple(t for t in req.tests if t != "wifi")
    if others:
        results += _run_place(dataclasses.replace(req, tests=others), say)
    if "wifi" in req.tests:
        other_wolfssl = (req.wolfssl_config, req.ecc) != ("minimal", "sp-p256")
        if req.toolchain or ("wolfssl" in req.flavours and other_wolfssl):
            say("perf: wifi: wpad links the userland's libraries (x86_64, wolfSSL minimal "
                "sp-p256), not --wolfssl-config/--ecc/--toolchain")  # fmt: skip
        results += wifi.run(req.flavours, quick=req.quick, store_dir=req.store, say=say)
    return results


def _image(req: Request, say: Callable[[str], None]) -> list[Result]:
    """The tests inside a real OpenWrt image (cli.py checked the options belong together)."""
    if not (req.image and req.rootfs and req.toolchain):
        raise WolfError("the tests in a real image need --image, --rootfs and --toolchain (the "
                        "image's OpenWrt toolchain, for heaptrack)")  # fmt: skip
    # before a certificate is made, a tool installed or the image booted
    toolchain.given(spec.get_arch(req.arch), req.toolchain)
    (flavour,) = req.flavours
    img = image_boot.Image(Path(req.image), Path(req.rootfs), req.toolchain, req.release or "")
    results: list[Result] = []
    if "handshake" in req.tests:
        results.append(image_tls.run(image_tls.Request(flavour, img, req.quick, req.store),
                                     say=say))  # fmt: skip
    if "memory" in req.tests:
        n = int(crypto.settings()["net"]["quick" if req.quick else "full"]["requests"])
        results.append(image_heap.run(image_heap.Request(flavour, img, n, req.quick, req.store),
                                      say=say))  # fmt: skip
    if "wifi" in req.tests:
        if not req.packages:
            raise WolfError("--test wifi in a real image needs --packages")
        results.append(wifi_image.run(
            wifi_image.Request(
                flavour=flavour, kernel=img.kernel, rootfs=img.rootfs,
                packages=Path(req.packages), toolchain=req.toolchain,
                wpad_build=Path(req.wpad_build) if req.wpad_build else None,
                release=img.release, quick=req.quick, store=req.store,
            ),
            say=say,
        ))  # fmt: skip
    return results


def _run_place(req: Request, say: Callable[[str], None]) -> list[Result]:
    """The tests that run at a place (crypto, and the network tests on qemu)."""
    if req.toolchain:  # a path is checked before a place is opened or a tool installed
        toolchain.given(spec.get_arch(req.arch), req.toolchain)
    vm = open_place.VmOptions(req.image, req.initrd, req.append) if req.image else None
    with open_place.opened(req.target, login=req.login, vm=vm, say=say) as remote:
        arch_name = req.arch
        if remote is not None:
            arch_name = open_place.lab_arch(remote.platform, remote.target)
        arch = spec.get_arch(arch_name)
        # the cross toolchain only where it is the one used
        needed = toolchain.host_tools(arch, req.toolchain)
        net_tests = [t for t in req.tests if t in NET_TESTS]
        counting = [arch.qemu.removesuffix("-static")] if "instructions" in req.tests else []
        hosttools.ensure([*needed, *([arch.qemu, *counting] if remote is None else []), "patch",
                          *(["openssl", "gcc"] if net_tests else [])])  # fmt: skip
        tc = toolchain.find(arch, req.toolchain)
        conf = crypto.settings()
        place: Place
        if remote is None:
            place = open_place.qemu_place(arch, tc, arch.qemu_cpu)
        else:
            open_place.check_libc(remote, tc)
            place = remote
        try:
            return _run_all(dataclasses.replace(req, arch=arch_name), place, tc, conf, say)
        finally:
            if remote is None:  # the router's or VM's is closed by opened()
                place.close()


def _run_all(
    req: Request, place: Place, tc: toolchain.Toolchain, conf: dict[str, Any],
    say: Callable[[str], None],
) -> list[Result]:  # fmt: skip
    st = store.FileStore(paths.store_dir(req.store))
    net_tests = [t for t in req.tests if t in NET_TESTS]
    results: list[Result] = []
    work = Path(tempfile.mkdtemp(prefix="wolf-perf-"))
    try:
        pki = net.make_pki(work / "pki", int(conf["net"]["page_bytes"]),
                           int(conf["net"]["download_bytes"])) if net_tests else None  # fmt: skip
        probe = net.probe() if net_tests else None
        for flavour in req.flavours:
            config, ecc = _config(req, flavour)
            fp_req = fp_lab.Request(arch=req.arch, release=req.release, libraries=(flavour,),
                                    configs=(config,), ecc=(ecc,) if ecc else (),
                                    toolchain=req.toolchain, versions=req.versions)  # fmt: skip
            (bs,) = fp_lab.plan(fp_req, soft_float=tc.soft_float)
            bs = cpu_crypto.build(bs, flavour, req.cpu_crypto)
            say(f"perf: {flavour}: library {bs.label} (footprint lab, {req.arch})")
            if "crypto" in req.tests:
                results.append(_crypto(req, flavour, bs, tc, fp_req, place, conf, st, say))
            if pki is not None and probe is not None and place.target in NET_TARGETS:
                results += _net(req, flavour, bs, tc, place, conf, st, say, pki, probe)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def _crypto(
    req: Request, flavour: str, bs: spec.BuildSpec, tc: toolchain.Toolchain,
    fp_req: fp_lab.Request, place: Place, conf: dict[str, Any], st: store.FileStore,
    say: Callable[[str], None],
) -> CryptoSpeed:  # fmt: skip
    fp = fp_lab.build_one(bs, tc, fp_req)
    fp_root = fp_lab.build_root() / fp.cache_key
    tool = conf["tool"][flavour]
    say(f"perf: {flavour}: building {tool['title']}")
    prog = programs.bench_program(bs, tc, fp, fp_root, quick=req.quick, tool=tool)
    with _placed(place, flavour, prog, bs, tc, req.clock, say) as (placed, env):
        env = env | cpu_crypto.env(flavour, req.cpu_crypto)
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
    if (note := _cpu_crypto_note(req, flavour)) is not None:
        result = dataclasses.replace(result, notes=[*result.notes, note])
    variant = _variant(req)
    st.put(store.Record(kind=CRYPTO, key=record_key(flavour, place_label(req.target, variant),
                                                    "crypto"),
                        release=bs.release, device=variant, flavour=flavour,
                        data=result.to_dict()))  # fmt: skip
    return result


def _net(
    req: Request, flavour: str, bs: spec.BuildSpec, tc: toolchain.Toolchain, place: Place,
    conf: dict[str, Any], st: store.FileStore, say: Callable[[str], None], pki: net.Pki,
    probe: net.Probe,
) -> list[Result]:  # fmt: skip
    """Handshakes, heap and soak with the flavour's uhttpd and uclient-fetch on the target."""
    results: list[Result] = []
    library = None
    if req.cpu_crypto is not None:  # the userland links the switched build of its library
        default = userland.library_spec(flavour, req.arch, soft_float=tc.soft_float)
        library = cpu_crypto.build(default, flavour, req.cpu_crypto)
    ub = userland.build(flavour, arch=req.arch, toolchain_path=req.toolchain, library=library)
    if flavour == "wolfssl" and (req.wolfssl_config, req.ecc) != ("minimal", "sp-p256"):
        say(f"perf: wolfssl: uhttpd/uclient-fetch use the userland's library "
            f"({ub.library.config}), not --wolfssl-config/--ecc")  # fmt: skip
    lab = netlab.NetLab(
        flavour=flavour, ub=ub, heaptrack=programs.shim("heaptrack", bs, tc),
        place=place, probe=probe, pki=pki,
        conf=netlab.sizes(conf["net"], req.quick), quick=req.quick, clock="wall", say=say,
        extra_env=cpu_crypto.env(flavour, req.cpu_crypto),
    )  # fmt: skip
    for test in (t for t in req.tests if t in NET_TESTS):
        kind, measure_test = NET_TESTS[test]
        say(f"perf: {flavour}: {test} on {req.target}{' (quick)' if req.quick else ''}")
        res = measure_test(lab)
        variant = _variant(req)
        st.put(store.Record(kind=kind, key=record_key(flavour, place_label(req.target, variant),
                                                      test),
                            release=bs.release, device=variant, flavour=flavour,
                            data=res.to_dict()))  # fmt: skip
        results.append(res)
    return results


def _variant(req: Request) -> str | None:
    """What the keys and the device say besides the target: the emulated architecture (and
    crypto extensions) on qemu only; a router or VM is its own (its keys stay `<target>`)."""
    return lab_variant(req.arch, req.cpu_crypto) if req.target == "qemu" else None


def _cpu_crypto_note(req: Request, flavour: str) -> str | None:
    """On an AArch64 lab: whether this library ran with the ARMv8 crypto extensions."""
    if not req.arch.startswith(cpu_crypto.ARCHES):
        return None
    if req.cpu_crypto is None:
        return (f"ARMv8 crypto extensions: {cpu_crypto.shipped(flavour)}, as OpenWrt builds "
                f"{flavour} for bcm2712")  # fmt: skip
    how = cpu_crypto.build_words(flavour, req.cpu_crypto)
    return f"ARMv8 crypto extensions: {req.cpu_crypto} (--cpu-crypto{': ' + how if how else ''})"


def _needed(elf_file: Path) -> list[str]:
    """The DT_NEEDED entries of a file (none when it is not an ELF file)."""
    try:
        return elf.needs(elf_file)[1]
    except ELFError:
        return []


def _with_runtime(prog: programs.BenchProgram, tc: toolchain.Toolchain, dest: Path) -> Path:
    """The library build, plus the compiler's runtime libraries it and the tools need
    (libatomic.so.1 for OpenSSL built by OpenWrt's gcc: the image of another flavour has no
    libatomic package), from the toolchain's lib/; the C library is the target's own."""
    shutil.copytree(prog.libdir, dest, symlinks=True)
    have = {p.name for p in dest.iterdir()}
    runtime = Path(tc.sysroot) / "lib"
    elves = [p for p in dest.iterdir() if p.is_file() and not p.is_symlink()]
    for name in sorted({n for e in [*elves, *prog.exes.values()] for n in _needed(e)}):
        src = runtime / name
        if name in have or name.startswith(("libc.", "ld-")) or not src.exists():
            continue
        shutil.copyfile(src.resolve(), dest / name)
        have.add(name)
    return dest


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
        if place.target == "qemu":  # runs here: qemu-user finds the runtime in the sysroot
            libdir = place.put_dir(prog.libdir, f"{flavour}-lib")
        else:  # copied there: the copy is made while the temporary directory exists
            with tempfile.TemporaryDirectory(prefix="wolf-perf-lib-") as tmp:
                libdir = place.put_dir(_with_runtime(prog, tc, Path(tmp) / "lib"), f"{flavour}-lib")
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
