"""Would flavour F fit? Predicted from a built image of another flavour, without a rebuild.

The root filesystem is unpacked (OpenWrt's unsquashfs4), the TLS stack's packages are swapped
for F's as the build would swap them (data/flavours.toml: the same replace and luci_https rules
build/packages.py gives the ImageBuilder), the dependencies follow (a library only the removed
packages needed goes, F's come in), and the tree is packed again with OpenWrt's mksquashfs4 and
include/image.mk's options at the image's own block size and timestamp. The fit model
(fit.evaluate) then takes the image's kernel and the new rootfs: sysupgrade and factory image.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths, proc
from ..build import packages as flavour_rules
from ..catalogue import devices, flavours, releases
from ..catalogue.devices import Device
from ..errors import WolfError
from ..files import archive, locks, outputs
from ..files.hashing import file_sha256
from ..firmware import artifacts, fit
from ..firmware.imageformats import bounded, squashfs_sb
from ..host import openwrt_tools
from ..results.artifacts import Artifacts
from ..results.whatif import WhatIf
from ..trust import untrusted
from . import pkgsource

# include/image.mk (25.12.5): Image/mkfs/squashfs-common and SQUASHFSOPT with CONFIG_SQUASHFS_XZ,
# no BCJ filter on MIPS (LINUX_KARCH mips), no SELinux, 4 block and 4 small readers
# (config/Config-images.in defaults). "-b" is the image's own block size.
MKSQUASHFS_OPTIONS = (
    "-nopad", "-noappend", "-root-owned",
    "-comp", "xz", "-Xpreset", "9", "-Xe", "-Xlc", "0", "-Xlp", "2", "-Xpb", "2",
)  # fmt: skip
MKSQUASHFS_PSEUDO = ("-p", "/dev d 755 0 0", "-p", "/dev/console c 600 0 0 5 1")
MKSQUASHFS_TAIL = ("-no-xattrs", "-block-readers", "4", "-small-readers", "4")
_TIMEOUT = 600.0
MAX_RELEASE_FILE = 1 << 20  # /etc/openwrt_release is a few hundred bytes


@dataclass(frozen=True)
class Swap:
    removed: tuple[str, ...]  # packages that leave the image
    added: tuple[str, ...]  # packages that come in
    asked_out: tuple[str, ...] = field(default=(), compare=False)  # of removed: no longer asked for
    asked_in: tuple[str, ...] = field(default=(), compare=False)  # what it asks for instead


# --- which packages change -------------------------------------------------------------


def _slots(release: str) -> list[str]:
    """The TLS-dependent package slots, named as in the default (Mbed TLS) image."""
    out: set[str] = set()
    for name in flavours.names():
        out |= {old for old, _ in flavour_rules.rules(name, release).replace}
    return sorted(out)


def _member(rules: flavour_rules.Rules, slot: str) -> str:
    return dict(rules.replace).get(slot, slot)


def detect_flavour(installed: set[str], release: str) -> str | None:
    """The flavour whose own packages (those no other flavour installs) the image has."""
    members = {
        n: {_member(flavour_rules.rules(n, release), s) for s in _slots(release)}
        for n in flavours.names()
    }
    found = []
    for n, mine in members.items():
        others = set().union(*(m for o, m in members.items() if o != n))
        if (mine - others) & installed:
            found.append(n)
    return found[0] if len(found) == 1 else None


def plan(installed: set[str], index: pkgsource.Index, release: str, frm: str, to: str) -> Swap:
    """The packages a build of flavour ``to`` would have instead of this ``frm`` image's."""
    ra, rf = flavour_rules.rules(frm, release), flavour_rules.rules(to, release)
    swap = {_member(ra, s): _member(rf, s) for s in _slots(release)}
    swap = {a: f for a, f in swap.items() if a in installed and a != f}
    # a variant the rules keep (apk-mbedtls: OpenWrt has no apk-wolfssl) is swapped too when
    # the packages have the flavour's variant of it: a build with the USE_WOLFSSL patch set
    lib_a, lib_f = flavours.get(frm).library, flavours.get(to).library
    stock = flavours.openwrt_default().library
    for p in sorted(installed - set(swap)):
        other = p.removesuffix(lib_a) + lib_f
        if p.endswith(f"-{lib_a}") and other not in installed and index.get(other) is not None:
            swap[p] = other
    for a, f in sorted(swap.items()):  # apk-openssl -> apk-mbedtls (stock) -> apk-wolfssl
        own = f.removesuffix(stock) + lib_f
        if f.endswith(f"-{stock}") and lib_f != stock and index.get(own) is not None:
            swap[a] = own
    # a package group the image holds whole (@https-server: uhttpd with the flavour's
    # certificate tool) becomes the flavour's group: openssl-util, not the px5g slot's choice
    ga, gf = dict(ra.groups), dict(rf.groups)
    group_gone: set[str] = set()
    group_new: set[str] = set()
    for g, members in ga.items():
        theirs = gf.get(g)
        if theirs is not None and set(members) <= installed and set(members) != set(theirs):
            group_gone |= set(members) - set(theirs)
            group_new |= set(theirs) - set(members)
    swap = {a: f for a, f in swap.items() if a not in group_gone}
    gone, new = set(swap) | group_gone, set(swap.values()) | group_new
    if ra.luci_https and set(ra.luci_https) <= installed and ra.luci_https != rf.luci_https:
        gone |= set(ra.luci_https) - set(rf.luci_https)  # LuCI's HTTPS collection follows
        new |= set(rf.luci_https)
    absent = sorted(n for n in new if index.get(n) is None)
    if absent:
        raise WolfError(
            f"the {to} flavour installs {', '.join(absent)}, which {index.where()} does not hold",
            hint="give --packages the directories that hold the flavour's packages",
        )
    # what the installed packages pull in: not asked for, so it goes when nothing needs it
    needed = {_name(index, d) for p in installed if (pk := index.get(p)) for d in pk.depends}
    roots = {p for p in installed if p not in needed} - gone | new
    roots |= {p for p in installed if p not in gone and index.get(p) is None}
    after = _closure(roots, index)
    _check_conflicts(after, index, to)
    return Swap(tuple(sorted(installed - after)), tuple(sorted(after - installed)),
                tuple(sorted(gone & installed)), tuple(sorted(new)))  # fmt: skip


