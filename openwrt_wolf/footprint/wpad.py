"""wpad-basic-<tls> (hostapd + wpa_supplicant in one multicall program, with hostapd_cli and
wpa_cli) built as OpenWrt 25.12.5 builds it, against the footprint lab's TLS library builds.

From OpenWrt's pinned hostapd tarball (PKG_MIRROR_HASH, data/footprint/wpad.toml) and the
v25.12.5 tree's package/network/services/hostapd: its src/ copied over the source and its
patches applied in name order (Build/Prepare), files/*-basic.config as the two .config files,
the Makefile's DRIVER_MAKEOPTS for the flavour, `make dump_cflags` of both programs merged into
one CFLAGS, hostapd_multi.a + wpa_supplicant_multi.a + files/multicall.c linked into `wpad`
(Build/Compile/wpad). Differences (ubus/ucode off, Debian's libnl-3 for libnl-tiny) are data
with their reasons. Built natively for the lab's x86_64 (the Wi-Fi guest, perf/wifi.py).

Use::

    from openwrt_wolf.footprint import wpad
    wb = wpad.build("wolfssl")          # cached; locked across processes
    wb.wpad, wb.hostapd_cli, wb.wpa_cli, wb.libdir   # programs and the TLS library build
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import paths, proc
from ..errors import CommandError, WolfError
from ..files import outputs
from ..files.locks import locked
from ..host import hosttools, upstream
from ..results import key_policy, store
from ..results.footprint import Footprint, LibraryFile
from . import lab, sizes, sources, spec, toolchain, userland

DATA = spec.FOOTPRINT_DATA / "wpad.toml"
RESULT = "wpad.json"
RECIPE_VERSION = 1  # bump when the recipe changes what it builds
STEP_TIMEOUT = 1800.0
ARCH = "x86_64"  # the guest's architecture (targets/vm/wifiguest.py)
FLAVOURS = userland.FLAVOURS
PROGRAMS = ("wpad", "hostapd_cli", "wpa_cli")


def data() -> dict[str, Any]:
    return spec._toml(DATA.name)  # cached there


@dataclass(frozen=True)
class WpadBuild:
    """One installed wpad: ``root/bin`` the programs, ``root/lib`` the TLS library build."""

    root: Path
    flavour: str
    arch: str
    wpad: Path  # multicall: run as hostapd or wpa_supplicant (argv[0] or first argument)
    hostapd_cli: Path
    wpa_cli: Path
    libdir: Path
    source: str  # the hostapd tarball and the tree the patches came from
    patches: tuple[str, ...]  # OpenWrt's patches, applied in this order
    make_options: tuple[str, ...]  # the make variables given (DRIVER_MAKEOPTS and ours)
    files: tuple[LibraryFile, ...]  # wpad stripped as OpenWrt installs it (sstrip, xz)
    library: Footprint  # the footprint lab's build of the TLS library
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = json.loads(json.dumps(asdict(self), default=str))
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WpadBuild:
        return cls(
            **{
                **d,
                **{k: Path(d[k]) for k in ("root", "wpad", "hostapd_cli", "wpa_cli", "libdir")},
                "patches": tuple(d["patches"]),
                "make_options": tuple(d["make_options"]),
                "files": tuple(LibraryFile(**f) for f in d["files"]),
                "library": Footprint.from_dict(d["library"]),
                "notes": tuple(d["notes"]),
            }
        )


def root_dir() -> Path:
    return paths.cache_dir() / "wpad"


def hostapd_source() -> spec.Source:
    s = data()["source"]
    urls = tuple(("openwrt-mirror", u.format(file=s["file"])) for u in s["urls"])
    return spec.Source(s["library"], s["version"], s["file"], s["sha256"], urls)


def fetch_source() -> Path:
    """OpenWrt's hostapd tarball, sha256-checked: the shared snapshot folder first
    ($OPENWRT_WOLF_SHARED or ../shared: openwrt/offline/dl), --sources/$OPENWRT_WOLF_SOURCES,
    the mirror URLs of the pinned sources (--sources-url/$OPENWRT_WOLF_SOURCES_URL), then
    OpenWrt's source mirrors."""
    shared = [upstream.shared_dir() / d for d in data()["source"]["shared_dirs"]]
    src = hostapd_source()
    try:
        return sources.fetch(
            src, local=[d for d in shared if d.is_dir()], mirrors=upstream.mirror_urls()
        )
    except upstream.Unavailable as e:
        raise upstream.Unavailable(
            e.message.split(", and Debian")[0],
            hint=f"put {src.file} (sha256 {src.sha256[:12]}…, OpenWrt's PKG_MIRROR_HASH) in a "
            f"folder named by ${sources.SOURCES_ENV} or in "
            f"{shared[0] if shared else upstream.shared_dir()}, or serve it by name at a URL "
            f"named by ${upstream.SOURCES_URL_ENV}",
        ) from None


