"""Build recipes: the configure/compile steps of package/libs/{mbedtls,wolfssl,openssl}, run
with the cross toolchain and OpenWrt's flags. Each step runs through proc.run into one log."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import CommandError, WolfError
from .spec import BuildSpec
from .toolchain import Toolchain

STEP_TIMEOUT = 1800.0  # OpenSSL's compile takes ~3 min on 2 cores; a hang is killed


@dataclass(frozen=True)
class BuildDirs:
    root: Path  # <cache>/footprint/build/<key>
    log: Path

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def include(self) -> Path:
        return self.root / "include"  # headers kept for the smoke programs

    @property
    def lib(self) -> Path:
        return self.root / "lib"  # unstripped libraries (+ soname links) for linking


Step = Callable[[str], None]  # reports the current step name (progress)


def unpack(tarball: Path, dest: Path) -> Path:
    """Unpack into dest and return the single top directory (mbedtls-3.6.6, ...)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    # tar (with bzip2/gzip) unpacks these trees several times faster than Python's tarfile
    proc.run(["tar", "-xf", tarball, "-C", dest], timeout=600)
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise WolfError(f"{tarball.name}: expected one top directory, found {len(tops)}")
    return tops[0]


def _fill(flags: tuple[str, ...], build_dir: Path, name: str) -> str:
    return " ".join(f.format(build_dir=build_dir, name=name) for f in flags)


def _run(
    spec: BuildSpec,
    step: str,
    argv: list[str | os.PathLike[str]],
    dirs: BuildDirs,
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
) -> None:
    try:
        proc.run(argv, timeout=STEP_TIMEOUT, cwd=cwd, env=env, logfile=dirs.log, on_line=on_line)
    except CommandError as e:
        raise CommandError(
            f"{spec.label}: {step} failed ({e.message.split(':')[0]})", tail=e.tail, log=e.log
        ) from None


def _mbedtls(spec: BuildSpec, tc: Toolchain, src: Path, dirs: BuildDirs, jobs: int, step: Step,
             on_line: Callable[[str], None] | None) -> list[Path]:  # fmt: skip
    step("config.py")
    header = spec.build["config_header"]
    for opt in spec.options:
        action, name = opt.split()
        _run(spec, "config.py", [sys.executable, "scripts/config.py", "-f", header, action, name],
             dirs, cwd=src)  # fmt: skip
    step("cmake")
    cflags = _fill(spec.cflags, src, src.name)
    ldflags = " ".join(spec.ldflags)
    build = src / "build"
    env = {"CFLAGS": cflags, "LDFLAGS": ldflags}
    _run(spec, "cmake", [
        "cmake", "--no-warn-unused-cli", "-S", src, "-B", build, "-G", "Unix Makefiles",
        "-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_VERSION=1",
        f"-DCMAKE_SYSTEM_PROCESSOR={spec.arch.cmake_processor}",
        "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_C_FLAGS_RELEASE=-DNDEBUG",
        f"-DCMAKE_C_COMPILER={tc.tool('gcc')}", f"-DCMAKE_AR={tc.tool('gcc-ar')}",
        f"-DCMAKE_NM={tc.tool('gcc-nm')}", f"-DCMAKE_RANLIB={tc.tool('gcc-ranlib')}",
        f"-DCMAKE_EXE_LINKER_FLAGS:STRING={ldflags}",
        f"-DCMAKE_SHARED_LINKER_FLAGS:STRING={ldflags} -Wl,-Bsymbolic-functions",
        "-DCMAKE_STRIP=:", "-DCMAKE_INSTALL_PREFIX=/usr", "-DCMAKE_SKIP_RPATH=TRUE",
        *spec.build["cmake_options"],
    ], dirs, cwd=src, env=env)  # fmt: skip
    step("compile")
    _run(spec, "compile", ["make", "-C", build, f"-j{jobs}"], dirs, cwd=src, on_line=on_line)
    shutil.copytree(src / "include", dirs.include, dirs_exist_ok=True)
    return _collect(spec, build)


