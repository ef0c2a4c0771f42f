"""Programs the lab runs on the target, cross-built and cached under <cache>/perf/:

- the LD_PRELOAD shims of data/perf/: heaptrack.so (heap counter) and cpuclock.so (CPU-time
  clocks for benchmark programs);
- each library's own benchmark tool, built from the library's source tarball (the footprint
  lab's download) against the footprint lab's build of that library: wolfCrypt's
  wolfcrypt/benchmark/benchmark.c, Mbed TLS's programs/test/benchmark.c (with our patch for
  block size, AAD and precision), and OpenSSL's apps/openssl (for `openssl speed`), configured
  exactly like the library and linked against the library build, which make does not rebuild.

Every entry is keyed by what decides its output and built under a lock, so parallel jobs
share one build."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .. import paths, proc
from ..errors import WolfError
from ..files import outputs
from ..files.locks import locked
from ..footprint import recipes as fp_build
from ..footprint import sources
from ..footprint.spec import BuildSpec
from ..footprint.toolchain import Toolchain
from ..results import key_policy
from ..results.footprint import Footprint

RECIPE_VERSION = 1
COMPILE_TIMEOUT = 600.0
SHIMS = ("heaptrack", "cpuclock")


def data_file(name: str) -> Path:
    return Path(str(resources.files("openwrt_wolf") / "data" / "perf" / name))


def root() -> Path:
    return paths.cache_dir() / "perf"


def _key(*parts: object) -> str:
    return key_policy.digest_json([RECIPE_VERSION, *parts], 16)


def _cpu_flags(bs: BuildSpec, tc: Toolchain) -> list[str]:
    """The target's CPU flags (TARGET_OPTIMIZATION); soft-float only with such a toolchain."""
    return [*bs.arch.cflags, *(bs.arch.soft_float if tc.soft_float else ())]


def shim(name: str, bs: BuildSpec, tc: Toolchain) -> Path:
    """data/perf/<name>.c as a shared object for LD_PRELOAD on the target."""
    if name not in SHIMS:
        raise WolfError(f"unknown shim {name!r}")
    src = data_file(f"{name}.c")
    flags = [*_cpu_flags(bs, tc), "-fpic", "-shared", "-Wall", "-Wextra", "-Werror"]
    key = _key(name, src.read_bytes().hex(), flags, tc.identity)
    out = root() / "shims" / f"{name}-{key}" / f"{name}.so"
    with locked(out.parent.with_suffix(".lock")):
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(".tmp")
            proc.run([tc.tool("gcc"), *flags, "-o", tmp, src, "-ldl", "-lrt"],
                     timeout=COMPILE_TIMEOUT)  # fmt: skip
            outputs.publish(tmp, out)
    return out


@dataclass(frozen=True)
class BenchProgram:
    """A benchmark tool built for one footprint build. ``exes``: variant -> program (Mbed TLS
    has the block size and run time compiled in; the others take them as arguments)."""

    library: str
    exes: dict[str, Path]
    libdir: Path  # the footprint build's installed (sstripped) libraries
    source: str  # what the program was built from


def _extract(tarball: Path, member_suffixes: tuple[str, ...], dest: Path) -> Path:
    """Unpack only the members under the given paths; return the tree's top directory."""
    dest.mkdir(parents=True, exist_ok=True)
    listing = proc.run(["tar", "-tf", tarball], timeout=300).output.split()
    # files only: GNU tar matches each name once, so a directory and its files would clash
    inside = [(m, m.split("/", 1)[-1]) for m in listing if not m.endswith("/")]
    wanted = [m for m, rel in inside if rel.startswith(member_suffixes)]
    if not wanted:
        raise WolfError(f"{tarball.name}: none of {', '.join(member_suffixes)} inside")
    proc.run(["tar", "-xf", tarball, "-C", dest, *wanted], timeout=300)
    return dest / wanted[0].split("/", 1)[0]


def bench_program(
    bs: BuildSpec,
    tc: Toolchain,
    fp: Footprint,
    fp_root: Path,
    *,
    quick: bool,
    tool: dict[str, object],
) -> BenchProgram:
    """The library's benchmark tool against the footprint build in fp_root."""
    tarball = sources.fetch(bs.source)
    variants = _variants(bs.library, quick, tool)
    patch = data_file(str(tool["patch"])).read_text() if tool.get("patch") else ""
    key = _key(bs.library, fp.cache_key, variants, patch, _cpu_flags(bs, tc), tc.identity)
    out = root() / "bench" / f"{bs.label}-{key}"
    libdir = fp_root / "installed"
    with locked(out.with_suffix(".lock")):
        done = out / "programs.json"
        if done.exists():
            exes = {k: Path(v) for k, v in json.loads(done.read_text()).items()}
            if all(p.exists() for p in exes.values()):
                return BenchProgram(bs.library, exes, libdir, str(tool["title"]))
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        build = BUILDERS[bs.library]
        exes = build(bs, tc, fp_root, tarball, out, variants, tool)
        if bs.library != "openssl":
            shutil.rmtree(out / "src", ignore_errors=True)
        done.write_text(json.dumps({k: str(v) for k, v in exes.items()}, indent=2) + "\n")
    return BenchProgram(bs.library, exes, libdir, str(tool["title"]))


