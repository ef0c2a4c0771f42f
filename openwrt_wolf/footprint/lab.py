"""`invoke footprint`: plan the builds, fetch and verify sources, build in parallel (cached by
version, sha256, config, flags and toolchain), measure, optionally smoke-test, store records."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths, proc
from ..catalogue import releases
from ..errors import WolfError
from ..files.locks import locked as _locked
from ..host import hosttools
from ..results import store
from ..results.footprint import KIND, XZ_SETTINGS, Footprint
from ..term import progress
from ..trust import untrusted
from . import components, recipes, sizes, smoke, sources, spec, toolchain

RESULT = "footprint.json"


@dataclass(frozen=True)
class Request:
    arch: str = "mips_24kc"
    release: str | None = None
    libraries: tuple[str, ...] = spec.LIBRARIES
    configs: tuple[str, ...] = ("openwrt",)
    ecc: tuple[str, ...] = ()  # wolfSSL ECC choices for configs that have one; () = default
    toolchain: str | None = None
    smoke: bool = False
    sources: tuple[str, ...] = ()  # local directories with tarballs
    mirrors: tuple[str, ...] = ()
    origins: frozenset[str] | None = None  # restrict download origins (tests, offline use)
    parallel: int = 2
    jobs: int | None = None  # make -j per build; default: all cores
    rebuild: bool = False
    store: str | None = None
    keep_sources: bool = False
    versions: tuple[tuple[str, str], ...] = ()  # (library, version) overriding the release's
    components: tuple[str, ...] = ()  # packages built against each library (components.py)
    notes: list[str] = field(default_factory=list)


def build_root() -> Path:
    return paths.cache_dir() / "footprint" / "build"


def _save(root: Path, fp: Footprint) -> None:
    """The entry's footprint.json, in the cache: a link at its name replaced, none followed."""
    paths.cache_write_text(root / RESULT, json.dumps(fp.to_dict(), indent=2) + "\n")


def plan(req: Request, soft_float: bool) -> list[spec.BuildSpec]:
    """Every (library, config, ecc) the request names. A library without the config is skipped
    when several libraries were asked for, an error when it was the only one."""
    spec.get_arch(req.arch)  # unknown arch: fail before anything else
    out = []
    for name in req.libraries:
        lib = spec.get_library(name)
        for config in req.configs:
            if config not in lib.configs():
                if len(req.libraries) == 1:
                    raise WolfError(
                        f"{lib.title} has no config {config!r}",
                        hint=f"its configs: {', '.join(lib.configs())}",
                    )
                req.notes.append(f"{lib.title}: no {config!r} config, skipped")
                continue
            eccs: tuple[str | None, ...] = (None,)
            if req.ecc and spec.ecc_choices(name, config):
                eccs = req.ecc
            elif req.ecc:
                req.notes.append(f"{lib.title} {config}: no ECC choice, --ecc ignored")
            version = dict(req.versions).get(name)
            for ecc in eccs:
                out.append(
                    spec.resolve(name, req.release, config, req.arch, ecc=ecc,
                                 soft_float=soft_float, version=version)
                )  # fmt: skip
    if not out:
        raise WolfError("nothing to build", hint="; ".join(req.notes) or None)
    return out


def load_cached(root: Path) -> Footprint | None:
    f = root / RESULT  # an older or damaged entry: rebuilt
    return untrusted.load_cached(
        f, "footprint cache entry", lambda d: Footprint.from_dict(d, str(f))
    )


def build_one(bs: spec.BuildSpec, tc: toolchain.Toolchain, req: Request) -> Footprint:
    """Build (or take from the cache) and measure one library configuration, with progress:
    the step and the build's output lines (rich on a terminal, periodic lines in logs)."""
    key = bs.key(tc.identity)
    dirs = recipes.BuildDirs(build_root() / key, build_root() / key / "build.log")
    with progress(bs.label) as bar:

        def step(name: str) -> None:
            bar.update(label=f"{bs.label}: {name}")

        lines = 0

        def on_line(_line: str) -> None:
            nonlocal lines
            lines += 1
            if lines % 25 == 0:
                bar.update(completed=lines)

        with _locked(build_root() / f"{key}.lock"):
            fp = None if req.rebuild else load_cached(dirs.root)
            if fp is None:
                fp = _build_and_measure(bs, tc, req, dirs, key, step, on_line)
            if req.smoke and (fp.smoke is None or not fp.smoke.ok):
                step("smoke (qemu-user)")
                result = smoke.run(
                    bs, tc, dirs.include, dirs.lib, dirs.root / "installed", dirs.root / "smoke"
                )
                fp = Footprint.from_dict({**fp.to_dict(), "smoke": result.__dict__})
                _save(dirs.root, fp)
            have = {c.name for c in fp.components}
            if any(name not in have for name in req.components):
                got = list(fp.components)
                for name in req.components:
                    if name not in have:
                        step(f"component {name}")
                        got.append(components.build_component(name, bs, key, dirs, tc))
                fp = dataclasses.replace(fp, components=got)
                _save(dirs.root, fp)
        bar.update(label=bs.label)
    return fp


