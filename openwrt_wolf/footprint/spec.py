"""What to build, read from data/footprint/*.toml: target architectures and their flags, the
libraries' sources (version, PKG_HASH, URLs) and their configurations. A BuildSpec is one
library + release + configuration, resolved to exact options and flags."""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ..catalogue import flavours, releases
from ..errors import WolfError
from ..paths import DATA_DIR
from ..results import key_policy
from ..units import parse_size

FOOTPRINT_DATA = DATA_DIR / "footprint"
LIBRARIES = tuple(flavours.get(f).library for f in flavours.names())  # data/flavours.toml
RECIPE_VERSION = 1  # bump when a build recipe changes what it produces (invalidates the cache)


@cache
def _toml(name: str) -> dict[str, Any]:
    path = FOOTPRINT_DATA / name
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise WolfError(f"cannot read {path}: {e}") from None


def _pick(kind: str, name: str, known: list[str], hint_extra: str = "") -> None:
    if name in known:
        return
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(known)}"
    raise WolfError(f"unknown {kind} {name!r}", hint=hint + hint_extra)


@dataclass(frozen=True)
class Arch:
    name: str
    title: str
    debian_prefix: str
    debian_packages: tuple[str, ...]
    sysroot: str
    qemu: str
    endian: str
    elf_flags_arch: str
    cflags: tuple[str, ...]
    extra_optimization: tuple[str, ...]
    soft_float: tuple[str, ...]
    fpic: tuple[str, ...]
    openssl_target: str
    cmake_processor: str
    squashfs_block: int
    # include/hardening.mk's flags that depend on the architecture (PKG_DT_RELR: aarch64,
    # i386, loongarch64, x86_64), after the common ones
    relr_cflags: tuple[str, ...] = ()
    relr_ldflags: tuple[str, ...] = ()
    qemu_cpu: str = ""  # qemu-user's -cpu for the perf lab ("" where it runs natively)


def arch_names() -> list[str]:
    return list(_toml("arch.toml")["arch"])


def get_arch(name: str) -> Arch:
    _pick("arch", name, arch_names(), " (data/footprint/arch.toml)")
    a = _toml("arch.toml")["arch"][name]
    return Arch(
        name=name,
        title=a["title"],
        debian_prefix=a["debian_prefix"],
        debian_packages=tuple(a["debian_packages"]),
        sysroot=a["sysroot"],
        qemu=a["qemu"],
        endian=a["endian"],
        elf_flags_arch=a["elf_flags_arch"],
        cflags=tuple(a["cflags"]),
        extra_optimization=tuple(a["extra_optimization"]),
        soft_float=tuple(a["soft_float"]),
        fpic=tuple(a["fpic"]),
        openssl_target=a["openssl_target"],
        cmake_processor=a["cmake_processor"],
        squashfs_block=parse_size(a["squashfs_block"], what="squashfs_block"),
        relr_cflags=tuple(a.get("relr_cflags", ())),
        relr_ldflags=tuple(a.get("relr_ldflags", ())),
        qemu_cpu=str(a.get("qemu_cpu", "")),
    )


def common_flags() -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in _toml("arch.toml")["common"].items()}


@dataclass(frozen=True)
class Source:
    library: str
    version: str
    file: str  # OpenWrt's PKG_SOURCE name; the cache keeps this name
    sha256: str
    urls: tuple[tuple[str, str], ...]  # (origin, url) in the order to try


def source(library: str, version: str) -> Source:
    raw = _toml("sources.toml")
    lib = raw["library"][library]
    versions = lib["versions"]
    if version not in versions:
        raise WolfError(
            f"{lib['title']} {version}: no known sha256 (data/footprint/sources.toml)",
            hint=f"known versions: {', '.join(versions)}; add its PKG_HASH from OpenWrt's "
            f"package/libs/{library}/Makefile",
        )
    v = versions[version]
    base = ".".join(version.split(".")[:2])
    fmt = {"version": version, "base": base}
    file = lib["file"].format(**fmt)
    urls: list[tuple[str, str]] = [("openwrt", u.format(file=file, **fmt)) for u in lib["urls"]]
    urls += [("openwrt-mirror", f"{m.rstrip('/')}/{file}") for m in raw["openwrt_mirrors"]]
    if v.get("debian", False):
        src = lib["debian_source"]
        prefix = src[:4] if src.startswith("lib") else src[0]
        dfile = lib["debian_file"].format(**fmt)
        urls += [
            ("debian", f"{m.rstrip('/')}/pool/main/{prefix}/{src}/{dfile}")
            for m in raw["debian_mirrors"]
        ]
    return Source(library, version, file, v["sha256"].lower(), tuple(urls))