def _name(index: pkgsource.Index, want: str) -> str:
    """The package that satisfies want, by its ABI-less name (the names flavours use)."""
    pkg = index.get(want)
    return pkg.base if pkg else want


def _closure(roots: set[str], index: pkgsource.Index) -> set[str]:
    out: set[str] = set()
    todo = sorted(roots)
    while todo:
        want = todo.pop()
        pkg = index.get(want)
        if pkg is None:
            if want not in roots:
                raise WolfError(
                    f"package {want} is not in {index.where()}",
                    hint="give --packages the directory that holds the flavour's packages",
                )
            out.add(want)
            continue
        if pkg.base in out:
            continue
        out.add(pkg.base)
        todo += pkg.depends
    return out


def _check_conflicts(names: set[str], index: pkgsource.Index, to: str) -> None:
    for n in sorted(names):
        pkg = index.get(n)
        for c in pkg.conflicts if pkg else ():
            other = index.get(c)
            if other is not None and other.base in names and other.base != n:
                users = sorted(u for u in names if (q := index.get(u)) and c in q.depends)
                by = f" (needed by {', '.join(users)})" if users else ""
                raise WolfError(
                    f"the {to} image would hold {n} and {other.base}{by}, which conflict",
                    hint="an installed package needs the old flavour's one; build it instead",
                )


# --- installed packages ----------------------------------------------------------------


def _regular(root: Path, name: str) -> os.stat_result | None:
    """The stat of the regular file ``name`` of the tree at root (links followed inside it)."""
    try:
        st = os.lstat(archive.locate(root, name))
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _installed_by_content(root: Path, index: pkgsource.Index) -> set[str]:
    """Packages all of whose files are in the tree with the same bytes (sha256)."""
    out = set()
    for p in index.packages.values():
        files = p.files()
        if files and all(
            (st := _regular(root, f.path)) is not None
            and st.st_size == f.size
            and file_sha256(archive.locate(root, f.path)) == f.sha256
            for f in files
        ):
            out.add(p.name)
    return out


# --- the rootfs ------------------------------------------------------------------------