def package_dir(tree: Path) -> Path:
    pkg = tree / str(data()["package_dir"])
    if not (pkg / "Makefile").is_file() or not (pkg / "patches").is_dir():
        raise WolfError(f"{pkg}: not OpenWrt's hostapd package (no Makefile or patches/)",
                        hint="pass an OpenWrt tree of the release (host/upstream.py)")  # fmt: skip
    return pkg


def _flags(a: spec.Arch) -> tuple[list[str], list[str]]:
    """TARGET_CFLAGS/LDFLAGS with the package's PKG_BUILD_FLAGS (gc-sections, lto)."""
    c = spec.common_flags()
    want = data()["make"]["build_flags"]
    cflags, ldflags = userland.target_flags(a, soft_float=False)
    if "gc-sections" in want:
        cflags += c["gc_sections_cflags"]
        ldflags += c["gc_sections_ldflags"]
    if "lto" in want:
        cflags += c["lto_cflags"]
        ldflags += c["lto_ldflags"]
    return cflags, ldflags


def _make_options(flavour: str, libdir: Path, ldflags: list[str]) -> list[str]:
    m, f = data()["make"], data()["flavour"][flavour]
    libs = [*ldflags, f"-L{libdir}", *f["libs"], *m["netlink_libs"], *m["libs_tail"]]
    return [*m["common"], f"CONFIG_TLS={f['tls']}", *m["off"], *m["netlink"],
            f"LIBS={' '.join(libs)}", "LIBS_c="]  # fmt: skip


def _ucode_stub(dest: Path) -> Path:
    types = data()["ucode_stub"]["types"]
    inc = dest / "ucode"
    inc.mkdir(parents=True)
    (inc / "lib.h").write_text(
        "/* stand-in for ucode's header (hostapd built without CONFIG_UCODE) */\n"
        + "".join(f"typedef struct {t} {t};\n" for t in types)
    )
    (inc / "vm.h").write_text('#include "lib.h"\n')
    return dest


