"""apk-tools (package/system/apk) built against a TLS library of the footprint lab: cross, with
OpenWrt's target options, as the `apk` component of a flavour; or natively (x86_64, every applet)
for the signing tests. The wolfCrypt backend is our patch (patches/apk-tools/, data/footprint/
apk.toml). Builds are cached under <cache>/footprint/apk/<key>, locked."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import paths, proc
from ..errors import CommandError, WolfError
from ..files import outputs
from ..files.locks import locked
from ..host import upstream
from ..results import key_policy
from ..results.footprint import Component, Footprint
from . import recipes, sources, spec
from .sizes import strip_and_measure
from .toolchain import Toolchain

RECIPE_VERSION = 1  # bump when the recipe changes what it builds
PATCH_DIR = paths.PROJECT_ROOT / "patches" / "apk-tools"
STEP_TIMEOUT = 1200.0
NATIVE_ARCHES = ("x86_64",)  # arch names built without a meson cross file


@dataclass(frozen=True)
class ApkBuild:
    library: str  # the TLS library apk's crypto_backend uses
    package: str  # apk-wolfssl, ...
    arch: str
    native: bool  # every applet, no help (tests); False: OpenWrt's target options
    binary: Path  # unstripped apk, linked against the library build's lib/
    key: str


def data() -> dict[str, Any]:
    return spec._toml("apk.toml")


def variant(library: str) -> dict[str, Any]:
    v: dict[str, Any] = data()["variant"]
    if library not in v:
        raise WolfError(f"apk has no variant for {library!r} (data/footprint/apk.toml)")
    out: dict[str, Any] = v[library]
    return out


def patches() -> list[Path]:
    names = data()["apk"]["patches"]
    out = [PATCH_DIR / n for n in names]
    for p in out:
        if not p.is_file():
            raise WolfError(f"apk-tools patch {p} is missing", hint="restore patches/apk-tools/")
    return out


def _key(parts: list[object]) -> str:
    return key_policy.digest_json([RECIPE_VERSION, *parts], 16)


def root() -> Path:
    return paths.cache_dir() / "footprint" / "apk"


def _source(dest: Path, log: Path) -> Path:
    """apk-tools' tree with our patches applied (GNU patch, so a drifted hunk fails loudly)."""
    top = upstream.source_dir(str(data()["apk"]["upstream"]))
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(top, dest, symlinks=True)
    for p in patches():
        proc.run(
            ["patch", "-p1", "--forward", "--batch", "-i", p], cwd=dest, timeout=120, logfile=log
        )
    return dest


def _write_pc(pcdir: Path, name: str, version: str, include: Path, libdir: Path, libs: str) -> None:
    pcdir.mkdir(parents=True, exist_ok=True)
    (pcdir / f"{name}.pc").write_text(
        f"Name: {name}\nDescription: {name} (footprint lab build)\nVersion: {version}\n"
        f"Cflags: -I{include}\nLibs: -L{libdir} {libs}\n"
    )


def zlib(tc: Toolchain, arch: spec.Arch, cflags: tuple[str, ...]) -> tuple[Path, Path]:
    """(include dir, lib dir) of zlib built for the target (shared, as package/libs/zlib)."""
    z = data()["zlib"]
    src = spec.Source(
        "zlib", z["version"], z["file"], z["sha256"], tuple(("debian", u) for u in z["urls"])
    )
    key = f"zlib-{z['version']}-{arch.name}-" + _key([z["sha256"], tc.identity, cflags])
    out = paths.cache_dir() / "footprint" / "zlib" / key
    with locked(out.parent / f"{key}.lock"):
        lib = out / "lib"
        if (lib / "libz.so").exists():
            return out / "include", lib
        tarball = sources.fetch(src)
        log = out / "build.log"
        out.mkdir(parents=True, exist_ok=True)
        top = recipes.unpack(tarball, out / "src")
        env = {
            "CC": tc.tool("gcc"),
            "AR": tc.tool("gcc-ar"),
            "RANLIB": tc.tool("gcc-ranlib"),
            "CFLAGS": " ".join(cflags),
        }
        proc.run(
            ["./configure", "--prefix=/usr", "--shared"],
            cwd=top,
            env=env,
            logfile=log,
            timeout=STEP_TIMEOUT,
        )
        proc.run(
            ["make", "libz.so.1.3.1" if z["version"] == "1.3.1" else "shared"],
            cwd=top,
            env=env,
            logfile=log,
            timeout=STEP_TIMEOUT,
        )
        (out / "include").mkdir(exist_ok=True)
        for h in ("zlib.h", "zconf.h"):
            shutil.copy2(top / h, out / "include" / h)
        tmp = out / "lib.tmp"
        tmp.mkdir(exist_ok=True)
        for f in top.glob("libz.so*"):
            if f.is_symlink():
                (tmp / f.name).symlink_to(f.readlink())
            else:
                shutil.copy2(f, tmp / f.name)
        outputs.publish(tmp, lib)
        shutil.rmtree(out / "src", ignore_errors=True)
        return out / "include", lib


