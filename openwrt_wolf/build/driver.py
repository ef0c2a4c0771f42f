"""`invoke build`: flavours × devices through OpenWrt's ImageBuilder, cached by request hash.

One job per (device, flavour). Jobs whose request hash is in the store return the stored
record without running make (unless --force). The rest are grouped by ImageBuilder
(release, target); each group runs its profiles in parallel on -j working copies of the tree
("slots"), because one ImageBuilder directory holds one build at a time. A record is written
(atomically) only when a build finished, so a killed run leaves none, and the next run starts
the build again from a clean BIN_DIR."""

from __future__ import annotations

import contextlib
import fnmatch
import json
import queue
import re
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import paths, proc, signals, term
from ..catalogue import flavours, releases
from ..catalogue.devices import Device
from ..errors import WolfError
from ..files import outputs
from ..files.hashing import file_sha256
from ..firmware import artifacts
from ..host import hosttools
from ..patchset import series
from ..results import key_policy, store
from ..results.artifacts import Artifacts
from ..results.build import KIND, Artifact, BuildRecord
from ..trust import untrusted
from . import basefeed, buildroot, download, packages
from . import sdk as sdk_mod
from .imagebuilder import PHASES, ImageBuilder, Info
from .jobs import Job, Options, Outcome, _sources_digest, plan
from .sources import dl
from .trees import obtain_imagebuilder, obtain_sdk, slot_dirs, tree_lock


@dataclass
class _Group:
    """Shared by the jobs of one ImageBuilder."""

    ib_name: str
    ib_sha256: str | None
    info: Info
    seconds: dict[str, float] = field(default_factory=dict)
    local: list[Path] = field(default_factory=list)  # packages the SDK built
    sdk: tuple[str | None, str | None] = (None, None)  # SDK name and archive sha256
    sources: dict[str, Any] = field(default_factory=dict)  # the base feed's substitutions


def build(opts: Options) -> list[Outcome]:
    """Run (or fetch from the store) every job; returns one outcome per job, in order."""
    jobs = plan(opts)
    st = store.FileStore(paths.store_dir(opts.store))
    con = term.console(stderr=True)
    outcomes: dict[str, Outcome] = {}
    todo: list[Job] = []
    for job in jobs:
        rec = None if opts.force else st.get(KIND, job.key)
        kept = None if opts.force or rec is not None else _kept_record(job)
        if rec is not None or kept is not None:
            path = st.root / KIND / f"{job.key}.json"
            try:
                stored = BuildRecord.from_dict(rec.data if rec is not None else kept or {})
            except WolfError as e:
                con.print(
                    f"rebuild {job.label}: its record does not read ({e})",
                    markup=False,
                    soft_wrap=True,
                )
            else:
                changed = _changed_artifacts(stored, job)
                if not changed:
                    if rec is None:  # the store write failed last time; the build is kept
                        path = _put_record(st, job, stored)
                        con.print(f"kept    {job.label}: record restored from {_kept(job)}")
                    outcomes[job.key] = Outcome(job, stored, True, path)
                    con.print(f"cached  {job.label}: {path}")
                    continue
                con.print(f"rebuild {job.label}: {changed[0]}", markup=False, soft_wrap=True)
        if job.key not in {j.key for j in todo}:
            todo.append(job)
    shown: set[tuple[str, str]] = set()
    for job in todo:
        c = packages.changes(job.rules, None, luci_https=opts.luci_https, extra=opts.packages,
                             sdk=job.request.backend == "sdk",
                             stock=job.request.variant == "stock")  # fmt: skip
        shown_notes = c.notes
        if job.request.backend == "buildroot":  # the tree carries the patch set's own swaps
            shown_notes = buildroot.flavour(job.flavour).notes(c.notes)
        for note in shown_notes:
            if (job.flavour, note) not in shown:
                shown.add((job.flavour, note))
                con.print(f"note ({job.flavour}, {job.request.release}): {note}")
    if todo:
        backends = {j.request.backend for j in todo}
        if backends - {"buildroot"}:
            hosttools.ensure("imagebuilder")
        if "sdk" in backends:
            hosttools.ensure("sdk")
        if "buildroot" in backends:
            hosttools.ensure("buildroot")
            with signals.as_interrupt():
                for job in [j for j in todo if j.request.backend == "buildroot"]:
                    out = _build_tree_one(job, opts, st, con)
                    outcomes[job.key] = out
            todo = [j for j in todo if j.request.backend != "buildroot"]
        groups: dict[tuple[str, str], list[Job]] = {}
        for job in todo:
            groups.setdefault((job.request.target, job.request.backend), []).append(job)
        targets = sorted({t for t, _ in groups})
        if (opts.imagebuilder or opts.sdk) and len(targets) > 1:
            raise WolfError(
                f"--imagebuilder/--sdk serve one target, the devices need {', '.join(targets)}",
                hint="build one target at a time with --imagebuilder or --sdk",
            )
        with signals.as_interrupt():
            for (target, backend), group in groups.items():
                for out in _run_group(target, backend, group, opts, st, con):
                    outcomes[out.job.key] = out
    return [outcomes[j.key] for j in jobs]