def mksquashfs_argv(tool: Path, root: Path, out: Path, block: int) -> list[str | Path]:
    return [tool, root, out, *MKSQUASHFS_OPTIONS, "-b", f"{block // 1024}k",
            *MKSQUASHFS_PSEUDO, *MKSQUASHFS_TAIL, "-quiet", "-no-progress"]  # fmt: skip


def unpack(tools: openwrt_tools.OpenWrtTools, image: Path, offset: int, dest: Path) -> None:
    """The squashfs at ``offset`` of image into dest; /dev/console (a pseudo file OpenWrt's
    mksquashfs adds) left out, and /dev too when nothing else is in it: the repack adds both."""
    proc.run(
        [tools.unsquashfs4, "-d", dest, "-no-xattrs", "-quiet", "-no-progress",
         "-o", str(offset), "-excludes", image, "dev/console"],
        timeout=_TIMEOUT,
    )  # fmt: skip
    dev = dest / "dev"
    if dev.is_dir() and not dev.is_symlink() and not any(dev.iterdir()):
        dev.rmdir()


def apply(root: Path, swap: Swap, index: pkgsource.Index, kept: set[str]) -> list[str]:
    """Remove the removed packages' files and install the added ones'; returns notes. Every
    path is resolved inside root (archive.locate): the image's links and the packages' names
    reach nothing outside it."""
    notes: list[str] = []
    stay = [p for k in kept if (p := index.get(k))]
    keep = {f.path for p in stay for f in p.files()} | {link for p in stay for link in p.links()}
    dirs: set[Path] = set()
    for name in swap.removed:
        pkg = index.get(name)
        if pkg is None:
            raise WolfError(
                f"package {name} leaves the image but is not in {index.where()}",
                hint="give --packages the packages the image was built from",
            )
        for entry in [f.path for f in pkg.files()] + pkg.links():
            if entry in keep:
                continue
            path = archive.locate(root, entry)
            if path.is_file() or path.is_symlink():
                path.unlink()  # the entry itself: a link is removed, not followed
                dirs.add(path.parent)
            else:
                notes.append(f"{name}: {entry} was not in the image")
    kept_dirs = {d for p in stay for d in p.dirs()}
    for name in swap.removed:  # the directories a removed package owned, when left empty
        pkg = index.get(name)
        assert pkg is not None
        dirs |= {archive.locate(root, d) for d in pkg.dirs() if d not in kept_dirs}
        _disable(root, pkg)
    for d in sorted(dirs, key=lambda p: -len(p.parts)):  # parents emptied by the removal
        while d != root and d.is_relative_to(root) and _empty_dir(d):
            d.rmdir()
            d = d.parent
    for name in swap.added:
        pkg = index.get(name)
        assert pkg is not None  # plan() resolved it
        pkgsource.extract(pkg, root)
        _enable(root, pkg)
    return notes


# base-files' default_postinst runs `/etc/rc.common <script> enable` for each init script a
# package installs (the ImageBuilder's prepare_rootfs, IPKG_INSTROOT set); default_prerm runs
# `disable`. A package's scripts are not run here (untrusted): what enable does is done instead.
_RC_VAR = re.compile(r"^(START|STOP)=['\"]?(\d+)['\"]?\s*$", re.M)
MAX_INIT_SCRIPT = 1 << 20


def _init_scripts(pkg: pkgsource.Package) -> list[str]:
    return [f.path.rsplit("/", 1)[1] for f in pkg.files() if f.path.startswith("/etc/init.d/")]


def _disable(root: Path, pkg: pkgsource.Package) -> None:
    """rc.common's disable: the /etc/rc.d/S??<name> and K??<name> links of its scripts."""
    rcd = archive.locate(root, "etc/rc.d")
    if not rcd.is_dir() or rcd.is_symlink():
        return
    for name in _init_scripts(pkg):
        for link in rcd.iterdir():
            if re.fullmatch(rf"[SK]\d\d{re.escape(name)}", link.name) and link.is_symlink():
                link.unlink()


