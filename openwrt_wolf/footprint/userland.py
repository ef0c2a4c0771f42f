"""The TLS consumers of OpenWrt's userland, built against the footprint lab's TLS libraries.

Per (arch, flavour) this builds json-c, libubox, ustream-ssl (backend mbedtls | openssl |
wolfssl-native, the last with our patch), uclient (uclient-fetch), uhttpd, px5g and uencrypt
from the sources in ../shared/openwrt (``host.upstream``) with OpenWrt's target flags, against
``lab.build_one``'s build of the flavour's library (data/footprint/userland.toml says which), and
installs them into one tree that runs as is: natively for ``host`` (= the lab's ``x86_64``,
Debian gcc), under qemu-user for ``mips_24kc`` (Debian's mips-linux-gnu gcc, glibc).

Use (helper code, tests, benchmarks)::

    from openwrt_wolf.footprint import userland
    ub = userland.build("wolfssl", arch="mips_24kc")        # cached; locked across processes
    argv = ub.command(ub.uclient_fetch, "-O", "-", "https://localhost:4443/")
    proc.run(argv, env=ub.env(), timeout=60)
    ub.root / "lib"          # every shared object the programs need (TLS library included)
    ub.files                 # installed (sstripped) and xz sizes of the TLS consumers

``UserlandBuild`` fields are stable: root, arch (the lab's name: x86_64 or mips_24kc),
flavour, backend, uhttpd, uclient_fetch, libustream_ssl, libuclient, px5g (None for OpenSSL:
OpenWrt has no px5g-openssl), uencrypt, tls_libraries, qemu/sysroot (None when native), files,
library (the lab's Footprint), notes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .. import paths, proc
from ..catalogue.flavours import names as flavour_names
from ..errors import CommandError, WolfError
from ..files import outputs
from ..files.locks import locked
from ..host import hosttools, upstream
from ..results import key_policy, store
from ..results.footprint import Footprint, LibraryFile
from ..trust import untrusted
from . import lab, sizes, spec, toolchain

DATA = spec.FOOTPRINT_DATA / "userland.toml"
PATCHES = paths.PROJECT_ROOT / "patches"
RESULT = "userland.json"
RECIPE_VERSION = 1  # bump when a recipe below changes what it builds (invalidates the cache)
STEP_TIMEOUT = 900.0
FLAVOURS = tuple(flavour_names())  # the catalogue's (data/flavours.toml)
BACKENDS = {"mbedtls": "mbedtls", "wolfssl": "wolfssl-native", "openssl": "openssl"}
# the upstream snapshots we build (host/upstream.py names)
COMPONENTS = ("json-c", "libubox", "ustream-ssl", "uclient", "uhttpd")
ARCH_ALIASES = {"host": "x86_64"}  # the lab's native arch (data/footprint/arch.toml)


@dataclass(frozen=True)
class UserlandBuild:
    """One installed userland: ``root/bin`` programs, ``root/lib`` every shared object."""

    root: Path
    arch: str
    flavour: str
    backend: str  # ustream-ssl backend: mbedtls | openssl | wolfssl-native
    uhttpd: Path
    uclient_fetch: Path
    libustream_ssl: Path
    libuclient: Path
    px5g: Path | None  # None: OpenWrt has no px5g for this flavour
    uencrypt: Path | None  # None: it did not link against this library build (see notes)
    tls_libraries: tuple[Path, ...]  # the TLS library files (real files) in root/lib
    qemu: str | None  # e.g. qemu-mips-static; None when the arch runs natively
    sysroot: str | None  # qemu -L
    files: tuple[LibraryFile, ...]  # the consumers, stripped as OpenWrt installs them
    library: Footprint  # the lab's record of the TLS library build
    notes: tuple[str, ...] = ()

    def env(self) -> dict[str, str]:
        """Environment for running a program of this tree (its libraries first)."""
        return {"LD_LIBRARY_PATH": str(self.root / "lib")}

    def command(self, program: Path, *args: str) -> list[str]:
        """argv running program natively, or under qemu-user with the target's C library."""
        if self.qemu is None:
            return [str(program), *args]
        return [self.qemu, "-L", str(self.sysroot), str(program), *args]


