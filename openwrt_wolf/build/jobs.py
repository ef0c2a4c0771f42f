"""What to build: the request (Options), one Job per (device, flavour) and its Outcome.

`plan` resolves what the user typed (devices, flavours, release, backend) into jobs, each keyed
by the request hash the results store files it under."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import posixpath
import stat
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..catalogue import devices, flavours, releases
from ..catalogue.devices import Device
from ..errors import WolfError
from ..files import hashing
from ..patchset import series
from ..results.build import BACKENDS, BuildRecord, BuildRequest
from ..trust import untrusted
from . import basefeed, buildroot, download, packages
from . import sdk as sdk_mod
from .sources import dl


@dataclass(frozen=True)
class Options:
    flavour: str
    device: str
    release: str | None = None
    backend: str | None = None
    mirror: str | None = None
    imagebuilder: Path | None = None
    sdk: Path | None = None
    tree: Path | None = None
    jobs: int = 1
    force: bool = False
    store: str | None = None
    luci_https: bool = False
    packages: tuple[str, ...] = ()
    files: Path | None = None
    feed: Path | None = None  # the local feed the sdk backend builds from
    patches: Path | None = None  # the patch set the buildroot backend applies
    sdk_ib: bool = False  # buildroot: also make OpenWrt's SDK and ImageBuilder
    stock: bool = False  # a patched flavour (wolfSSL) of OpenWrt's own packages instead
    # sdk backend: what fills the base feed's dl/ where OpenWrt's mirrors are out of reach
    # (build/sources/dl.py: directories and mirror URLs by name, the classes allowed)
    sources: tuple[Path, ...] = ()
    sources_urls: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    # the request names the ImageBuilder's and SDK's archive sha256 (read from the server);
    # off for a build farm's coordinator, which has no mirror: each worker names its own (the
    # request hash leaves them out, results/build.py)
    identify: bool = True

    def local_feed(self) -> Path:
        return (self.feed or paths.PROJECT_ROOT / "feeds" / sdk_mod.FEED).expanduser()

    def patches_dir(self, release: str | None = None) -> Path:
        """--patches, else the series data/releases.toml names for the release (patches/
        for 25.12.5, patches/main for the snapshot)."""
        if self.patches:
            return self.patches.expanduser().resolve()
        rel = releases.get(release or self.release)
        return (rel.patches_dir() if rel.patches else series.PATCHES_DIR).resolve()


@dataclass(frozen=True)
class Job:
    device: Device
    flavour: str
    rules: packages.Rules
    request: BuildRequest

    @property
    def key(self) -> str:
        return self.request.key()

    @property
    def label(self) -> str:
        return f"{self.device.profile} {self.flavour}"


@dataclass(frozen=True)
class Outcome:
    job: Job
    record: BuildRecord
    cached: bool
    path: Path


def patched(flavour: str) -> bool:
    """Whether the flavour is made by the USE_WOLFSSL patch set (data/flavours.toml)."""
    return flavours.get(flavour).patched


def with_patch_set(r: packages.Rules) -> packages.Rules:
    """The flavour's rules where the patch set's packages are built: its own swaps
    (apk-mbedtls -> apk-wolfssl) join the replacements, and the notes they void go."""
    fl = buildroot.flavour(r.flavour)
    replace = tuple(sorted({*r.replace, *fl.replace}))
    return dataclasses.replace(r, replace=replace, notes=fl.notes(r.notes))


def made_by_patch_set(opts: Options, r: packages.Rules) -> bool:
    """Whether the request is the patch set's image: a flavour it makes, on a release it
    has a series for, not asked --stock."""
    return patched(r.flavour) and not opts.stock and releases.get(r.release).patches is not None


def _backend(opts: Options, r: packages.Rules) -> str:
    """--backend, else what the paths given imply, else the SDK for a flavour the patch set
    makes (it compiles the patch set's packages; --stock: OpenWrt's own with the
    ImageBuilder) or when the request needs packages of our local feed, else the
    ImageBuilder (OpenWrt's packages: Mbed TLS, OpenSSL)."""
    if opts.backend:
        backend = opts.backend
    elif opts.tree:
        backend = "buildroot"
    elif opts.sdk or r.needs_sdk(opts.luci_https) or made_by_patch_set(opts, r):
        backend = "sdk"
    else:
        backend = "imagebuilder"
    if backend not in BACKENDS:
        raise WolfError(f"unknown backend {backend!r}", hint=f"one of: {', '.join(BACKENDS)}")
    if opts.stock and (backend == "buildroot" or opts.tree):
        raise WolfError(
            "--stock builds OpenWrt's own packages: not with --tree or the buildroot backend",
            hint="drop --stock (a tree builds the patch set), or --tree for the stock image",
        )
    if backend == "buildroot" and not opts.tree:
        raise WolfError("the buildroot backend needs --tree PATH (an OpenWrt source tree)")
    if backend == "buildroot":
        given = {"--imagebuilder": opts.imagebuilder, "--sdk": opts.sdk, "--mirror": opts.mirror,
                 "--files": opts.files}  # fmt: skip
        unused = [n for n, v in given.items() if v]
        if unused:
            raise WolfError(
                f"{', '.join(unused)}: not used by the buildroot backend",
                hint="a tree builds everything itself; FILES go into <tree>/files/",
            )
    if backend not in ("buildroot", "sdk") and opts.tree:
        raise WolfError(
            f"--tree is for the buildroot and sdk backends, not {backend}",
            hint="with --backend sdk the tree is the SDK's base feed (the patch set applied)",
        )
    return backend


def plan(opts: Options) -> list[Job]:
    rel = releases.get(opts.release)
    if opts.jobs < 1:
        raise WolfError(f"-j {opts.jobs}: need at least 1 job")
    devs = devices.resolve_many(opts.device, rel.name)
    if not devs:
        raise WolfError("no device given", hint="--device NAME[,NAME...]")
    for fl in flavours.resolve_many(opts.flavour):  # options that do not fit come first:
        _backend(opts, packages.rules(fl.name, rel.name))  # the overlay is not read for them
    files = overlay_digest(opts.files)  # before any work, once
    for kind, local in (("imagebuilder", opts.imagebuilder), ("sdk", opts.sdk)):
        if local is not None and not Path(local).expanduser().is_dir():  # before an install
            raise WolfError(f"--{kind} {local} is not a directory")
    jobs = []
    tree_facts: list[tuple[str, str]] = []  # the tree's identity and substitutions, read once
    ids: dict[tuple[str, str], str] = {}  # (kind, target) -> the ImageBuilder's/SDK's identity

    def ident(kind: str, target: str) -> str:
        if not opts.identify:
            return ""
        if (kind, target) not in ids:
            local = opts.imagebuilder if kind == "imagebuilder" else opts.sdk
            ids[kind, target] = download.identity(kind, local, rel.name, target, opts.mirror)
        return ids[kind, target]

    def tree_of() -> tuple[str, str]:
        if not tree_facts:
            assert opts.tree is not None
            t = buildroot.Tree(opts.tree)
            subs = dl.read_substitutions(t.top)
            tree_facts.append((t.identity(), subs.digest() if subs else ""))
        return tree_facts[0]

    for dev in devs:
        # malta has no flash: the buildroot makes its initramfs kernel, an ImageBuilder its
        # rootfs images and plain kernel (the kernel it ships cannot take an initramfs)
        if not (dev.has_flash or dev.partitioned or dev.boots_in_vm):
            raise WolfError(
                f"{dev.profile} has no flash image to build ({dev.recipe})",
                hint="pick a flash device, see `./wolf devices`",
            )
        for fl in flavours.resolve_many(opts.flavour):
            r = packages.rules(fl.name, rel.name)
            backend = _backend(opts, r)
            if backend == "buildroot":
                tree_id, subs_digest = tree_of()
                brf = buildroot.flavour(fl.name, sdk_ib=opts.sdk_ib)
                seed = buildroot.seed_changes(r, brf, luci_https=opts.luci_https,
                                              extra=opts.packages)  # fmt: skip
                req = BuildRequest(
                    release=rel.name,
                    target=dev.target_path,
                    profile=dev.profile,
                    flavour=fl.name,
                    packages=tuple(
                        sorted(
                            seed.spec()
                            + brf.symbols()
                            + [f"CONFIG_{k}={v}" for k, v in dev.buildroot_config]
                        )
                    ),
                    patch_set=buildroot.patch_set_hash(opts.patches_dir(rel.name)),
                    backend=backend,
                    tree=tree_id,
                    sources=subs_digest,
                    variant="patch-set" if patched(fl.name) else "stock",
                )
                jobs.append(Job(dev, fl.name, r, req))
                continue
            # the SDK compiles the patch set's packages from a patched tree (the pinned one,
            # or --tree's): its swaps hold (apk-wolfssl)
            base = backend == "sdk" and made_by_patch_set(opts, r)
            tree_id = basefeed.identity(opts.tree, rel.name) if base else ""
            subs_digest = tree_of()[1] if base and opts.tree else ""
            if base:
                r = with_patch_set(r)
            spec = packages.changes(r, None, luci_https=opts.luci_https, extra=opts.packages,
                                    sdk=backend == "sdk", stock=not base)  # fmt: skip
            parts = [sdk_mod.feed_hash(opts.local_feed())] if spec.local else []
            parts += [buildroot.patch_set_hash(opts.patches_dir(rel.name))] if base else []
            # the SDK first: out of reach, its line says what the patch set's image needs
            sdk_id = ident("sdk", dev.target_path) if backend == "sdk" else ""
            req = BuildRequest(
                release=rel.name,
                target=dev.target_path,
                profile=dev.profile,
                flavour=fl.name,
                packages=tuple(spec.spec()),
                patch_set="+".join(parts) or "none",
                backend=backend,
                tree=tree_id,
                sources=subs_digest or _sources_digest(opts) if base else "",
                imagebuilder=ident("imagebuilder", dev.target_path),
                sdk=sdk_id,
                variant="patch-set" if base else "stock",
                files=files,
            )
            jobs.append(Job(dev, fl.name, r, req))
    if (opts.sources or opts.sources_urls) and not any(
        j.request.variant == "patch-set" and j.request.backend == "sdk" for j in jobs
    ):
        raise WolfError(
            "--sources/--sources-url fill the SDK's base feed, and no build here has one",
            hint="a buildroot tree takes `./wolf sources --tree`; an ImageBuilder needs none",
        )  # fmt: skip
    return jobs


def overlay_digest(files: Path | None) -> str:
    """The --files overlay's part of the request; it must be a directory: the ImageBuilder
    copies FILES only `if [ -d ]` and built without it, silently, when it was a file, a FIFO
    or a missing path."""
    if files is None:
        return ""
    try:
        st = os.stat(files)
    except OSError as e:
        raise WolfError(f"--files {files}: {untrusted.os_reason(e)}",
                        hint="a directory of files to put over the rootfs") from None  # fmt: skip
    if not stat.S_ISDIR(st.st_mode):
        raise WolfError(f"--files {files} is {untrusted.kind_of(st.st_mode)}, not a directory",
                        hint="a directory of files to put over the rootfs")  # fmt: skip
    return hashing.dir_sha256(files, "--files", _overlay_entry)


def _overlay_entry(rel: str, st: os.stat_result, target: str | None) -> None:
    """What an overlay may hold. OpenWrt's prepare_rootfs copies it over the rootfs on this
    machine and then writes into the rootfs (rc.common enable makes etc/rc.d links,
    post-install scripts append to etc/group, ...): through an overlay link to a directory
    out of the tree (etc/rc.d -> /some/dir got S19dropbear), into a device there, or into a
    FIFO that no one reads. A link that stays inside is the same on the router."""
    where = f"--files: {rel!r}"
    if target is not None:
        lands = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
        if posixpath.isabs(target) or lands == ".." or lands.startswith("../"):
            raise WolfError(
                f"{where} links to {target!r}, out of the overlay: the ImageBuilder would "
                "follow it on this machine",
                hint="make it a link inside, relative (the router resolves it the same): "
                "e.g. etc/localtime -> ../usr/share/zoneinfo/UTC",
            )
    elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise WolfError(
            f"{where} is {untrusted.kind_of(st.st_mode)}: the ImageBuilder writes into some "
            "rootfs files on this machine (a device would be written, a FIFO would stop it)",
            hint="only files, folders and links inside the overlay; the router makes /dev",
        )


def _sources_digest(opts: Options) -> str:
    """What fills the base feed's dl/ when it is not the SDK's own download: other sources
    (a substitute's version) make another build."""
    if not (opts.sources or opts.sources_urls):
        return ""
    blob = "\0".join([*map(str, opts.sources), *opts.sources_urls, *sorted(opts.allow)])
    return "given:" + hashlib.sha256(blob.encode()).hexdigest()[:16]