def _changed_artifacts(stored: BuildRecord, job: Job | None = None) -> list[str]:
    """The record's files that are gone or no longer have the sha256 it stored: a cached
    build is served only with the very bytes it measured; nor one made with another
    ImageBuilder or SDK than the request names now (another archive under the same name)."""
    out = []
    for kind in ("imagebuilder", "sdk"):
        was, now = getattr(stored.request, kind), getattr(job.request, kind) if job else ""
        if was and now and was != now:
            out.append(f"it was made with another {kind} ({was[:23]}, now {now[:23]})")
    for f in stored.artifacts:
        p = Path(f.path)
        if not p.is_file():
            out.append(f"the record's file {p} is gone")
        elif file_sha256(p) != f.sha256:
            out.append(f"the record's file {p} was changed (sha256 differs)")
    return out


def _kept(job: Job) -> Path:
    """A copy of the record beside the build's outputs, written before the store's: when the
    store cannot be written (disk full), a re-run restores the record from here."""
    return paths.cache_dir() / "builds" / job.key / "record.json"


def _kept_record(job: Job) -> dict[str, Any] | None:
    with contextlib.suppress(WolfError):
        d = untrusted.load_json(_kept(job), "kept build record")
        if isinstance(d, dict) and d.get("key") == job.key:
            return d
    return None


def _reuse_kept(job: Job, st: store.FileStore, con: Any) -> Outcome | None:
    """The result another run stored for this request while we waited, when still intact."""
    kept = _kept_record(job)
    if kept is None:
        return None
    with contextlib.suppress(WolfError):
        stored = BuildRecord.from_dict(kept)
        if not _changed_artifacts(stored):
            con.print(f"cached  {job.label}: another run just built it", markup=False)
            return Outcome(job, stored, True, _put_record(st, job, stored))
    return None


def _put_record(st: store.FileStore, job: Job, record: BuildRecord) -> Path:
    rec = store.Record(kind=KIND, key=job.key, release=record.release, device=record.device,
                       flavour=record.flavour, data=asdict(record))  # fmt: skip
    try:
        return st.put(rec)
    except store.WriteError as e:
        raise WolfError(
            f"{job.label} was built, but its result record was not stored: {e}",
            hint=f"the outputs are kept in {_kept(job).parent}; free space and re-run: the "
            "record is then written from them without building again",
        ) from None


def _run_group(
    target: str, backend: str, jobs: list[Job], opts: Options, st: store.FileStore, con: Any
) -> list[Outcome]:
    """The jobs of one ImageBuilder: prepare it once, then build on -j working copies."""
    ib, group, info_cmds = _prepare_group(target, backend, jobs, opts, con)
    n = min(opts.jobs, len(jobs))
    slots: queue.Queue[Path] = queue.Queue()
    for d in slot_dirs(ib, n, copies_only=backend == "sdk"):
        if backend == "sdk":
            with tree_lock(d):
                sdk_mod.put_local_packages(d, group.local)
        slots.put(d)
    total = len(jobs)
    done_count = [0]
    lock = threading.Lock()

    def one(job: Job) -> Outcome:
        # another run building the same request writes the same output directory: wait for
        # it, then take its result instead of building it again
        with tree_lock(_kept(job).parent):
            out = None if opts.force else _reuse_kept(job, st, con)
            if out is None:
                slot = slots.get()
                try:
                    with tree_lock(slot), term.progress(f"build {job.label}"):
                        out = _build_one(job, ImageBuilder(slot), group, info_cmds, opts, st,
                                         con)  # fmt: skip
                finally:
                    slots.put(slot)
        with lock:
            done_count[0] += 1
            fr = out.record.fit
            con.print(
                f"[{done_count[0]}/{total}] {job.label}: {fr.verdict} "
                f"(headroom {fr.rootfs_room} B) {out.path}"
            )
        return out

    return _each(jobs, n, one)