@dataclass(frozen=True)
class UserlandRecipe:
    name: str
    library: str
    config: str
    version: str | None
    ustream_cmake: tuple[str, ...]
    ustream_patches: tuple[str, ...]
    px5g: str
    px5g_libs: tuple[str, ...]
    uencrypt_cmake: tuple[str, ...]


@cache
def _data() -> dict[str, Any]:
    try:
        return tomllib.loads(DATA.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise WolfError(f"cannot read {DATA}: {e}") from None


def flavour(name: str) -> UserlandRecipe:
    known = _data()["flavour"]
    if name not in known:
        raise WolfError(
            f"unknown flavour {name!r} for the userland", hint=f"known: {', '.join(known)}"
        )
    f = known[name]
    return UserlandRecipe(
        name=name,
        library=f["library"],
        config=f["config"],
        version=f.get("version"),
        ustream_cmake=tuple(f["ustream_cmake"]),
        ustream_patches=tuple(f.get("ustream_patches", ())),
        px5g=f["px5g"],
        px5g_libs=tuple(f["px5g_libs"]),
        uencrypt_cmake=tuple(f["uencrypt_cmake"]),
    )


def release() -> str:
    """The OpenWrt release whose tree (px5g, uencrypt) and settings the userland follows."""
    return str(_data()["release"])


def reference() -> dict[str, list[dict[str, Any]]]:
    """The reference's rootfs growth per flavour over Mbed TLS (data, for the stack note)."""
    return dict(_data()["reference"])


def root_dir() -> Path:
    return paths.cache_dir() / "userland"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class _Ctx:
    """What every step needs: toolchain, flags, staging (OpenWrt's STAGING_DIR/usr)."""

    tc: toolchain.Toolchain
    arch: spec.Arch
    cflags: str
    ldflags: str
    staging: Path  # <work>/staging; headers and libraries under usr/
    work: Path
    log: Path
    jobs: int

    def run(
        self,
        what: str,
        argv: list[str | os.PathLike[str]],
        cwd: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        try:
            proc.run(argv, timeout=STEP_TIMEOUT, cwd=cwd, env=dict(env or {}), logfile=self.log)
        except CommandError as e:
            raise CommandError(
                f"userland: {what} failed ({e.message.split(':')[0]})", tail=e.tail, log=e.log
            ) from None

    def cmake(self, name: str, src: Path, options: list[str]) -> None:
        build = self.work / f"build-{name}"
        usr = self.staging / "usr"
        env = {
            # -L in CFLAGS too: CMake links with them, and some CMakeLists replace LDFLAGS
            "CFLAGS": f"{self.cflags} -I{usr}/include -L{usr}/lib -Wl,-rpath-link={usr}/lib",
            "LDFLAGS": f"{self.ldflags} -L{usr}/lib -Wl,-rpath-link={usr}/lib",
            "PKG_CONFIG_LIBDIR": f"{usr}/lib/pkgconfig",
            "PKG_CONFIG_SYSROOT_DIR": str(self.staging),
        }
        self.run(
            f"{name}: cmake",
            [
                "cmake",
                "--no-warn-unused-cli",
                "-S",
                src,
                "-B",
                build,
                "-G",
                "Unix Makefiles",
                "-DCMAKE_SYSTEM_NAME=Linux",
                "-DCMAKE_SYSTEM_VERSION=1",
                f"-DCMAKE_SYSTEM_PROCESSOR={self.arch.cmake_processor}",
                "-DCMAKE_BUILD_TYPE=Release",
                "-DCMAKE_C_FLAGS_RELEASE=-DNDEBUG",
                f"-DCMAKE_C_COMPILER={self.tc.tool('gcc')}",
                f"-DCMAKE_AR={self.tc.tool('gcc-ar')}",
                f"-DCMAKE_RANLIB={self.tc.tool('gcc-ranlib')}",
                "-DCMAKE_STRIP=:",
                f"-DCMAKE_SHARED_LINKER_FLAGS:STRING={env['LDFLAGS']} -Wl,-Bsymbolic-functions",
                f"-DCMAKE_EXE_LINKER_FLAGS:STRING={env['LDFLAGS']}",
                # only our staging tree: never the build host's own libssl/libjson-c
                f"-DCMAKE_FIND_ROOT_PATH={self.staging}",
                "-DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY",
                "-DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY",
                "-DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY",
                "-DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER",
                "-DCMAKE_INSTALL_PREFIX=/usr",
                "-DCMAKE_SKIP_RPATH=TRUE",
                *options,
            ],
            cwd=self.work,
            env=env,
        )
        self.run(f"{name}: compile", ["make", "-C", build, f"-j{self.jobs}"], cwd=self.work)
        self.run(
            f"{name}: install",
            ["make", "-C", build, "install", f"DESTDIR={self.staging}"],
            cwd=self.work,
        )


def target_flags(arch: spec.Arch, soft_float: bool) -> tuple[list[str], list[str]]:
    """TARGET_CFLAGS/LDFLAGS of a package without PKG_BUILD_FLAGS (footprint/wpad.py adds
    its own)."""
    c = spec.common_flags()
    cflags = [*arch.cflags, *arch.extra_optimization]
    if soft_float:
        cflags += arch.soft_float
    cflags += [*c["page_cflags"], *c["hardening_cflags"], *arch.relr_cflags]
    cflags += _data()["cflags"]["extra"]
    return cflags, [*c["page_ldflags"], *c["hardening_ldflags"], *arch.relr_ldflags]


def _flags(arch: spec.Arch, soft_float: bool) -> tuple[str, str]:
    cflags, ldflags = target_flags(arch, soft_float)
    return " ".join(cflags), " ".join(ldflags)


def _stage_library(fp: Footprint, usr: Path) -> list[Path]:
    """The lab's headers and libraries (with soname links) into staging; the real files."""
    entry = lab.build_root() / fp.cache_key
    shutil.copytree(entry / "include", usr / "include", dirs_exist_ok=True, symlinks=True)
    (usr / "lib").mkdir(parents=True, exist_ok=True)
    real = []
    for p in sorted((entry / "lib").iterdir()):
        dest = usr / "lib" / p.name
        if p.is_symlink():
            dest.symlink_to(os.readlink(p))
        else:
            shutil.copy2(p, dest)
            real.append(dest)
    return real


def _crypt_stub(ctx: _Ctx) -> None:
    """uhttpd links crypt(3), which Debian's mips sysroot lacks (OpenWrt's musl has it in
    libc): a stub libcrypt.so.1 so the test userland links; basic-auth is not exercised."""
    src = ctx.work / "crypt-stub.c"
    src.write_text("char *crypt(const char *k, const char *s) { (void)k; (void)s; return 0; }\n")
    lib = ctx.staging / "usr" / "lib" / "libcrypt.so.1"
    ctx.run(
        "libcrypt stub",
        [ctx.tc.tool("gcc"), "-shared", "-fpic", "-Wl,-soname,libcrypt.so.1", "-o", lib, src],
        cwd=ctx.work,
    )
    (lib.parent / "libcrypt.so").symlink_to("libcrypt.so.1")


def _patched(ctx: _Ctx, src: Path, patches: tuple[str, ...]) -> Path:
    if not patches:
        return src
    dest = ctx.work / f"src-{src.name}"
    shutil.copytree(src, dest, symlinks=True)
    for p in patches:
        ctx.run(
            f"patch {p}", ["patch", "-p1", "--no-backup-if-mismatch", "-i", PATCHES / p], cwd=dest
        )
    return dest


def _build_tree(
    fv: UserlandRecipe, ctx: _Ctx, fp: Footprint, srcs: dict[str, Path], tree: Path
) -> tuple[list[str], bool]:
    """Build everything into staging; returns notes and whether uencrypt linked."""
    notes: list[str] = []
    usr = ctx.staging / "usr"
    _stage_library(fp, usr)
    crypt = _toolchain_crypt(ctx)
    if crypt is not None:  # uhttpd finds crypt(3) in staging (it searches nowhere else)
        (usr / "lib" / "libcrypt.so").symlink_to(crypt)
    else:
        _crypt_stub(ctx)
        notes.append("uhttpd linked against a crypt(3) stub (no libcrypt for this toolchain)")
    ctx.cmake(
        "json-c",
        srcs["json-c"],
        [
            "-DBUILD_TESTING=OFF",
            "-DBUILD_STATIC_LIBS=OFF",
            "-DDISABLE_EXTRA_LIBS=ON",
            "-DDISABLE_WERROR=ON",
        ],
    )
    ctx.cmake("libubox", srcs["libubox"], ["-DBUILD_LUA=OFF", "-DBUILD_EXAMPLES=OFF"])
    ustream = _patched(ctx, srcs["ustream-ssl"], fv.ustream_patches)
    ctx.cmake("ustream-ssl", ustream, list(fv.ustream_cmake))
    # uclient-fetch and uhttpd dlopen libustream-ssl.so by name; the package installs it so
    shutil.copy2(ctx.work / "build-ustream-ssl" / "libustream-ssl.so", usr / "lib")
    ctx.cmake("uclient", srcs["uclient"], ["-DBUILD_UCODE=OFF"])
    ctx.cmake(
        "uhttpd", srcs["uhttpd"], ["-DLUA_SUPPORT=OFF", "-DUBUS_SUPPORT=OFF", "-DUCODE_SUPPORT=OFF"]
    )
    if fv.px5g:
        src = tree / "package" / "utils" / fv.px5g / f"{fv.px5g}.c"
        (usr / "sbin").mkdir(parents=True, exist_ok=True)
        ctx.run(
            "px5g",
            [
                ctx.tc.tool("gcc"),
                *ctx.cflags.split(),
                "-Wl,--gc-sections",
                f"-I{usr}/include",
                "-o",
                usr / "sbin" / "px5g",
                src,
                *ctx.ldflags.split(),
                f"-L{usr}/lib",
                *fv.px5g_libs,
            ],
            cwd=ctx.work,
        )
    uencrypt = tree / "package" / "utils" / "uencrypt" / "src"
    try:
        ctx.cmake("uencrypt", uencrypt, list(fv.uencrypt_cmake))
    except CommandError as e:
        notes.append(
            f"uencrypt did not build against {fp.title} {fp.config}: {e.message}; see {ctx.log}"
        )
        return notes, False
    return notes, True


def _toolchain_crypt(ctx: _Ctx) -> Path | None:
    """The toolchain's own libcrypt.so (Debian's libcrypt-dev for the host), if it has one."""
    out = proc.run([ctx.tc.tool("gcc"), "-print-file-name=libcrypt.so"], timeout=30).output.strip()
    return Path(out).resolve() if out != "libcrypt.so" and Path(out).exists() else None


def _install(usr: Path, root: Path) -> None:
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir(parents=True)
    for d in ("bin", "sbin"):
        for p in sorted((usr / d).glob("*")) if (usr / d).is_dir() else []:
            if p.name in ("uhttpd", "uclient-fetch", "px5g", "uencrypt"):
                shutil.copy2(p, root / "bin" / p.name)
    for p in sorted((usr / "lib").iterdir()):
        if ".so" not in p.name:
            continue
        dest = root / "lib" / p.name
        if p.is_symlink():
            dest.symlink_to(os.readlink(p))
        else:
            shutil.copy2(p, dest)


def _key(
    fv: UserlandRecipe,
    arch: spec.Arch,
    tc: toolchain.Toolchain,
    fp: Footprint,
    srcs: dict[str, Path],
    tree: Path,
    flags: tuple[str, str],
) -> str:
    patches = {p: _sha256(PATCHES / p) for p in fv.ustream_patches}
    inputs = [
        RECIPE_VERSION,
        asdict(fv),
        arch.name,
        tc.identity,
        fp.cache_key,
        {k: v.name for k, v in srcs.items()},
        str(tree),
        patches,
        flags,
    ]
    return key_policy.named(arch.name, fv.name, key_policy.digest_json(inputs, 16))


def _sources(overrides: Mapping[str, Path] | None) -> tuple[dict[str, Path], Path]:
    given = dict(overrides or {})
    srcs = {n: Path(given[n]) if n in given else upstream.source_dir(n) for n in COMPONENTS}
    tree = (
        Path(given["openwrt"]) if "openwrt" in given else upstream.openwrt_tree(_data()["release"])
    )
    for n, p in [*srcs.items(), ("openwrt", tree)]:
        if not p.is_dir():
            raise WolfError(
                f"userland source {n}: {p} is not a directory",
                hint="pass the extracted source tree",
            )
    return srcs, tree


def library_spec(flavour_name: str, arch: str, *, soft_float: bool) -> spec.BuildSpec:
    """The footprint lab's build of the flavour's library the userland links by default."""
    fv = flavour(flavour_name)
    return spec.resolve(fv.library, _data()["release"], fv.config, ARCH_ALIASES.get(arch, arch),
                        ecc=None, soft_float=soft_float, version=fv.version)  # fmt: skip


def build(
    flavour_name: str,
    arch: str = "host",
    *,
    toolchain_path: str | None = None,
    sources: Mapping[str, Path] | None = None,
    rebuild: bool = False,
    jobs: int | None = None,
    library: spec.BuildSpec | None = None,
) -> UserlandBuild:
    """Build (or take from the cache) the userland of one flavour for one arch.

    The TLS library comes from the footprint lab (built on demand, cached, shared with
    ``invoke footprint``). ``sources`` overrides ``host.upstream``'s trees: keys json-c,
    libubox, ustream-ssl, uclient, uhttpd, and openwrt (the tree with package/utils).
    ``library`` links another build of the flavour's library (bench/wolfssl_options.py: one
    configure option on or off); its footprint key is part of the userland's."""
    fv = flavour(flavour_name)
    arch = ARCH_ALIASES.get(arch, arch)
    a = spec.get_arch(arch)
    # the cross toolchain only when cross-building (a host build needs no MIPS gcc)
    tools = hosttools.groups()["userland"]
    hosttools.ensure([t for t in tools if a.qemu or "mips" not in t])
    tc = toolchain.find(a, toolchain_path)
    bs = library_spec(flavour_name, arch, soft_float=tc.soft_float)
    if library is not None:
        if library.library != bs.library:
            raise WolfError(f"userland {flavour_name}: links {bs.title}, not {library.title}")
        bs = library
    req = lab.Request(arch=arch, libraries=(fv.library,), configs=(fv.config,), jobs=jobs)
    fp = lab.build_one(bs, tc, req)
    srcs, tree = _sources(sources)
    flags = _flags(a, tc.soft_float)
    key = _key(fv, a, tc, fp, srcs, tree, flags)
    entry = root_dir() / key
    root_dir().mkdir(parents=True, exist_ok=True)
    with locked(root_dir() / f"{key}.lock"):
        if not rebuild and (entry / RESULT).exists():
            cached = _load(entry)
            if cached is not None:
                return cached
        work = root_dir() / f"{key}.work"
        for stale in (work, entry):
            shutil.rmtree(stale, ignore_errors=True)
        (work / "staging" / "usr").mkdir(parents=True)
        ctx = _Ctx(
            tc=tc,
            arch=a,
            cflags=flags[0],
            ldflags=flags[1],
            staging=work / "staging",
            work=work,
            log=work / "build.log",
            jobs=jobs or os.cpu_count() or 1,
        )
        notes, has_uencrypt = _build_tree(fv, ctx, fp, srcs, tree)
        if fp.version != (releases_pin := _pinned(fv.library)):
            notes.append(
                f"{fp.title} {fp.version} (OpenWrt {_data()['release']} pins {releases_pin})"
            )
        tmp = root_dir() / f"{key}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        _install(ctx.staging / "usr", tmp)
        ub = _describe(fv, a, tc, fp, tmp, entry, notes, has_uencrypt, work)
        store.write_atomic(tmp / RESULT, json.dumps(_to_dict(ub), indent=2) + "\n")
        shutil.copy2(ctx.log, tmp / "build.log")
        outputs.publish(tmp, entry)
        shutil.rmtree(work, ignore_errors=True)
        loaded = _load(entry)
        assert loaded is not None  # just written
        return loaded


def _pinned(library: str) -> str | None:
    from ..catalogue import releases

    return releases.get(_data()["release"]).versions.get(library)


def _describe(
    fv: UserlandRecipe,
    a: spec.Arch,
    tc: toolchain.Toolchain,
    fp: Footprint,
    tmp: Path,
    entry: Path,
    notes: list[str],
    has_uencrypt: bool,
    work: Path,
) -> UserlandBuild:
    """Measure the consumers (strip + sstrip + xz, as the lab measures libraries)."""
    measured = [
        tmp / "lib" / "libustream-ssl.so",
        tmp / "lib" / "libuclient.so",
        tmp / "bin" / "uclient-fetch",
        tmp / "bin" / "uhttpd",
    ]
    if fv.px5g:
        measured.append(tmp / "bin" / "px5g")
    if has_uencrypt:
        measured.append(tmp / "bin" / "uencrypt")
    files = sizes.strip_and_measure(tc, measured, tmp / "measure")  # kept: stack.py
    tls = tuple(entry / "lib" / f.name for f in fp.files)
    native = a.qemu if not _runs_natively(tc) else None
    return UserlandBuild(
        root=entry,
        arch=a.name,
        flavour=fv.name,
        backend=BACKENDS[fv.name],
        uhttpd=entry / "bin" / "uhttpd",
        uclient_fetch=entry / "bin" / "uclient-fetch",
        libustream_ssl=entry / "lib" / "libustream-ssl.so",
        libuclient=entry / "lib" / "libuclient.so",
        px5g=entry / "bin" / "px5g" if fv.px5g else None,
        uencrypt=entry / "bin" / "uencrypt" if has_uencrypt else None,
        tls_libraries=tls,
        qemu=native,
        sysroot=tc.sysroot if native else None,
        files=tuple(files),
        library=fp,
        notes=tuple(notes),
    )


def _runs_natively(tc: toolchain.Toolchain) -> bool:
    return tc.target.split("-")[0] == os.uname().machine


def _to_dict(ub: UserlandBuild) -> dict[str, Any]:
    d: dict[str, Any] = json.loads(json.dumps(asdict(ub), default=str))  # Paths as strings
    return d


def _load(entry: Path) -> UserlandBuild | None:
    try:
        d = untrusted.load_json(entry / RESULT, "userland cache entry")
        opt = {k: Path(d[k]) if d[k] else None for k in ("px5g", "uencrypt")}
        return UserlandBuild(
            root=Path(d["root"]),
            arch=d["arch"],
            flavour=d["flavour"],
            backend=d["backend"],
            uhttpd=Path(d["uhttpd"]),
            uclient_fetch=Path(d["uclient_fetch"]),
            libustream_ssl=Path(d["libustream_ssl"]),
            libuclient=Path(d["libuclient"]),
            px5g=opt["px5g"],
            uencrypt=opt["uencrypt"],
            tls_libraries=tuple(Path(p) for p in d["tls_libraries"]),
            qemu=d["qemu"],
            sysroot=d["sysroot"],
            files=tuple(LibraryFile(**f) for f in d["files"]),
            library=Footprint.from_dict(d["library"]),
            notes=tuple(d["notes"]),
        )
    except (WolfError, KeyError, TypeError):
        return None  # an older or damaged entry: rebuilt


__all__ = ["FLAVOURS", "UserlandBuild", "build", "flavour"]