def _enable(root: Path, pkg: pkgsource.Package) -> None:
    """rc.common's enable: S<START><name> and K<STOP><name> links to ../init.d/<name>, with
    START and STOP as the script sets them (a plain `START=NN` line)."""
    for name in _init_scripts(pkg):
        script = f"etc/init.d/{name}"
        if _regular(root, script) is None:
            continue
        text = untrusted.read_text(archive.locate(root, script), script, MAX_INIT_SCRIPT)
        if "#!/bin/sh /etc/rc.common" not in text:  # prepare_rootfs enables only these
            continue
        values = dict(_RC_VAR.findall(text))
        rcd = archive.locate(root, "etc/rc.d")
        for var, prefix in (("START", "S"), ("STOP", "K")):
            if var in values:
                rcd.mkdir(parents=True, exist_ok=True)
                link = archive.locate(root, f"etc/rc.d/{prefix}{values[var]}{name}")
                if link.is_symlink() or link.is_file():
                    link.unlink()
                elif link.exists():  # a directory of that name: ln -sf would put it inside
                    continue
                link.symlink_to(f"../init.d/{name}")


def _empty_dir(d: Path) -> bool:
    return d.is_dir() and not d.is_symlink() and not any(d.iterdir())


# what a build's apk leaves in the rootfs besides the packages' own files
APK_DATABASE = ("lib/apk/db/installed", "lib/apk/db/scripts.tar.gz", "lib/apk/db/triggers",
                "etc/apk/world")  # fmt: skip
MAX_APK_FILE = 1 << 20  # /etc/apk/world and /etc/apk/arch: a few hundred bytes


def _image_text(root: Path, name: str) -> str:
    """A small text file of the unpacked image, found inside root (archive.locate) and read
    only when it is a regular file there (a FIFO or a link out reads as absent)."""
    if _regular(root, name) is None:
        return ""
    return untrusted.read_text(archive.locate(root, name), name, MAX_APK_FILE)


def _apk_database(
    root: Path, swap: Swap, index: pkgsource.Index, installed: set[str], work: Path, epoch: int
) -> None:
    """Replace the rootfs's apk database with the one a build of the new flavour writes:
    /etc/apk/world loses what the build no longer asks for and gains what it asks for instead
    (with the ABI suffix, as the ImageBuilder's FormatPackages names them), and apk itself
    writes the database for that world (pkgformats.apk_database). Read and written inside
    root, as every path of the swap."""
    from . import pkgformats

    world = _image_text(root, "etc/apk/world").split()
    entry = {index.base(re.split(r"[<>=~]", w, maxsplit=1)[0]): w for w in world}
    # the buildroot's rootfs asks for every package its .config selects, dependencies too
    # (its world names all installed); the ImageBuilder's asks for the profile's list only
    planned = installed - set(swap.removed) | set(swap.added)
    whole = installed <= set(entry)
    gone = set(swap.asked_out) | (set(swap.removed) if whole else set())
    asked = list(swap.asked_in) + (sorted(swap.added) if whole else [])
    new = [w for n, w in entry.items() if n not in gone]
    new += [pkg.name for n in dict.fromkeys(asked) if n not in entry and (pkg := index.get(n))]
    arch = (_image_text(root, "etc/apk/arch").split() or [""])[0]
    apk = next(p.apk for p in index.packages.values() if p.apk)
    scratch = pkgformats.apk_database(apk, index.source, arch, sorted(new), work / "apk-db", epoch,
                                      index.more)  # fmt: skip
    got = {index.base(n) for n in pkgformats.apk_installed(scratch)}
    if got != planned:  # apk resolved the new world to other packages than the swap
        raise WolfError(
            f"apk installs other packages for the {index.where()} world than the swap planned: "
            f"+{sorted(got - planned)} -{sorted(planned - got)}",
            hint="give --packages the packages the image was built from",
        )
    for rel in APK_DATABASE:
        if (scratch / rel).is_file():
            archive.copy_in(root, rel, scratch / rel, what="the apk database")
    shutil.rmtree(scratch)


def touch_all(root: Path, when: int) -> None:
    """include/rootfs.mk's prepare_rootfs: `find $(1)/ -mindepth 1 -execdir touch -hcd
    "@$(SOURCE_DATE_EPOCH)"` (links themselves, not what they point to): the files the swap
    installed carry their packages' times until then."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (when, when), follow_symlinks=False)


def repack(tools: openwrt_tools.OpenWrtTools, root: Path, out: Path, block: int, when: int) -> int:
    """OpenWrt's mksquashfs4 over root; SOURCE_DATE_EPOCH = the image's own mkfs time, as
    rules.mk exports it for the build (every inode and the superblock take it)."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(when)}
    proc.run(mksquashfs_argv(tools.mksquashfs4, root, out, block), timeout=_TIMEOUT, env=env)
    return out.stat().st_size  # -nopad: the file is bytes_used long