def _prepare_group(
    target: str, backend: str, jobs: list[Job], opts: Options, con: Any
) -> tuple[ImageBuilder, _Group, list[str]]:
    """The ImageBuilder (fetched or given), its `make info`, the SDK's packages when the
    backend needs them, and the check that it builds every job's profile; with the commands
    run and the seconds each step took."""
    t0 = time.monotonic()
    ib, ib_name, ib_sha = obtain_imagebuilder(target, opts, con)
    planned = jobs[0].request.imagebuilder
    if ib_sha is not None and planned.startswith("sha256:") and planned != f"sha256:{ib_sha}":
        raise WolfError(
            f"the ImageBuilder {ib_name} is {ib_sha}, the request was planned for {planned}",
            hint="the server's sha256sums changed meanwhile: run the build again",
        )
    t1 = time.monotonic()
    work = paths.cache_dir() / "builds"
    work.mkdir(parents=True, exist_ok=True)
    info_log = work / f"make-info-{target.replace('/', '-')}.log"
    info_log.unlink(missing_ok=True)
    with proc.recording() as info_cmds:
        info = ib.info(info_log)
    t2 = time.monotonic()
    local: list[Path] = []
    sdk_id: tuple[str | None, str | None] = (None, None)
    subs: dict[str, Any] = {}
    if backend == "sdk":
        local, sdk_id, subs = _sdk_packages(target, jobs, opts, con, info_cmds, info)
    t3 = time.monotonic()
    if info.target != target:
        raise WolfError(
            f"the ImageBuilder {ib.top} is for {info.target}, the device needs {target}",
            hint="give the ImageBuilder of the device's target",
        )
    for job in jobs:
        if job.device.make_profile not in info.profiles:
            raise WolfError(
                f"device {job.device.make_profile} is not in the ImageBuilder for "
                f"{job.request.release} {target} ({ib_name})",
                hint="`make info` there lists its profiles; check the release",
            )
    seconds = {"imagebuilder": t1 - t0, "info": t2 - t1}
    if backend == "sdk":
        seconds["sdk"] = t3 - t2
    return ib, _Group(ib_name, ib_sha, info, seconds, local, sdk_id, subs), info_cmds


def _each(jobs: list[Job], n: int, one: Callable[[Job], Outcome]) -> list[Outcome]:
    """``one`` for every job on n workers, in order; the first failure cancels the rest."""
    if n == 1:
        return [one(j) for j in jobs]
    with proc.workers(n, "ib") as pool:  # Ctrl-C/TERM stop the running makes (proc.stop_all)
        futures: list[Future[Outcome]] = [pool.submit(one, j) for j in jobs]
        finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
        failed = [f for f in finished if f.exception() is not None]
        if failed:
            for f in futures:
                f.cancel()
            wait(futures)
            exc = failed[0].exception()
            assert exc is not None
            raise exc
        return [f.result() for f in futures]