def _cross_file(
    path: Path,
    tc: Toolchain,
    arch: spec.Arch,
    cflags: tuple[str, ...],
    ldflags: tuple[str, ...],
    pcdir: Path,
) -> None:
    def arr(items: tuple[str, ...] | list[str]) -> str:
        return "[" + ", ".join(repr(i) for i in items) + "]"

    path.write_text(
        "[binaries]\n"
        f"c = {tc.tool('gcc')!r}\nar = {tc.tool('gcc-ar')!r}\nstrip = {tc.tool('strip')!r}\n"
        "pkgconfig = 'pkg-config'\n"
        "[built-in options]\n"
        f"c_args = {arr(cflags)}\nc_link_args = {arr(ldflags)}\n"
        "[properties]\n"
        f"pkg_config_libdir = {str(pcdir)!r}\n"
        "[host_machine]\n"
        f"system = 'linux'\ncpu_family = {arch.cmake_processor!r}\n"
        f"cpu = {arch.cmake_processor!r}\nendian = {arch.endian!r}\n"
    )


def _flags(arch: spec.Arch, soft_float: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """TARGET_CFLAGS/LDFLAGS for a package without PKG_BUILD_FLAGS (apk sets none)."""
    none = spec.Library(
        name="apk",
        title="apk",
        system="meson",
        build_flags=(),
        filter_out_optimization=False,
        extra_cflags=(),
        libraries=(),
        smoke="",
        smoke_libs=(),
        exports=(),
        raw={},
    )
    return spec.compose_flags(arch, none, (), soft_float)


def build_apk(
    bs: spec.BuildSpec,
    lib_key: str,
    lib_dirs: recipes.BuildDirs | None,
    tc: Toolchain,
    *,
    native: bool,
    jobs: int = 2,
) -> ApkBuild:
    """apk linked against the library build in lib_dirs (include/, lib/), or the host's own
    library (native only) when lib_dirs is None."""
    v = variant(bs.library)
    a = data()["apk"]
    options = list(a["host_options"] if native else a["target_options"])
    cross = bs.arch.name not in NATIVE_ARCHES
    cflags, ldflags = _flags(bs.arch, tc.soft_float)
    patch_sums = [hashlib.sha256(p.read_bytes()).hexdigest() for p in patches()]
    key = f"{v['package']}-{a['version']}-{bs.arch.name}-{'native' if native else 'target'}-"
    snap = upstream.pin(str(a["upstream"])).sha256  # the apk-tools source itself
    key += _key([lib_key, snap, patch_sums, options, cflags, ldflags, tc.identity])
    out = root() / key
    binary = out / "apk"
    result = ApkBuild(bs.library, str(v["package"]), bs.arch.name, native, binary, key)
    with locked(root() / f"{key}.lock"):
        if binary.exists():
            return result
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        log = out / "build.log"
        src = _source(out / "src", log)
        pcdir = out / "pkgconfig"
        pcdir.mkdir()
        if lib_dirs is not None:
            for name, libs in dict(v["pkgconfig"]).items():
                _write_pc(pcdir, name, bs.version, lib_dirs.include, lib_dirs.lib, libs)
        if cross:
            zinc, zlib_dir = zlib(
                tc, bs.arch, tuple(c for c in cflags if "{" not in c) + tuple(bs.arch.fpic)
            )
            _write_pc(pcdir, "zlib", "1.3.1", zinc, zlib_dir, "-lz")
            (out / "zlib").symlink_to(zlib_dir)  # for running it under qemu-user
        filled = tuple(c.format(build_dir=src, name=f"apk-{a['version']}") for c in cflags)
        env = {"VERSION": str(a["version"])}
        setup = ["meson", "setup", out / "build", src, f"-Dcrypto_backend={bs.library}", *options]
        if cross:
            env["PKG_CONFIG_LIBDIR"] = str(pcdir)  # nothing of the host's
            _cross_file(out / "cross.ini", tc, bs.arch, filled, ldflags, pcdir)
            setup += ["--cross-file", out / "cross.ini", "--buildtype=plain"]
        else:
            # native: the host's zlib; the library build is found at run time through rpath
            env["PKG_CONFIG_PATH"] = str(pcdir)
            env["CC"] = tc.tool("gcc")
            if lib_dirs:
                setup += [f"-Dc_link_args=-Wl,-rpath,{lib_dirs.lib}"]
        try:
            proc.run(setup, cwd=out, env=env, logfile=log, timeout=STEP_TIMEOUT)
            proc.run(
                ["ninja", "-C", out / "build", f"-j{jobs}", "src/apk"],
                cwd=out,
                env=env,
                logfile=log,
                timeout=STEP_TIMEOUT,
            )
        except CommandError as e:
            raise CommandError(
                f"apk ({v['package']}, {bs.arch.name}): build failed", tail=e.tail, log=e.log
            ) from None
        shutil.copy2(out / "build" / "src" / "apk", out / "apk.tmp")
        outputs.publish(out / "apk.tmp", binary)
        shutil.rmtree(out / "src", ignore_errors=True)
    return result


def component(
    bs: spec.BuildSpec, lib_key: str, lib_dirs: recipes.BuildDirs, tc: Toolchain
) -> Component:
    """The `apk` component of a flavour: apk cross-built as OpenWrt's target build, measured
    like the libraries (strip, sstrip, xz -9e)."""
    ab = build_apk(bs, lib_key, lib_dirs, tc, native=False)
    mdir = root() / ab.key / "measure"
    files = strip_and_measure(tc, [ab.binary], mdir)
    res = Component(
        name="apk",
        package=ab.package,
        files=files,
        cache_key=ab.key,
        installed_path=str(data()["apk"]["installed"]),
    )
    paths.cache_write_text(root() / ab.key / "component.json", json.dumps(res.to_dict(), indent=2))
    return res


# The library configuration each flavour's apk links: wolfSSL's USE_WOLFSSL minimal build (what
# apk-wolfssl meets on the device), the others as OpenWrt's packages build them.
FLAVOUR_CONFIG = {"wolfssl": "minimal", "mbedtls": "openwrt", "openssl": "openwrt"}


def native_build(
    library: str, release: str | None = None, *, version: str | None = None, jobs: int = 2
) -> ApkBuild:
    """apk with every applet, built for the host against the footprint lab's host build of
    the library (both cached), for signing and verifying on this machine."""
    from . import lab, toolchain  # lab imports this module through components

    bs = spec.resolve(library, release, FLAVOUR_CONFIG[library], "x86_64", version=version)
    tc = toolchain.find(bs.arch)
    if variant(library).get("native") == "system":  # the host's own library (apk.toml)
        mods = list(variant(library)["pkgconfig"])
        found = proc.run(["pkg-config", "--modversion", *mods], timeout=30, check=False)
        if found.returncode != 0:
            raise WolfError(f"the host has no {' '.join(mods)} development files (pkg-config)",
                            hint="./wolf hosttools --group test --install")  # fmt: skip
        return build_apk(bs, f"system-{found.output.split()[0]}", None, tc, native=True, jobs=jobs)
    fp = lab.build_one(bs, tc, lab.Request(arch="x86_64", jobs=jobs))
    dirs = recipes.BuildDirs(
        lab.build_root() / fp.cache_key, lab.build_root() / fp.cache_key / "build.log"
    )
    return build_apk(bs, fp.cache_key, dirs, tc, native=True, jobs=jobs)


def zlib_dir(fp: Footprint) -> Path:
    """The target zlib the library build's `apk` component linked (to run it under qemu)."""
    (c,) = [c for c in fp.components if c.name == "apk"]
    return (root() / c.cache_key / "zlib").resolve()


def for_footprint(fp: Footprint, toolchain_path: str | None = None) -> Component:
    """The `apk` component for a library build the lab already made (cached both ways): for
    callers that hold a Footprint (e.g. a whole-stack table), not a BuildSpec."""
    from . import lab, toolchain  # lab imports this module through components

    arch = spec.get_arch(fp.arch)
    tc = toolchain.find(arch, toolchain_path)
    bs = spec.resolve(fp.library, fp.release, fp.config, fp.arch, ecc=fp.ecc,
                      soft_float=tc.soft_float, version=fp.version)  # fmt: skip
    if bs.key(tc.identity) != fp.cache_key:
        raise WolfError(
            f"{fp.title} {fp.config}: the lab's data changed since this build",
            hint="rebuild it with `invoke footprint` first",
        )
    root_dir = lab.build_root() / fp.cache_key
    return component(bs, fp.cache_key, recipes.BuildDirs(root_dir, root_dir / "build.log"), tc)