def _wolfssl(spec: BuildSpec, tc: Toolchain, src: Path, dirs: BuildDirs, jobs: int, step: Step,
             on_line: Callable[[str], None] | None) -> list[Path]:  # fmt: skip
    step("autogen")
    _run(spec, "autogen.sh", ["sh", "./autogen.sh"], dirs, cwd=src)
    step("configure")
    ldflags = list(spec.ldflags)
    if spec.exports:
        ldflags.append(f"-Wl,--version-script={version_script(spec, dirs.root)}")
    env = {
        "CC": tc.tool("gcc"), "AR": tc.tool("gcc-ar"), "RANLIB": tc.tool("gcc-ranlib"),
        "NM": tc.tool("gcc-nm"), "STRIP": tc.tool("strip"),
        "CFLAGS": _fill(spec.cflags, src, src.name), "LDFLAGS": " ".join(ldflags),
    }  # fmt: skip
    _run(spec, "configure", [
        "./configure", f"--host={tc.target}", *spec.build["configure_args"], *spec.options,
    ], dirs, cwd=src, env=env, on_line=on_line)  # fmt: skip
    step("compile")
    _run(spec, "compile", ["make", f"-j{jobs}"], dirs, cwd=src, on_line=on_line)
    shutil.copytree(src / "wolfssl", dirs.include / "wolfssl", dirs_exist_ok=True)
    return _collect(spec, src)


def _openssl(spec: BuildSpec, tc: Toolchain, src: Path, dirs: BuildDirs, jobs: int, step: Step,
             on_line: Callable[[str], None] | None) -> list[Path]:  # fmt: skip
    step("Configure")
    env = {"CFLAGS": _fill(spec.cflags, src, src.name), "LDFLAGS": " ".join(spec.ldflags)}
    _run(spec, "Configure", [
        "perl", "./Configure", spec.arch.openssl_target, *spec.build["configure_args"],
        f"--cross-compile-prefix={tc.prefix}", *spec.options,
    ], dirs, cwd=src, env=env)  # fmt: skip
    step("compile")
    _run(spec, "compile", ["make", f"-j{jobs}", *spec.build["make_targets"]], dirs, cwd=src,
         on_line=on_line)  # fmt: skip
    shutil.copytree(src / "include", dirs.include, dirs_exist_ok=True)
    return _collect(spec, src)


def version_script(spec: BuildSpec, root: Path) -> Path:
    """A GNU ld version script exporting only spec.exports (glob patterns)."""
    path = root / "exports.map"
    names = "".join(f"    {n};\n" for n in spec.exports)
    path.write_text(f"{{\n  global:\n{names}  local: *;\n}};\n")
    return path


RECIPES = {"cmake": _mbedtls, "autotools": _wolfssl, "openssl": _openssl}


def _collect(spec: BuildSpec, top: Path) -> list[Path]:
    """The shipped shared objects (real files, not their links), by the data's globs."""
    found: dict[Path, Path] = {}
    for pattern in spec.lib.libraries:
        for p in sorted(top.glob(pattern)):
            real = p.resolve()
            if real.is_file() and real.suffix != ".la":
                found.setdefault(real, real)
    if not found:
        raise WolfError(
            f"{spec.label}: the build made none of {', '.join(spec.lib.libraries)} in {top}"
        )
    return sorted(found)


def run(
    spec: BuildSpec,
    tc: Toolchain,
    tarball: Path,
    dirs: BuildDirs,
    *,
    jobs: int,
    step: Step,
    on_line: Callable[[str], None] | None = None,
) -> list[Path]:
    """Unpack, configure and compile; copy the libraries (and their soname links) to
    dirs.lib; return the copied real files."""
    step("unpack")
    src = unpack(tarball, dirs.src)
    libs = RECIPES[spec.lib.system](spec, tc, src, dirs, jobs, step, on_line)
    dirs.lib.mkdir(parents=True, exist_ok=True)
    out = []
    for real in libs:
        dest = dirs.lib / real.name
        shutil.copy2(real, dest)
        out.append(dest)
        for link in real.parent.glob(real.name.split(".so")[0] + ".so*"):
            if link.is_symlink() and not (dirs.lib / link.name).exists():
                (dirs.lib / link.name).symlink_to(os.readlink(link))
    return out