@dataclass(frozen=True)
class Library:
    name: str
    title: str
    system: str  # cmake, autotools, openssl
    build_flags: tuple[str, ...]
    filter_out_optimization: bool
    extra_cflags: tuple[str, ...]
    libraries: tuple[str, ...]
    smoke: str
    smoke_libs: tuple[str, ...]
    exports: tuple[str, ...]
    raw: dict[str, Any] = field(repr=False, hash=False, compare=False)

    def configs(self) -> list[str]:
        return list(self.raw["config"])


def get_library(name: str) -> Library:
    _pick("library", name, list(LIBRARIES))
    raw = _toml(f"{name}.toml")
    b = raw["build"]
    return Library(
        name=name,
        title=_toml("sources.toml")["library"][name]["title"],
        system=b["system"],
        build_flags=tuple(b["build_flags"]),
        filter_out_optimization=b["filter_out_optimization"],
        extra_cflags=tuple(b.get("extra_cflags", ())),
        libraries=tuple(b["libraries"]),
        smoke=b["smoke"],
        smoke_libs=tuple(b["smoke_libs"]),
        exports=tuple(b["exports"]),
        raw=raw,
    )


@dataclass(frozen=True)
class BuildSpec:
    """One build: everything that decides its output is in here (and so in its cache key)."""

    library: str
    title: str
    release: str
    version: str
    source: Source
    config: str
    config_title: str
    ecc: str | None
    options: tuple[str, ...]  # configure/Configure options, or Mbed TLS "set X"/"unset X"
    cflags: tuple[str, ...]  # may hold {build_dir}/{name} (iremap), filled in at build time
    ldflags: tuple[str, ...]
    build: dict[str, Any] = field(hash=False, compare=False)
    arch: Arch = field(hash=False, compare=False)
    lib: Library = field(hash=False, compare=False)
    exports: tuple[str, ...] = ()  # only these symbols exported (ld version script); () = all

    @property
    def label(self) -> str:
        ecc = f"-{self.ecc}" if self.ecc else ""
        return f"{self.library}-{self.version}-{self.config}{ecc}"

    def key(self, toolchain_id: str) -> str:
        """The cache key: (version, sha256, config, options, flags, toolchain, recipe)."""
        inputs = [RECIPE_VERSION, self.library, self.version, self.source.sha256, self.config,
                  self.ecc, self.options, self.cflags, self.ldflags, self.exports, self.build,
                  self.arch.name, toolchain_id]  # fmt: skip
        return key_policy.named(self.label, key_policy.digest_json(inputs, 16))