def _variants(library: str, quick: bool, tool: dict[str, object]) -> dict[str, list[str]]:
    """Compile-time settings per program variant."""
    if library == "wolfssl":
        secs = tool["quick_min_seconds" if quick else "min_seconds"]
        return {"all": [f"-DBENCH_MIN_RUNTIME_SEC={secs}"]}
    if library == "mbedtls":
        pk = tool["quick_pk_seconds" if quick else "pk_seconds"]
        return {
            str(size): [f"-DBUFSIZE={size}", "-DBENCH_TSC_LOOPS=1", "-DBENCH_RSA_MAX=2048",
                        "-DBENCH_RSA_FIXED_KEY", f"-DBENCH_PK_SECONDS={pk}"]
            for size in (1024, 16384)
        }  # fmt: skip
    return {"all": []}  # openssl: everything is a command-line option


def _link(tc: Toolchain, fp_root: Path, libs: list[str]) -> list[str]:
    lib = fp_root / "lib"
    return [f"-L{lib}", f"-Wl,-rpath-link,{lib}", *libs, "-lm", "-pthread"]


def _wolfssl(
    bs: BuildSpec, tc: Toolchain, fp_root: Path, tarball: Path, out: Path,
    variants: dict[str, list[str]], tool: dict[str, object],
) -> dict[str, Path]:  # fmt: skip
    top = _extract(tarball, ("wolfcrypt/benchmark/",), out / "src")
    exes = {}
    for name, defines in variants.items():
        exe = out / f"benchmark-{name}"
        proc.run([
            tc.tool("gcc"), *_cpu_flags(bs, tc), *defines, f"-I{fp_root / 'include'}", f"-I{top}",
            "-o", exe, top / str(tool["program"]), data_file("wolfssl-bench-alloc.c"),
            *_link(tc, fp_root, ["-lwolfssl"]),
        ], timeout=COMPILE_TIMEOUT)  # fmt: skip
        exes[name] = exe
    return exes


def _mbedtls(
    bs: BuildSpec, tc: Toolchain, fp_root: Path, tarball: Path, out: Path,
    variants: dict[str, list[str]], tool: dict[str, object],
) -> dict[str, Path]:  # fmt: skip
    top = _extract(tarball, (str(tool["program"]),), out / "src")
    proc.run(["patch", "-p1", "-i", data_file(str(tool["patch"]))], timeout=60, cwd=top)
    exes = {}
    for name, defines in variants.items():
        exe = out / f"benchmark-{name}"
        proc.run([
            tc.tool("gcc"), *_cpu_flags(bs, tc), *defines, f"-I{fp_root / 'include'}",
            "-o", exe, top / str(tool["program"]),
            *_link(tc, fp_root, ["-lmbedtls", "-lmbedx509", "-lmbedcrypto"]),
        ], timeout=COMPILE_TIMEOUT)  # fmt: skip
        exes[name] = exe
    return exes


def _openssl(
    bs: BuildSpec, tc: Toolchain, fp_root: Path, tarball: Path, out: Path,
    variants: dict[str, list[str]], tool: dict[str, object],
) -> dict[str, Path]:  # fmt: skip
    """apps/openssl in a tree configured like the library (same Configure line and flags), linked
    against the footprint build: `make -o` keeps make from rebuilding the libraries."""
    src = fp_build.unpack(tarball, out / "src")
    env = {"CFLAGS": " ".join(f.format(build_dir=src, name=src.name) for f in bs.cflags),
           "LDFLAGS": " ".join(bs.ldflags)}  # fmt: skip
    log = out / "build.log"
    proc.run(["perl", "./Configure", bs.arch.openssl_target, *bs.build["configure_args"],
              f"--cross-compile-prefix={tc.prefix}", *bs.options],
             timeout=fp_build.STEP_TIMEOUT, cwd=src, env=env, logfile=log)  # fmt: skip
    jobs = f"-j{os.cpu_count() or 1}"
    proc.run(["make", jobs, "build_generated"], timeout=fp_build.STEP_TIMEOUT, cwd=src,
             logfile=log)  # fmt: skip
    keep = []
    for lib in sorted((fp_root / "lib").iterdir()):
        dest = src / lib.name
        if dest.exists() or dest.is_symlink():
            dest.unlink()
        if lib.is_symlink():
            dest.symlink_to(os.readlink(lib))
        else:
            shutil.copy2(lib, dest)
        keep += ["-o", lib.name]
    proc.run(["make", jobs, *keep, "apps/openssl"], timeout=fp_build.STEP_TIMEOUT, cwd=src,
             logfile=log)  # fmt: skip
    exe = out / "openssl"
    shutil.copy2(src / "apps" / "openssl", exe)
    shutil.rmtree(src, ignore_errors=True)  # ~100 MB of objects
    return {"all": exe}


BUILDERS = {"wolfssl": _wolfssl, "mbedtls": _mbedtls, "openssl": _openssl}