# --- the whole prediction --------------------------------------------------------------


# the rootfs as `invoke build` keeps it beside the images (build/driver.py _measure)
ROOTFS_COPY = "root.squashfs"


@dataclass(frozen=True)
class _Input:
    image: Path  # the sysupgrade image holding the rootfs (or the rootfs: offset 0)
    art: Artifacts
    device: Device
    offset: int = 0  # of the rootfs in image


def _input(image: str | None, from_dir: str | None, device: str | None) -> _Input:
    if bool(image) == bool(from_dir):
        raise WolfError("what-if needs --image IMG or --from DIR (one of them)")
    if image:
        path = Path(image)
        bounded.read_file(path, "image")  # one line for a FIFO, /dev/zero, a directory
        arts = [artifacts.measure_image(path, device)]
    else:
        assert from_dir
        path = Path(from_dir)
        if not path.is_dir():
            raise WolfError(
                f"output directory not found: {path}", hint="give bin/targets/<target>/<subtarget>/"
            )
        arts = artifacts.measure_dir(path, [device] if device else None)
    if len(arts) != 1:
        raise WolfError(
            f"{path} has images of {len(arts)} profiles: {', '.join(a.profile for a in arts)}",
            hint="name one with --device",
        )
    a = arts[0]
    sys_image = path if image else path / (a.sysupgrade.name if a.sysupgrade else "")
    dev, note = artifacts.find_device(a.profile, a.release)
    flashless = dev is not None and not dev.has_flash
    if from_dir and flashless and (path / ROOTFS_COPY).is_file():
        # malta: no sysupgrade image; the build's output directory keeps the rootfs itself
        assert dev is not None
        return _Input(path / ROOTFS_COPY, a, dev)
    if a.split is None or not sys_image.is_file():
        raise WolfError(
            f"{path}: no sysupgrade image of {a.profile} to take the rootfs and kernel from",
            hint="OpenWrt deleted it (too big?); give the image of a flavour that was kept",
        )
    if dev is None:
        raise WolfError(f"{note}", hint="give --device with a catalogued profile")
    return _Input(sys_image, a, dev, int(a.split["rootfs_offset"]))


def _release(inp: _Input, root: Path, release: str | None) -> str:
    if release:
        return releases.get(release).name
    if inp.art.release:
        return releases.get(inp.art.release).name
    rel = archive.locate(root, "etc/openwrt_release")
    if _regular(root, "etc/openwrt_release") is not None:
        text = untrusted.read_text(rel, "openwrt_release", MAX_RELEASE_FILE)
        value = releases.parse_openwrt_release(text).get("DISTRIB_RELEASE")
        if value:
            return releases.get(value).name
    raise WolfError(
        f"{inp.image}: cannot tell its OpenWrt release", hint="give --release (e.g. 25.12.5)"
    )


def _installed(inp: _Input, root: Path, index: pkgsource.Index) -> tuple[set[str], str]:
    """The installed packages by their ABI-less names (a .manifest and the rootfs's package
    lists name them with the ABI suffix: libmbedtls21)."""
    if inp.art.manifest:
        names, where = {p.name for p in inp.art.manifest}, "the image's .manifest"
    elif (rootfs := inp.art.rootfs) and rootfs.package_source:
        names, where = {p.name for p in rootfs.packages}, f"the rootfs's {rootfs.package_source}"
    else:
        names, where = _installed_by_content(root, index), f"files matched against {index.where()}"
    return {index.base(n) for n in names}, where


def image_tools(
    packages: Sequence[Path], step: Callable[[str], None]
) -> openwrt_tools.OpenWrtTools:
    """mksquashfs4 and unsquashfs4 of the ImageBuilder whose packages/ is among these (its
    staging_dir/host/bin, the tools its own images were made with); OpenWrt's tools built from
    ../shared only when none is."""
    from . import pkgformats

    mk, un = (pkgformats.ib_tool(packages, n) for n in ("mksquashfs4", "unsquashfs4"))
    if mk and un and mk.parent == un.parent:
        return openwrt_tools.OpenWrtTools(mk.parent, ("the ImageBuilder's staging_dir/host/bin",))
    return openwrt_tools.ensure(progress=step)