def _sdk_packages(
    target: str, jobs: list[Job], opts: Options, con: Any, cmds: list[str], info: Info
) -> tuple[list[Path], tuple[str | None, str | None], dict[str, Any]]:
    """Compile, once for the group, the local-feed packages its jobs need and, for a
    patch-set flavour, the patch set's packages the images install (the base feed: a patched
    tree); kept in the cache by what made them, so a second run compiles nothing. Returns
    the package files, the SDK's name and sha256, and the base feed's source substitutions."""
    names: list[str] = []
    for job in jobs:
        c = packages.changes(job.rules, None, luci_https=opts.luci_https, sdk=True)
        names += [n for n in c.local if n not in names]
    base, origin = _base_feed(jobs, opts, con, info)
    if not names and base is None:
        return [], (None, None), {}
    req = jobs[0].request
    keep = (
        paths.cache_dir()
        / "sdk-packages"
        / (f"{target.replace('/', '-')}-{_sdk_key(req.sdk, names, base, opts)}")
    )
    subs = dl.read_substitutions(base.tree) if base else None
    summary: dict[str, Any] = subs.summary() if subs else {}
    kept = sdk_mod.kept_packages(keep)
    if kept is not None:
        files, made_by = kept
        con.print(f"sdk: compiled before, kept in {keep}: {', '.join(f.name for f in files)}",
                  markup=False)  # fmt: skip
        return files, made_by, summary
    sdk, sdk_name, sdk_sha = obtain_sdk(target, opts, con)
    if sdk_sha is not None and f"sha256:{sdk_sha}" != req.sdk:
        raise WolfError(
            f"the SDK {sdk_name} is {sdk_sha}, the request was planned for {req.sdk}",
            hint="the server's sha256sums changed meanwhile: run the build again",
        )
    log = paths.cache_dir() / "builds" / f"sdk-{target.replace('/', '-')}.log"
    chosen = ", ".join([*names, *(["the patch set's packages"] if base else [])])
    log.write_text(f"# openwrt-wolf SDK {sdk_name}: {chosen}\n")
    con.print(f"sdk: compiling {chosen} with the SDK {sdk_name}: minutes the first time (with "
              "their build dependencies), once per target architecture and patch set, then "
              f"kept in {keep.parent} (log {log})", markup=False)  # fmt: skip
    if origin:
        con.print(f"sdk: base feed: {origin}", markup=False)

    def fill(closure: list[str]) -> tuple[tuple[str, str], ...] | None:
        nonlocal summary
        if base is not None and (opts.sources or opts.sources_urls):
            summary = _fill_base_sources(sdk.top, base, closure, opts, con)
            return tuple(sorted(buildroot.Tree(base.tree).make_env().items()))
        return None

    def step(line: str) -> None:
        con.print(f"sdk: {line}", markup=False)

    with tree_lock(sdk.top), proc.recording() as sdk_cmds, term.progress("sdk compile"):
        built = sdk.build(
            tuple(names), release=req.release, flavour=jobs[0].flavour,
            feed=opts.local_feed() if names else None, log=log, jobs=opts.jobs, base=base,
            before_compile=fill, on_step=step,
        )  # fmt: skip
    cmds += sdk_cmds
    con.print(f"sdk: built {', '.join(f.name for f in built)}", markup=False)
    return sdk_mod.keep_packages(keep, built, (sdk_name, sdk_sha)), (sdk_name, sdk_sha), summary


def _sdk_key(sdk_id: str, names: list[str], base: sdk_mod.BaseFeed | None, opts: Options) -> str:
    """What the SDK's packages are made of: the SDK, the local feed's packages, and the base
    feed (tree identity, patch set, what the images install, the seed's symbols, the sources
    given for its dl/)."""
    parts: list[str] = [sdk_id, *names]
    if names:
        parts.append(sdk_mod.feed_hash(opts.local_feed()))
    if base is not None:
        parts += [base.identity, base.patch_set, *sorted(base.wanted), repr(base.config),
                  _sources_digest(opts)]  # fmt: skip
    return key_policy.digest("\0".join(parts), 16)


def _fill_base_sources(
    sdk_top: Path, base: sdk_mod.BaseFeed, closure: list[str], opts: Options, con: Any
) -> dict[str, Any]:
    """--sources/--sources-url: the base feed's dl/ filled for what the SDK compiles (its
    closure of the base feed's directories), every file classed as `sources --tree` classes
    it, anything but exact only with --allow; the substitutions in the base tree's
    wolf-substitutions.json (the record carries the summary)."""
    from .sources import listing

    dirs = []
    for rel in closure:
        link = sdk_top / "package" / rel
        if not rel.startswith(f"feeds/{sdk_mod.BASE}/") or not link.exists():
            continue
        with contextlib.suppress(ValueError):  # a directory of another feed
            dirs.append(str(link.resolve().relative_to(base.tree.resolve())))
    log = paths.cache_dir() / "logs" / "sources.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    needed = listing.needed_for(base.tree, sorted(set(dirs)))
    con.print(f"sdk: sources of the base feed: {len(needed)} files (log {log})", markup=False)
    subs = dl.fill(base.tree, needed, local=list(opts.sources), urls=list(opts.sources_urls),
                        allow=opts.allow, debian=True, log=log)  # fmt: skip
    missing = [str(f["file"]) for f in subs.files if f["class"] == "missing"]
    if missing:
        raise WolfError(
            f"no source for {', '.join(missing)} (the SDK's base feed)",
            hint="give the folder holding it with --sources, or --allow the class its note "
            "names (`./wolf sources --help`)",
        )
    return subs.summary()