def _key(flavour: str, tc: toolchain.Toolchain, fp: Footprint, src: Path, pkg: Path) -> str:
    files = sorted(p for p in pkg.rglob("*") if p.is_file())
    tree = {str(p.relative_to(pkg)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    inputs = [RECIPE_VERSION, flavour, data(), tc.identity, fp.cache_key,
              hostapd_source().sha256, src.name, tree]  # fmt: skip
    return key_policy.named(ARCH, flavour, key_policy.digest_json(inputs, 16))


def build(flavour: str, *, say: Callable[[str], None] = print, rebuild: bool = False) -> WpadBuild:
    """Build (or take from the cache) wpad-basic-<flavour> for x86_64."""
    if flavour not in FLAVOURS:
        raise WolfError(f"unknown flavour {flavour!r}", hint=f"flavours: {', '.join(FLAVOURS)}")
    hosttools.ensure(hosttools.groups()["wpad"])
    a = spec.get_arch(ARCH)
    tc = toolchain.find(a, None)
    tarball = fetch_source()  # the sources first: a missing one before any build
    pkg = package_dir(upstream.openwrt_tree(data()["release"]))
    fv = userland.flavour(flavour)
    bs = spec.resolve(fv.library, data()["release"], fv.config, ARCH, version=fv.version)
    fp = lab.build_one(bs, tc, lab.Request(arch=ARCH, libraries=(fv.library,),
                                           configs=(fv.config,)))  # fmt: skip
    key = _key(flavour, tc, fp, tarball, pkg)
    entry = root_dir() / key
    with locked(root_dir() / f"{key}.lock"):
        if not rebuild and (entry / RESULT).is_file():
            try:
                return WpadBuild.from_dict(json.loads((entry / RESULT).read_text()))
            except (OSError, ValueError, KeyError, TypeError):
                pass  # an older or damaged entry: built again
        say(
            f"wpad: building wpad-basic-{flavour} (hostapd {data()['source']['version']}, "
            f"OpenWrt {data()['release']} patches) against {fp.title} {fp.version} {fp.config}"
        )
        work = root_dir() / f"{key}.work"
        tmp = root_dir() / f"{key}.tmp"
        for stale in (work, tmp, entry):
            shutil.rmtree(stale, ignore_errors=True)
        work.mkdir(parents=True)
        try:
            wb = _build(flavour, tc, a, fp, tarball, pkg, work, tmp, entry)
        except CommandError as e:
            raise CommandError(f"wpad-basic-{flavour}: {e.message}", tail=e.tail,
                               log=str(work / "build.log")) from None  # fmt: skip
        store.write_atomic(tmp / RESULT, json.dumps(wb.to_dict(), indent=2) + "\n")
        shutil.copy2(work / "build.log", tmp / "build.log")
        outputs.publish(tmp, entry)
        shutil.rmtree(work, ignore_errors=True)
        return wb


def _build(
    flavour: str, tc: toolchain.Toolchain, a: spec.Arch, fp: Footprint, tarball: Path,
    pkg: Path, work: Path, tmp: Path, entry: Path,
) -> WpadBuild:  # fmt: skip
    log = work / "build.log"

    def run(argv: list[str | os.PathLike[str]], cwd: Path, env: dict[str, str] | None = None,
            ) -> str:  # fmt: skip
        return proc.run(argv, timeout=STEP_TIMEOUT, cwd=cwd, env=env or {}, logfile=log).output

    run(["tar", "--zstd", "-xf", tarball, "-C", work], cwd=work)
    tops = [p for p in work.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise WolfError(f"{tarball.name}: expected one top folder, found {len(tops)}")
    src = tops[0]
    shutil.copytree(pkg / "src", src, dirs_exist_ok=True)  # Build/Prepare: src/ before patches
    patches = sorted(p for p in (pkg / "patches").iterdir() if p.suffix == ".patch")
    for p in patches:
        run(["patch", "-p1", "--no-backup-if-mismatch", "-i", p], cwd=src)
    variant = data()["variant"]
    shutil.copy2(pkg / "files" / f"hostapd-{variant}.config", src / "hostapd" / ".config")
    shutil.copy2(pkg / "files" / f"wpa_supplicant-{variant}.config",
                 src / "wpa_supplicant" / ".config")  # fmt: skip
    lab_root = lab.build_root() / fp.cache_key
    cflags, ldflags = _flags(a)
    stub = _ucode_stub(work / "stub-include")
    # TARGET_CPPFLAGS (libnl-3's -I comes from hostapd's own pkg-config call, CONFIG_LIBNL32)
    cppflags = [f"-I{lab_root / 'include'}", f"-I{src / 'src' / 'crypto'}", f"-I{stub}",
                "-D_GNU_SOURCE"]  # fmt: skip
    options = _make_options(flavour, lab_root / "lib", ldflags)
    make = ["make", f"CC={tc.tool('gcc')}", f"AR={tc.tool('gcc-ar')}", *options]
    # Build/Compile/wpad: the CFLAGS both programs want, merged, without TARGET_CFLAGS
    dumped = [
        run(
            [*make, "-s", "-C", src / d, "MULTICALL=1", "dump_cflags"],
            cwd=src,
            env={"CFLAGS": " ".join(cppflags)},
        )
        for d in ("hostapd", "wpa_supplicant")
    ]
    merged = " ".join([*cflags, *" ".join(dumped).split()])
    jobs = f"-j{os.cpu_count() or 1}"
    for d, targets in (("hostapd", ["hostapd_cli", "hostapd_multi.a"]),
                       ("wpa_supplicant", ["wpa_cli", "wpa_supplicant_multi.a"])):  # fmt: skip
        run([*make, jobs, "-C", src / d, "MULTICALL=1", *targets], cwd=src,
            env={"CFLAGS": merged})  # fmt: skip
    bin_dir, lib_dir = tmp / "bin", tmp / "lib"
    bin_dir.mkdir(parents=True)
    run([tc.tool("gcc"), *cflags, "-o", bin_dir / "wpad", pkg / "files" / "multicall.c",
         src / "hostapd" / "hostapd_multi.a", src / "wpa_supplicant" / "wpa_supplicant_multi.a",
         *ldflags, f"-L{lab_root / 'lib'}", *data()["flavour"][flavour]["libs"],
         *data()["make"]["netlink_libs"], *data()["make"]["libs_tail"]], cwd=src)  # fmt: skip
    shutil.copy2(src / "hostapd" / "hostapd_cli", bin_dir / "hostapd_cli")
    shutil.copy2(src / "wpa_supplicant" / "wpa_cli", bin_dir / "wpa_cli")
    shutil.copytree(lab_root / "lib", lib_dir, symlinks=True)
    files = sizes.strip_and_measure(tc, [bin_dir / "wpad"], work / "measure")
    notes = [f"{data()['make']['off']}: OpenWrt's ubus/ucode integration left out (no ubusd)",
             "Debian's libnl-3 instead of OpenWrt's libnl-tiny"]  # fmt: skip
    return WpadBuild(
        root=entry, flavour=flavour, arch=ARCH, wpad=entry / "bin" / "wpad",
        hostapd_cli=entry / "bin" / "hostapd_cli", wpa_cli=entry / "bin" / "wpa_cli",
        libdir=entry / "lib",
        source=f"{tarball.name} (sha256 {hostapd_source().sha256[:12]}…), {pkg}",
        patches=tuple(p.name for p in patches), make_options=tuple(options),
        files=tuple(files), library=fp, notes=tuple(notes),
    )  # fmt: skip