def _build_and_measure(
    bs: spec.BuildSpec,
    tc: toolchain.Toolchain,
    req: Request,
    dirs: recipes.BuildDirs,
    key: str,
    step: recipes.Step,
    on_line: Callable[[str], None],
) -> Footprint:
    for stale in ("lib", "include", "installed", "stripped", "smoke", RESULT, "build.log"):
        p = dirs.root / stale
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    dirs.root.mkdir(parents=True, exist_ok=True)
    step("fetch")
    tarball = sources.fetch(bs.source, local=req.sources, mirrors=req.mirrors, origins=req.origins)
    start = time.monotonic()
    with proc.recording() as commands:  # the build's own commands, replayable (bench/)
        libs = recipes.run(bs, tc, tarball, dirs, jobs=req.jobs or os.cpu_count() or 1,
                         step=step, on_line=on_line)  # fmt: skip
    seconds = time.monotonic() - start
    step("measure")
    files = sizes.strip_and_measure(tc, libs, dirs.root)
    installed = dirs.root / "installed"
    for link in dirs.lib.iterdir():  # soname links, so the smoke test loads installed copies
        if link.is_symlink() and not (installed / link.name).exists():
            (installed / link.name).symlink_to(os.readlink(link))
    cost = sizes.squashfs_cost([installed / f.name for f in files], bs.arch.squashfs_block)
    notes = []
    pinned = releases.get(bs.release).versions.get(bs.library)
    if pinned != bs.version:
        notes.append(f"{bs.title} {bs.version} built with OpenWrt {bs.release}'s options; "
                     f"{bs.release} itself pins {pinned}")  # fmt: skip
    if not tc.soft_float:
        notes.append(
            "hard-float toolchain: OpenWrt's -msoft-float left out (Debian's sysroot is "
            "hard-float); OpenWrt builds against musl, this against glibc"
        )
    fp = Footprint(
        library=bs.library,
        title=bs.title,
        version=bs.version,
        release=bs.release,
        arch=bs.arch.name,
        config=bs.config,
        config_title=bs.config_title,
        ecc=bs.ecc,
        toolchain=f"{tc.target} gcc {tc.version} ({tc.origin})",
        float_abi=tc.float_abi,
        source_file=bs.source.file,
        source_sha256=bs.source.sha256,
        options=list(bs.options),
        cflags=[c.format(build_dir=".", name=bs.library) for c in bs.cflags],
        ldflags=list(bs.ldflags),
        files=files,
        installed=sum(f.installed for f in files),
        xz=sum(f.xz for f in files),
        xz_settings=XZ_SETTINGS,
        squashfs_cost=cost,
        squashfs_block=bs.arch.squashfs_block,
        text=sum(f.text for f in files),
        data=sum(f.data for f in files),
        bss=sum(f.bss for f in files),
        build_seconds=round(seconds, 1),
        cache_key=key,
        commands=list(commands),
        log=str(dirs.log),
        notes=notes,
        exports=list(bs.exports),
    )
    _save(dirs.root, fp)
    if not req.keep_sources:
        shutil.rmtree(dirs.src, ignore_errors=True)  # OpenSSL's tree is ~300 MB once built
    return fp


@dataclass
class Outcome:
    footprints: list[Footprint]
    errors: list[WolfError]


def run(req: Request) -> Outcome:
    """Build everything the request names; failures do not stop the other builds."""
    arch = spec.get_arch(req.arch)
    components.check(req.components)
    # every name, config and version (and --toolchain) is one line before a tool is installed
    plan(dataclasses.replace(req, notes=[]), soft_float=False)
    if req.toolchain:
        toolchain.given(arch, req.toolchain)
    # Debian's cross toolchain for the arch, unless another one is given
    hosttools.ensure(toolchain.host_tools(arch, req.toolchain))
    tc = toolchain.find(arch, req.toolchain)
    specs = plan(req, soft_float=tc.soft_float)
    if req.components:
        hosttools.ensure(hosttools.groups()["components"])
    if req.smoke and arch.qemu:
        hosttools.ensure([arch.qemu])
    results: list[Footprint | None] = [None] * len(specs)
    errors: list[WolfError] = []
    workers = max(1, min(req.parallel, len(specs)))
    with proc.workers(workers, "footprint") as pool:  # Ctrl-C/TERM stop the compilers
        # longest first, so two-at-a-time does not leave OpenSSL running alone at the end
        order = sorted(range(len(specs)), key=lambda i: -specs[i].lib.raw["build"].get("cost", 1))
        futures = {i: pool.submit(build_one, specs[i], tc, req) for i in order}
        for i, fut in sorted(futures.items()):
            try:
                results[i] = fut.result()
            except WolfError as e:
                errors.append(e)
    done = [r for r in results if r is not None]
    st = store.FileStore(paths.store_dir(req.store))
    for fp in done:
        st.put(
            store.Record(kind=KIND, key=fp.cache_key, release=fp.release, device=None,
                         flavour=fp.library, data=fp.to_dict())
        )  # fmt: skip
    return Outcome(done, errors)