def _base_feed(
    jobs: list[Job], opts: Options, con: Any, info: Info
) -> tuple[sdk_mod.BaseFeed | None, str]:
    """For a patch-set flavour: the patched tree (build/basefeed.py: the release's pinned
    tree or --tree's, never patched in place) as the SDK's base feed, and what the images
    install (the ImageBuilder's defaults with each job's changes); with what it was made of."""
    made = [j for j in jobs if j.request.variant == "patch-set"]
    if not made:
        return None, ""
    if len({j.flavour for j in made}) > 1:
        raise WolfError("the sdk backend builds one patch-set flavour at a time")
    copy = bool(opts.sources or opts.sources_urls)  # filling dl/ edits Makefiles: ours only

    def say(line: str) -> None:
        con.print(line, markup=False)

    rel = made[0].request.release
    b = basefeed.prepare(opts.tree, rel, opts.patches_dir(rel), say, copy=copy)
    wanted: set[str] = set()
    for job in made:
        defaults = info.defaults(job.device.make_profile)
        c = packages.changes(job.rules, defaults, luci_https=opts.luci_https,
                             extra=opts.packages, sdk=True)  # fmt: skip
        wanted |= (set(defaults) - set(c.remove)) | set(c.add)
    fl = buildroot.flavour(made[0].flavour)
    touched = [f for s in series.load(opts.patches_dir(rel)) for f in s.touched()]
    feed = sdk_mod.BaseFeed(
        tree=b.top,
        wanted=frozenset(wanted),
        library=f"lib{flavours.get(made[0].flavour).library}",
        touched=tuple(touched),
        config=fl.sdk_config,
        env=tuple(sorted(buildroot.Tree(b.top).make_env().items())),
        dl=b.dl,
        identity=b.identity,
        patch_set=buildroot.patch_set_hash(opts.patches_dir(rel)),
    )
    return feed, b.origin


def _apply_patch_set(
    tree: buildroot.Tree, opts: Options, con: Any, release: str | None = None
) -> list[str]:
    """The patch set on the tree (idempotent), each series' outcome shown; the record's notes."""
    out = []
    for o in tree.apply_patches(opts.patches_dir(release)):
        con.print(f"patch set: {o.action} {o.series} ({len(o.patches)} patches) {o.directory}")
        out.append(f"patch set {o.series}: {o.action}")
    return out