def predict(
    *,
    flavour: str,
    image: str | None = None,
    from_dir: str | None = None,
    device: str | None = None,
    packages: str | None = None,
    release: str | None = None,
    output: str | None = None,
    step: Callable[[str], None] = lambda _s: None,
) -> WhatIf:
    """``output``: keep the predicted root.squashfs there."""
    to = flavours.get(flavour).name
    # what the run reads is not what --output may overwrite (a file of --from DIR included)
    inputs = [p for p in (image, from_dir, *(packages or "").split(",")) if p]
    if output:
        outputs.check(output, inputs=inputs)
    if device:
        device = devices.resolve(device, release).profile
    if not packages:
        raise WolfError(
            "what-if needs --packages DIR: the packages the flavours are built from",
            hint="the ImageBuilder's packages/ directory, with index.json",
        )
    dirs = [Path(d) for d in packages.split(",") if d]
    index = pkgsource.load_many(dirs)
    inp = _input(image, from_dir, device)
    offset = inp.offset
    sb = squashfs_sb.parse_header(
        _head(inp.image, offset),
        available=inp.image.stat().st_size - offset,
        where=f"rootfs in {inp.image}",
        offset=offset,
    )
    tools = image_tools(dirs, step)
    with locks.work_dir(paths.cache_dir() / "what-if", "run-") as work:
        root = work / "root"
        step("unpacking the rootfs with unsquashfs4")
        unpack(tools, inp.image, offset, root)
        rel = _release(inp, root, release)
        installed, installed_from = _installed(inp, root, index)
        frm = detect_flavour(installed, rel)
        if frm is None:
            raise WolfError(
                f"{inp.image}: cannot tell its TLS flavour from its packages ({installed_from})",
                hint="is it an image of one of the flavours in data/flavours.toml?",
            )
        swap = plan(installed, index, rel, frm, to)
        step(f"swapping {frm} for {to}: -{len(swap.removed)} +{len(swap.added)} packages")
        notes = apply(root, swap, index, installed - set(swap.removed))
        if index.format() == "adb" and (root / "lib/apk/db/installed").is_file():
            _apk_database(root, swap, index, installed, work, sb.mkfs_time)
        elif (root / "lib/apk/packages").is_dir() or (root / "usr/lib/opkg/info").is_dir():
            notes.append(
                "the package database inside the rootfs is left as it was (a few hundred bytes)"
            )
        touch_all(root, sb.mkfs_time)
        step("packing with mksquashfs4 (OpenWrt's options)")
        size = repack(tools, root, work / "root.squashfs", sb.block_size, sb.mkfs_time)
        digest = file_sha256(work / "root.squashfs")
        if output:
            outputs.copy_file(work / "root.squashfs", output, inputs=inputs)
    kernel = inp.art.kernel_size
    meta = inp.art.metadata_size
    before = fit.evaluate(inp.device, kernel_size=kernel, rootfs_size=sb.bytes_used,
                          metadata_size=meta)  # fmt: skip
    after = fit.evaluate(inp.device, kernel_size=kernel, rootfs_size=size, metadata_size=meta)
    if frm == to:
        notes.append(f"the image is already {to}: the repack measures the tool, not a swap")
    return WhatIf(
        profile=inp.device.profile,
        release=rel,
        source=str(inp.image),
        flavour_from=frm,
        flavour_to=to,
        installed_from=installed_from,
        package_source=index.where(),
        removed=list(swap.removed),
        added=list(swap.added),
        squashfs_block=sb.block_size,
        rootfs_from=sb.bytes_used,
        rootfs_to=size,
        fit_from=before.to_dict(),
        fit_to=after.to_dict(),
        notes=notes,
        rootfs_to_sha256=digest,
    )


def _head(image: Path, offset: int) -> bytes:
    with image.open("rb") as fh:
        fh.seek(offset)
        return fh.read(squashfs_sb.SIZE)