def compose_flags(
    arch: Arch, lib: Library, extra_cflags: tuple[str, ...], soft_float: bool
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """TARGET_CFLAGS/TARGET_LDFLAGS in the order rules.mk, package.mk, hardening.mk and the
    package Makefile add them."""
    c = common_flags()
    gc = "gc-sections" in lib.build_flags
    lto = "lto" in lib.build_flags
    cflags = [*arch.cflags, *arch.extra_optimization]
    if soft_float:
        cflags += arch.soft_float
    cflags += c["iremap_cflags"]
    if gc:
        cflags += c["gc_sections_cflags"]
    if lto:
        cflags += c["lto_cflags"]
    cflags += c["page_cflags"]
    cflags += [*c["hardening_cflags"], *arch.relr_cflags]
    if lib.filter_out_optimization:
        cflags = [f for f in cflags if not f.startswith("-O")]
    for f in (*lib.extra_cflags, *extra_cflags):
        cflags += arch.fpic if f == "{fpic}" else [f]
    ldflags = list(c["page_ldflags"])
    if gc:
        ldflags += c["gc_sections_ldflags"]
    if lto:
        ldflags += c["lto_ldflags"]
    ldflags += [*c["hardening_ldflags"], *arch.relr_ldflags]
    return tuple(cflags), tuple(ldflags)


def ecc_choices(library: str, config: str) -> list[str]:
    """The ECC code choices a configuration offers ([] when it has none)."""
    if library != "wolfssl":
        return []
    c = get_library(library).raw["config"].get(config, {})
    if "include" in c:
        c = _toml(c["include"])
    return list(c.get("ecc", {}))


def ecc_names() -> list[str]:
    """Every ECC choice of any wolfSSL configuration, in data order."""
    lib = get_library("wolfssl")
    return list(dict.fromkeys(e for c in lib.configs() for e in ecc_choices("wolfssl", c)))


def _wolfssl_config(
    lib: Library, config: str, ecc: str | None
) -> tuple[str, list[str], list[str], str | None, list[str]]:
    spec = lib.raw["config"][config]
    if "include" in spec:
        spec = {**_toml(spec["include"]), "title": spec.get("title", "")}
    options = list(spec["configure"])
    cflags = list(spec.get("cflags", ()))
    exports = sorted({n for names in spec.get("exports", {}).values() for n in names})
    if spec.get("exports_from") == "wolfssl_consumers":
        from ..patchset import symbols  # the patch set's consumer symbol lists: one export list

        exports = symbols.export_list()
    if "ecc" in spec:
        ecc = ecc or spec["default_ecc"]
        _pick("ECC choice", ecc, list(spec["ecc"]))
        options += spec["ecc"][ecc]["configure"]
    elif ecc and ecc != "package":
        raise WolfError(
            f"wolfSSL config {config!r} has no ECC choice",
            hint="--ecc applies to the minimal config; the OpenWrt package uses wolfSSL's default",
        )
    else:
        ecc = None
    return spec["title"], options, cflags, ecc, exports


def resolve(
    library: str,
    release: str | None,
    config: str,
    arch_name: str = "mips_24kc",
    *,
    ecc: str | None = None,
    soft_float: bool = False,
    version: str | None = None,
) -> BuildSpec:
    arch = get_arch(arch_name)
    lib = get_library(library)
    rel = releases.get(release)
    version = version or rel.versions.get(library)
    if not version:
        raise WolfError(f"release {rel.name} names no {lib.title} version (data/releases.toml)")
    src = source(library, version)
    if config not in lib.configs():
        raise WolfError(
            f"{lib.title} has no config {config!r}", hint=f"its configs: {', '.join(lib.configs())}"
        )
    extra: list[str] = []
    exports: list[str] = []
    if ecc and library != "wolfssl":
        raise WolfError(f"--ecc is a wolfSSL choice; {lib.title} has none")
    try:
        if library == "wolfssl":
            title, options, extra, ecc, exports = _wolfssl_config(lib, config, ecc)
        else:
            spec = lib.raw["config"][config]
            title = spec["title"]
            if library == "mbedtls":
                options = [f"set {o}" for o in spec["set"]]
                options += [f"unset {o}" for o in spec["unset"]]
            else:
                options = list(spec["options"])
        # Config.in defaults that differ by architecture: [arch_drop] <arch> = options
        drop = set(lib.raw.get("arch_drop", {}).get(arch.name, ()))
        options = [o for o in options if o not in drop]
    except KeyError as e:
        raise WolfError(
            f"data/footprint: {library} config {config!r} lacks {e.args[0]!r}",
            hint="fix the TOML file (see docs/footprint.md)",
        ) from None
    cflags, ldflags = compose_flags(arch, lib, tuple(extra), soft_float)
    # what the recipe reads (and the cache key covers); not the smoke/scheduling hints
    build = {k: v for k, v in lib.raw["build"].items() if k not in ("smoke", "exports", "cost")}
    return BuildSpec(
        library=library,
        title=lib.title,
        release=rel.name,
        version=version,
        source=src,
        config=config,
        config_title=title,
        ecc=ecc,
        options=tuple(options),
        cflags=cflags,
        ldflags=ldflags,
        exports=tuple(exports),
        build=build,
        arch=arch,
        lib=lib,
    )


def smoke_source(name: str) -> Path:
    return FOOTPRINT_DATA / "smoke" / name