def _out_dirs(job: Job) -> tuple[Path, Path, Path]:
    """The job's output directory: bin.partial while building, bin when done, build.log."""
    out_dir = paths.cache_dir() / "builds" / job.key
    partial = out_dir / "bin.partial"
    log = out_dir / "build.log"
    try:
        shutil.rmtree(partial, ignore_errors=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        log.write_text(f"# openwrt-wolf build {job.label} {job.request.release} key {job.key}\n")
    except OSError as e:
        if e.errno == 28:
            raise download.disk_full(out_dir, e) from None
        raise
    return partial, out_dir / "bin", log


def _build_tree_one(job: Job, opts: Options, st: store.FileStore, con: Any) -> Outcome:
    """The buildroot backend: patch set, .config seed, make defconfig, check, make -j N,
    then the same measuring and record as an ImageBuilder build."""
    assert opts.tree is not None
    dev = job.device
    tree = buildroot.Tree(opts.tree)
    brf = buildroot.flavour(job.flavour, sdk_ib=opts.sdk_ib)
    partial, final, log = _out_dirs(job)
    phases: dict[str, float] = {}
    notes: list[str] = []

    def on_line(line: str) -> None:
        # OpenWrt's default (non-V=s) output: one " make[N] <dir>/<step>" line per step
        if re.match(r"^ make\[\d+\] \S", line):
            con.print(f"  {job.label}:{line.rstrip()}", markup=False)

    subs = dl.read_substitutions(tree.top)
    if subs and subs.not_exact():
        n = subs.counts()
        notes.append(f"sources: {n['exact']} exact, {n['same-version']} same version (other "
                     f"bytes), {n['substitute']} substitutes, {n['missing']} missing "
                     f"({subs.summary()['file']})")  # fmt: skip
    with tree_lock(tree.top), tree.lock(), proc.recording() as cmds:
        t = time.monotonic()
        notes += _apply_patch_set(tree, opts, con, job.request.release)
        phases["patch"] = time.monotonic() - t
        t = time.monotonic()
        seed, changes = tree.seed_for(dev, job.rules, brf, job.request.release, log,
                                      luci_https=opts.luci_https, extra=opts.packages)  # fmt: skip
        cfg = tree.defconfig(seed, log)
        phases["defconfig"] = time.monotonic() - t
        buildroot.verify(cfg, dev, brf, job.rules, changes)
        tree.clean_outputs(dev)
        con.print(f"  {job.label}: make -j{opts.jobs} in {tree.top} (log {log})", markup=False)
        t = time.monotonic()
        status, warnings = tree.make(
            opts.jobs, log, on_line, phases,
            on_stage=lambda s: con.print(f"  {job.label}: stage {s}", markup=False),
        )  # fmt: skip
        phases["make"] = time.monotonic() - t
        t = time.monotonic()
        partial.mkdir(parents=True)
        (partial / "seed.config").write_text(seed)
        bin_dir = tree.bin_dir(dev)
        if bin_dir.is_dir():
            for f in sorted(bin_dir.iterdir()):
                if f.is_file():
                    shutil.copyfile(f, partial / f.name)
        more = _pieces(tree.kdir(dev), dev, partial)
        phases["measure"] = time.monotonic() - t
    if status != 0:
        more.insert(0, f"make exited with status {status} after: {warnings[0]}")
    watched = [s.removeprefix("CONFIG_").split("=")[0] for s in brf.symbols()]
    watched += buildroot.target_symbols(dev)
    for old, new in (*job.rules.replace, *brf.replace):
        watched += [f"PACKAGE_{old}", f"PACKAGE_{new}"]
    watched += [f"PACKAGE_{n}" for n in (*changes.add, *changes.remove)]
    return _store(
        job, st, partial, final,
        builder=str(tree.top),
        builder_sha256=None,
        packages_value=" ".join(job.request.packages),
        manifest=buildroot.read_manifest(partial, dev),
        commands=cmds,
        phases=phases,
        make_seconds=phases["defconfig"] + phases["make"],
        log=log,
        openwrt_warnings=warnings,
        notes=list(brf.notes(changes.notes, cfg)) + notes + more,
        config={s: cfg.get(s, "unknown") for s in dict.fromkeys(watched)},
        sources=subs.summary() if subs else {},
    )  # fmt: skip


def _build_one(
    job: Job,
    ib: ImageBuilder,
    group: _Group,
    shared_cmds: list[str],
    opts: Options,
    st: store.FileStore,
    con: Any,
) -> Outcome:
    dev = job.device
    partial, final, log = _out_dirs(job)
    changes = packages.changes(
        job.rules, group.info.defaults(dev.make_profile), luci_https=opts.luci_https,
        extra=opts.packages, sdk=job.request.backend == "sdk",
        stock=job.request.variant == "stock",
    )  # fmt: skip
    value = packages.packages_value(changes)
    phases = dict(group.seconds)

    def on_line(line: str) -> None:
        if line.strip() in PHASES:
            con.print(f"  {job.label}: {line.strip()}")

    repos = _mirror_repositories(ib, job, opts)
    with proc.recording() as cmds, ib.repositories(repos) if repos else contextlib.nullcontext():
        t = time.monotonic()
        defaults = group.info.defaults(dev.make_profile)
        manifest = ib.manifest(dev.make_profile, value, log, defaults)
        phases["manifest"] = time.monotonic() - t
        if job.request.variant == "patch-set":
            check_patch_set(job.flavour, manifest, group.local, removed=changes.remove)
        ib.clean_pieces(dev.target_path)
        t = time.monotonic()
        status, warnings = ib.image(dev.make_profile, value, partial, log, files=opts.files,
                                    on_line=on_line)  # fmt: skip
        phases["image"] = time.monotonic() - t
        make_seconds = phases["manifest"] + phases["image"]
        t = time.monotonic()
        notes = _pieces(ib.kdir(dev.target_path), dev, partial)
        phases["measure"] = time.monotonic() - t
    if status != 0:
        notes.insert(0, f"make image exited with status {status} after: {warnings[0]}")
    if repos:
        notes.append(f"packages from --mirror: {', '.join(repos)}")
    for f in group.local:  # the SDK's packages beside the images, as OpenWrt's bin/ has them
        (partial / "packages").mkdir(exist_ok=True)
        shutil.copyfile(f, partial / "packages" / f.name)
    if group.local:
        index, why = _index_packages(ib, partial / "packages")
        if index is None and why:
            notes.append(why)
    return _store(
        job, st, partial, final,
        builder=group.ib_name,
        builder_sha256=group.ib_sha256,
        packages_value=value,
        manifest=manifest,
        commands=shared_cmds + cmds,
        phases=phases,
        make_seconds=make_seconds,
        log=log,
        openwrt_warnings=warnings,
        notes=list(_notes_holding(job.flavour, changes.notes, manifest)) + notes,
        sdk=group.sdk[0],
        sdk_sha256=group.sdk[1],
        sources=group.sources,
        compiled=sorted(f.name for f in group.local),
    )  # fmt: skip


def _mirror_repositories(ib: ImageBuilder, job: Job, opts: Options) -> list[str]:
    """With --mirror, the package repositories the ImageBuilder's apk reads are the mirror's
    (25.12+; opkg's repositories.conf is left as it is)."""
    rel = releases.get(job.request.release)
    if not opts.mirror or rel.package_manager != "apk":
        return []
    base = f"{download.Source(opts.mirror).base}/{rel.download}"
    return ib.mirrored_repositories(base, job.device.target_path, job.device.arch_packages)


def _index_packages(ib: ImageBuilder, pkgdir: Path) -> tuple[Path | None, str | None]:
    """packages.adb for the SDK's packages kept beside the images, written by the
    ImageBuilder's own apk as its package_index writes one (unsigned): a feed apk and
    `what-if --packages` read. 24.10's opkg ImageBuilder has no apk: no index then.
    (index, None), or (None, why) when apk could not write one: the images are made and
    measured by then, so the job keeps them and its record says what is missing."""
    apk = ib.top / "staging_dir" / "host" / "bin" / "apk"
    apks = sorted(pkgdir.glob("*.apk"))
    if not apk.is_file() or not apks:
        return None, None
    out = pkgdir / "packages.adb"
    try:
        proc.run([apk, "mkndx", "--allow-untrusted", "--output", out, *(p.name for p in apks)],
                 cwd=pkgdir, timeout=120)  # fmt: skip
    except WolfError as e:
        out.unlink(missing_ok=True)  # a half-written index is no index
        return None, (f"no packages.adb beside the SDK's packages (what-if --packages cannot "
                      f"read them as a feed): {e}")  # fmt: skip
    return out, None


def check_patch_set(
    flavour: str, manifest: dict[str, str], local: list[Path], removed: tuple[str, ...] = ()
) -> None:
    """Before the image is made: the ImageBuilder would install the patch set's packages the
    SDK built (data/flavours.toml [flavour.<f>.patch_set]; but what the request removes:
    --packages -apk-mbedtls takes apk-wolfssl out too), never OpenWrt's of the same name
    (the full libwolfssl, the compat backend) and nothing the patch set replaces."""
    spec = flavours.get(flavour).patch_set
    if spec is None:
        return
    ours = {(sdk_mod.package_name(f.name), f.name) for f in local}

    def is_ours(name: str, version: str) -> bool:
        # the manifest names packages without their ABI suffix (STRIP_ABI=1)
        for pkg, fname in ours:
            abi = pkg[len(name) :] if pkg.startswith(name) else None
            if abi is not None and re.fullmatch(r"(-?[0-9][0-9A-Za-z.]*)?", abi) and \
                    fname.removeprefix(pkg).removesuffix(".apk") == f"-{version}":  # fmt: skip
                return True
        return False

    for glob in spec.required:
        if any(fnmatch.fnmatchcase(r, glob) for r in removed):
            continue
        have = [n for n in manifest if fnmatch.fnmatchcase(n, glob)]
        if not have:
            raise WolfError(
                f"the ImageBuilder's manifest has no {glob}: the patch set's image needs it",
                hint="the SDK did not build it, or a --packages removal took it out",
            )
        for n in have:
            if not is_ours(n, manifest[n]):
                raise WolfError(
                    f"the ImageBuilder would install {n} {manifest[n]}, not the one the SDK "
                    f"built from the patch set ({', '.join(sorted(f for _, f in ours))})",
                    hint="OpenWrt's own package of that name is not the patch set's (the full "
                    "library, the compat backend); use --stock for OpenWrt's image",
                )
    bad = sorted(n for n in manifest for g in spec.forbidden if fnmatch.fnmatchcase(n, g))
    if bad:
        raise WolfError(
            f"the patch set's image would still hold {', '.join(bad)}",
            hint="a --packages addition or a profile's package pulls it in; see the manifest",
        )


def _notes_holding(
    flavour: str, notes: tuple[str, ...], manifest: dict[str, str]
) -> tuple[str, ...]:
    """The flavour's notes as they hold for what the ImageBuilder installed: one built with the
    USE_WOLFSSL patch set (the buildroot's CONFIG_IB) ships apk-wolfssl, so "apk-mbedtls
    stays" is not true of it; a stock ImageBuilder's manifest keeps the note."""
    return buildroot.flavour(flavour).notes(notes, {f"PACKAGE_{n}": "y" for n in manifest})


def _store(
    job: Job,
    st: store.FileStore,
    partial: Path,
    final: Path,
    *,
    manifest: dict[str, str],
    phases: dict[str, float],
    make_seconds: float,
    log: Path,
    notes: list[str],
    **fields: Any,
) -> Outcome:
    """Move the finished output into place, measure it there once and write the record
    (atomically, last: a killed build leaves none)."""
    shutil.rmtree(final, ignore_errors=True)
    outputs.publish(partial, final)
    t = time.monotonic()
    files, output, deleted, more = _measure(final, job.device)
    phases = {**phases, "measure": phases.get("measure", 0.0) + time.monotonic() - t}
    rel = releases.get(job.request.release)
    dev = job.device
    record = BuildRecord(
        request=job.request,
        key=job.key,
        backend=job.request.backend,
        release=rel.name,
        release_commit=rel.commit,
        device=dev.profile,
        flavour=job.flavour,
        library_versions={
            lib: v
            for n, v in sorted(manifest.items())
            if (lib := flavours.library_of_package(n)) is not None
        },
        manifest=manifest,
        phases={k: round(v, 3) for k, v in phases.items()},
        make_seconds=round(make_seconds, 3),
        log=str(log),
        artifacts=files,
        output=output,
        image_deleted=deleted,
        notes=notes + more,
        **fields,
    )
    # the cache's disk may be full too: then the store write below says what to do
    with contextlib.suppress(store.WriteError):
        paths.cache_write_text(_kept(job), json.dumps(record.to_dict(), indent=2) + "\n")
    return Outcome(job, record, False, _put_record(st, job, record))


def _pieces(kdir: Path, dev: Device, bin_dir: Path) -> list[str]:
    """Copy the kernel and rootfs pieces from KDIR (there even when OpenWrt deleted the
    image) into BIN_DIR as <profile>-kernel.bin and root.squashfs: the fit is measured from
    them, and the output directory can be measured again later (`size-report --from`)."""
    kernel = kdir / f"{dev.profile}-kernel.bin"
    roots = sorted(kdir.glob("root.squashfs*"), key=lambda p: p.stat().st_mtime)
    notes: list[str] = []
    bin_dir.mkdir(parents=True, exist_ok=True)
    if kernel.is_file():
        shutil.copyfile(kernel, bin_dir / kernel.name)
    elif dev.has_flash:  # malta's kernel is an ELF, not a flash piece
        notes.append(f"no kernel piece {kernel}")
    if roots:
        shutil.copyfile(roots[-1], bin_dir / "root.squashfs")
    else:
        notes.append(f"no root.squashfs in {kdir}")
    return notes


def _measure(out: Path, dev: Device) -> tuple[list[Artifact], Artifacts, bool, list[str]]:
    """The build's output directory, measured once (firmware/artifacts.of_build_output): every
    file with its sha256, the output (images, kernel, rootfs, the fit), whether OpenWrt
    deleted the image, and where the model and OpenWrt disagree."""
    notes: list[str] = []
    pieces = {f"{dev.profile}-kernel.bin": "kernel", "root.squashfs": "rootfs"}
    files: list[Artifact] = []
    spec = artifacts.read_profiles_json(out)  # once, for the file list and the output
    for f in artifacts.output_files(out, dev.profile, spec=spec):
        a = Artifact.of(f.path, pieces.get(f.path.name, f.type))
        if f.listed_sha256 is not None and f.listed_sha256 != a.sha256:
            notes.append(f"{f.path.name}: sha256 differs from OpenWrt's sha256sums")
        files.append(a)
    pkgdir = out / "packages"
    if pkgdir.is_dir():  # the SDK's packages and their index, as OpenWrt's bin/ has them
        for p in sorted(pkgdir.iterdir()):
            if p.is_file():
                kind = "package index" if p.suffix == ".adb" or p.name == "Packages" else "package"
                files.append(replace(Artifact.of(p, kind), name=f"packages/{p.name}"))
    output, report = artifacts.of_build_output(out, dev, spec)
    sysupgrade = next((a for a in files if a.type == "sysupgrade"), None)
    if sysupgrade is not None and report.final_size not in (None, sysupgrade.size):
        notes.append(
            f"{sysupgrade.name} is {sysupgrade.size} B, the fit model says {report.final_size} B"
        )
    # a device without flash (malta: an initramfs kernel) builds no sysupgrade image at all
    deleted = sysupgrade is None and dev.has_flash
    if deleted and report.verdict == "FITS":
        notes.append("OpenWrt built no sysupgrade image, but the fit model says it fits")
    if not deleted and report.verdict == "TOO_BIG":
        notes.append("OpenWrt kept the image, but the fit model says it is too big")
    return files, output, deleted, notes
