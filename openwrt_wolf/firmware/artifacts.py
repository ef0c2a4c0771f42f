"""Measuring what an OpenWrt build produced: an output directory
(bin/targets/<target>/<subtarget>/), or one sysupgrade image file alone.

One ``Artifacts`` per device profile: image sizes (from profiles.json when it has them,
else from the files), the kernel and rootfs as the image recipe appends them (from the
kernel/rootfs pieces when they are there, else split out of the sysupgrade image), the rootfs
measured (rootfs.RootfsInfo: TLS libraries and their xz sizes, per-package bytes) and the fit
verdict (fit.evaluate). Build records store ``asdict(Artifacts)`` under data["artifacts"].
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..catalogue import devices
from ..catalogue.devices import Device
from ..errors import WolfError
from ..results.artifacts import Artifacts, ImageFile, PackageFile
from ..results.build import BuildRecord
from ..results.fit_report import FitReport
from ..trust import untrusted
from . import fit, imageformats
from .rootfs import measure_rootfs

# --- finding a device for the fit model -----------------------------------------------


def find_device(profile: str, release: str | None) -> tuple[Device | None, str | None]:
    """The catalogue entry for a profile: in its release, else in any release (with a note)."""
    for rel in (release, None):
        try:
            return devices.resolve(profile, rel), None
        except WolfError:
            continue
    others = [d for d in devices.catalogue() if d.profile == profile]
    if others:
        d = others[0]
        return d, f"no {profile} entry for release {release}; fit uses the {d.release} entry"
    return None, f"{profile} is not in the device catalogue: no fit verdict"


def _evaluate(a: Artifacts, device: Device) -> FitReport:
    return fit.evaluate(
        device,
        kernel_size=a.kernel_size,
        rootfs_size=a.rootfs.size if a.rootfs else None,
        metadata_size=a.metadata_size,
    )


# --- one image file --------------------------------------------------------------------


def measure_image(image: Path, profile: str | None = None) -> Artifacts:
    """A sysupgrade image alone: split it into kernel and rootfs and measure both."""
    image = Path(image)
    if not image.is_file():
        raise WolfError(f"image not found: {image}", hint="give a sysupgrade .bin file")
    parts = imageformats.split(image)
    rootfs = measure_rootfs(image, parts.rootfs_offset)
    name = profile or _profile_from_name(image.name) or image.stem
    device, note = find_device(name, None)
    notes = [note] if note else []
    want = fit.RECIPE_FORMATS.get(device.recipe) if device else None
    if device and want and want != parts.format:
        notes.append(f"{image.name} is a {parts.format} image; {device.profile} makes {want}")
    a = Artifacts(
        profile=device.profile if device else name,
        source=str(image),
        layout="image",
        target=device.target_path if device else None,
        images=[ImageFile(image.name, "sysupgrade", image.stat().st_size)],
        kernel_size=parts.kernel_size,
        kernel_source=f"{image.name} (split: {parts.format})",
        metadata_size=parts.metadata_size,
        split=asdict(parts),
        rootfs=rootfs,
        flavour=rootfs.flavour_guess(),
        notes=notes,
    )
    return _with_fit(a, device)


def measure_rootfs_only(path: Path, profile: str | None = None) -> Artifacts:
    """A bare squashfs (or malta's .img.gz): the rootfs rows only; no kernel, so no fit."""
    rootfs = measure_rootfs(path)
    return Artifacts(
        profile=profile or path.name,
        source=str(path),
        layout="rootfs",
        images=[ImageFile(path.name, "rootfs", path.stat().st_size)],
        rootfs=rootfs,
        flavour=rootfs.flavour_guess(),
        notes=["a rootfs alone: no kernel, so no fit verdict"],
    )


def _with_fit(a: Artifacts, device: Device | None) -> Artifacts:
    return replace(a, fit=_evaluate(a, device) if device is not None else None)


_PROFILE_IN_NAME = re.compile(
    r"(?:^|-)(?P<profile>[a-z0-9]+_[a-z0-9._-]+?)-(?:squashfs-|initramfs-|kernel\.bin$)"
)


def _profile_from_name(name: str) -> str | None:
    """openwrt-25.12.5-ath79-generic-tplink_tl-wr902ac-v1-squashfs-sysupgrade.bin and KDIR's
    tplink_tl-wr902ac-v1-kernel.bin -> tplink_tl-wr902ac-v1 (profile ids have a vendor_)."""
    m = _PROFILE_IN_NAME.search(name)
    return m.group("profile") if m else None


# --- an output directory ---------------------------------------------------------------


def measure_dir(outdir: Path, profiles: list[str] | None = None) -> list[Artifacts]:
    """Every device profile of an output directory (or only ``profiles``)."""
    outdir = Path(outdir)
    if not outdir.is_dir():
        raise WolfError(
            f"output directory not found: {outdir}",
            hint="give bin/targets/<target>/<subtarget>/ of an OpenWrt build or ImageBuilder",
        )
    pj = outdir / "profiles.json"
    if os.path.lexists(pj):  # a FIFO, a loop or an unreadable file there: read_bytes says
        out = _from_profiles_json(outdir, pj, profiles)
        # A profile all of whose images OpenWrt deleted (too big) is missing from
        # profiles.json; its kernel piece still names it.
        listed = {a.profile for a in out}
        out += [
            a for a in _from_files(outdir, profiles, kernel_only=True) if a.profile not in listed
        ]
    else:
        out = _from_files(outdir, profiles)
    if not out:
        want = f" for {', '.join(profiles)}" if profiles else ""
        raise WolfError(
            f"no images or rootfs found in {outdir}{want}",
            hint="expected profiles.json, *-sysupgrade.bin, *-kernel.bin or a squashfs rootfs",
        )
    return out


@dataclass(frozen=True)
class ProfileImage:
    """One images[] entry of profiles.json (scripts/json_overview_image_info.py)."""

    name: str  # a file name in the output directory (checked: untrusted.file_name)
    type: str = "?"
    size: int | None = None  # 25.12+
    sha256: str | None = None


@dataclass(frozen=True)
class ProfileSpec:
    images: list[ProfileImage] = field(default_factory=list)
    file_size_limits: dict[str, int] | None = None  # 25.12+
    supported_devices: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ProfilesJson:
    """OpenWrt's profiles.json, the part we read, every field checked."""

    profiles: dict[str, ProfileSpec]
    version_number: str | None = None
    version_code: str | None = None
    target: str | None = None


def load_profiles_json(pj: Path) -> ProfilesJson:
    """profiles.json of an output directory through untrusted.py: a regular file of a
    bounded size, typed fields, and image names that are plain names in that directory."""
    doc = untrusted.typed(
        ProfilesJson,
        untrusted.load_json(pj, "profiles.json", hint="is it OpenWrt's profiles.json?"),
        f"profiles.json {pj}",
    )
    for pid, spec in doc.profiles.items():
        for i, img in enumerate(spec.images):
            untrusted.file_name(img.name, f"profiles.json {pj}: profiles.{pid}.images[{i}].name")
    return doc


def read_profiles_json(outdir: Path) -> ProfilesJson | None:
    """An output directory's profiles.json, read once by whoever measures the directory; None
    where there is none (malta). Anything else named so (a FIFO, a loop) is read and refused."""
    pj = outdir / "profiles.json"
    return load_profiles_json(pj) if os.path.lexists(pj) else None


def _from_profiles_json(outdir: Path, pj: Path, profiles: list[str] | None) -> list[Artifacts]:
    data = load_profiles_json(pj)
    out = []
    for pid, spec in sorted(data.profiles.items()):
        if profiles and pid not in profiles:
            continue
        layout, images, notes = _listed_images(outdir, spec)
        limits = dict(spec.file_size_limits or {})
        out.append(
            _assemble(outdir, pid, layout, data.version_number, data.target, images, limits, notes)
        )
    return out


def _listed_images(outdir: Path, spec: ProfileSpec) -> tuple[str, list[ImageFile], list[str]]:
    """A profile's images as profiles.json lists them: its sizes (25.12+), else the files'."""
    sized = any(i.size is not None for i in spec.images)
    has_sizes = sized or spec.file_size_limits is not None
    layout = "profiles.json 25.12" if has_sizes else "profiles.json 24.10"
    notes = [] if has_sizes else ["profiles.json has no image sizes (24.10): files measured"]
    images = []
    for i in spec.images:
        f = outdir / i.name
        on_disk = f.stat().st_size if f.is_file() else None
        size = on_disk if i.size is None else i.size
        if i.size is not None and on_disk is not None and on_disk != i.size:
            notes.append(f"{i.name}: profiles.json says {i.size} B, file has {on_disk}")
        src = "file" if i.size is None else "profiles.json"
        images.append(ImageFile(i.name, i.type, size, i.sha256, src))
    return layout, images, notes


def of_build_output(
    outdir: Path, device: Device, spec: ProfilesJson | None = None
) -> tuple[Artifacts, FitReport]:
    """A build's own output directory, for the one device it built: measured once, here, for
    the build record (results/build.py keeps it; the report reads it from there). Its images
    as profiles.json lists them, else every image file there; the fit always evaluated, for
    the device the build was asked for (UNKNOWN where it has no flash: malta), and given
    beside it too. ``spec``: profiles.json as the caller read it (read_profiles_json), else
    read here."""
    if spec is None:
        spec = read_profiles_json(outdir)
    listed = spec.profiles.get(device.profile) if spec else None
    if spec is not None and listed is not None:
        layout, images, notes = _listed_images(outdir, listed)
        limits = dict(listed.file_size_limits or {})
        release, target = spec.version_number, spec.target
    else:  # no profiles.json (malta), or OpenWrt deleted every image of the profile
        layout, notes, limits = "files", [], {}
        release, target = (spec.version_number, spec.target) if spec else (None, None)
        images = [
            ImageFile(f.name, t, f.stat().st_size)
            for f in sorted(untrusted.listdir(outdir, "output directory"))
            if f.is_file() and (t := _image_type(f.name))
        ]
    a = _assemble(outdir, device.profile, layout, release, target, images, limits, notes,
                  device=device)  # fmt: skip
    report = a.fit or _evaluate(a, device)  # _assemble leaves no fit where there is no flash
    return replace(a, fit=report), report


def _from_files(
    outdir: Path, profiles: list[str] | None, *, kernel_only: bool = False
) -> list[Artifacts]:
    """No profiles.json (legacy targets like malta, or a hand-made directory): group files
    by the profile in their names. Files without one (root.squashfs, malta's images) are
    shared by every profile, or form the target's own group when there is no profile."""
    groups: dict[str, list[Path]] = {}
    shared: list[Path] = []
    for f in sorted(untrusted.listdir(outdir, "output directory")):
        if f.is_file() and _image_type(f.name):
            pid = _profile_from_name(f.name)
            if pid:
                groups.setdefault(pid, []).append(f)
            else:
                shared.append(f)
    if kernel_only:  # only profiles that have a kernel piece
        groups = {
            k: v for k, v in groups.items() if any(_image_type(f.name) == "kernel" for f in v)
        }
    elif not groups:
        for f in shared:
            groups.setdefault(_target_name(f.name), []).append(f)
    else:
        for files in groups.values():
            files += shared
    out = []
    for pid, files in groups.items():
        if profiles and pid not in profiles:
            continue
        images = [ImageFile(f.name, _image_type(f.name) or "?", f.stat().st_size) for f in files]
        out.append(_assemble(outdir, pid, "files", None, None, images, {}, []))
    return out


def _target_name(name: str) -> str:
    """openwrt-25.12.5-malta-be-vmlinux-initramfs.elf -> malta-be (the profile id the
    catalogue uses for targets without device profiles)."""
    m = re.match(r"openwrt-(?:[0-9][^-]*-)?(?P<t>[a-z0-9]+-[a-z0-9]+)-", name)
    return m.group("t") if m else name


_TYPES = (
    ("-squashfs-sysupgrade.", "sysupgrade"),
    ("-squashfs-factory.", "factory"),
    ("-initramfs-kernel.", "initramfs-kernel"),
    ("-vmlinux-initramfs.elf", "initramfs-kernel"),
    ("-initramfs-", "initramfs-kernel"),
    ("-kernel.bin", "kernel"),
    ("-vmlinux.elf", "kernel"),
    ("rootfs-squashfs.img", "rootfs"),
    ("squashfs-rootfs.img", "rootfs"),
    ("root.squashfs", "rootfs"),
    ("-rootfs.squashfs", "rootfs"),
)


def _image_type(name: str) -> str | None:
    if name.endswith((".manifest", ".json", ".buildinfo", ".sha256sum", "sha256sums")):
        return None
    return next((t for pat, t in _TYPES if pat in name), None)


def _manifest(outdir: Path, pid: str) -> list[PackageFile]:
    """<IMG_PREFIX>-<profile>.manifest ("name - version" per line, apk and opkg alike)."""
    found = sorted(outdir.glob("*.manifest"))
    mine = [f for f in found if f.name.endswith(f"-{pid}.manifest")]
    if not mine and len(found) == 1:
        mine = found  # one target-wide manifest
    if not mine:
        return []
    archives: dict[str, Path] = {}
    bases = [outdir]
    real = outdir.resolve()
    if real.parent.parent.name == "targets":  # bin/targets/<t>/<s> -> bin/packages
        bases.append(real.parent.parent.parent / "packages")
    for base in bases:
        if base.is_dir():
            for f in base.rglob("*"):
                if f.suffix in (".apk", ".ipk") and f.is_file():
                    archives.setdefault(f.name, f)
    out = []
    for line in untrusted.read_text(mine[0], "manifest").splitlines():
        name, sep, version = line.partition(" - ")
        if not sep:
            continue
        name, version = name.strip(), version.strip()
        arc = archives.get(f"{name}-{version}.apk") or next(
            (p for n, p in archives.items() if n.startswith(f"{name}_{version}_")), None
        )
        if arc is None:
            out.append(PackageFile(name, version))
        else:
            rel = arc.relative_to(outdir) if arc.is_relative_to(outdir) else arc
            out.append(PackageFile(name, version, str(rel), arc.stat().st_size))
    return out


def _pieces(outdir: Path, pid: str) -> tuple[Path | None, Path | None]:
    """The kernel and rootfs as separate files, when the build left them: OpenWrt's KDIR
    names (<profile>-kernel.bin, root.squashfs[+pkg=...]) copied into the directory, or a
    target's own rootfs image (malta: *-rootfs-squashfs.img.gz)."""
    kernel = rootfs = None
    for f in sorted(untrusted.listdir(outdir, "output directory")):
        if not f.is_file():
            continue
        t = _image_type(f.name)
        mine = pid in f.name or _profile_from_name(f.name) is None
        if t == "kernel" and mine and f.name.endswith("-kernel.bin"):
            kernel = kernel or f
        elif t == "rootfs" and mine:
            rootfs = rootfs if rootfs and pid in rootfs.name else f
    return kernel, rootfs


def _assemble(
    outdir: Path,
    pid: str,
    layout: str,
    release: str | None,
    target: str | None,
    images: list[ImageFile],
    limits: dict[str, int],
    notes: list[str],
    *,
    device: Device | None = None,
) -> Artifacts:
    if device is None:  # an output directory of any build: the catalogue's entry, if any
        device, note = find_device(pid, release)
        if note:
            notes.append(note)
    kernel_file, rootfs_file = _pieces(outdir, pid)
    kernel_size = kernel_file.stat().st_size if kernel_file else None
    kernel_source = kernel_file.name if kernel_file else None
    metadata_size = None
    split = None
    rootfs = measure_rootfs(rootfs_file) if rootfs_file else None
    sysupgrade = next((i for i in images if i.type == "sysupgrade"), None)
    sys_path = outdir / sysupgrade.name if sysupgrade else None
    if sys_path and sys_path.is_file():
        try:
            parts = imageformats.split(sys_path)
        except WolfError as e:
            if kernel_size is None or rootfs is None:
                raise  # the image is all there is: its error is the answer
            notes.append(f"{sys_path.name} not split ({e}); pieces used")
        else:
            split = asdict(parts)
            metadata_size = parts.metadata_size
            if kernel_size is None:
                kernel_size = parts.kernel_size
                kernel_source = f"{sys_path.name} (split: {parts.format})"
            if rootfs is None:
                rootfs = measure_rootfs(sys_path, parts.rootfs_offset)
    elif sysupgrade and sysupgrade.size is None:
        notes.append(f"{sysupgrade.name} is listed but absent (OpenWrt deletes too-big images)")
    if rootfs is None:
        notes.append("no rootfs found (no squashfs piece and no sysupgrade image to split)")
    if device and not device.has_flash and not device.partitioned:
        notes.append(f"{device.profile} has no flash (IMAGE_SIZE unset): nothing to fit")
        device = None
    a = Artifacts(
        profile=pid,
        source=str(outdir),
        layout=layout,
        release=release,
        target=target or (device.target_path if device else None),
        images=images,
        file_size_limits=limits,
        kernel_size=kernel_size,
        kernel_source=kernel_source,
        metadata_size=metadata_size,
        split=split,
        rootfs=rootfs,
        flavour=rootfs.flavour_guess() if rootfs else None,
        manifest=_manifest(outdir, pid),
        notes=notes,
    )
    return _with_fit(a, device) if kernel_size is not None or rootfs is not None else a


# --- a build's output directory, file by file -------------------------------------------


@dataclass(frozen=True)
class OutputFile:
    """A file of an output directory as a build record lists it."""

    path: Path
    type: str  # profiles.json's image type for the profile, else one of NOT_IMAGES
    listed_sha256: str | None  # what OpenWrt's sha256sums says of it, when it lists it


def output_files(
    outdir: Path, profile: str, *, skip: tuple[str, ...] = (), spec: ProfilesJson | None = None
) -> list[OutputFile]:
    """Every regular file of an output directory (but ``skip``), typed by the profile's
    images in profiles.json (``spec`` as the caller read it, else read here), with OpenWrt's
    sha256sums entry for it; both files are read as untrusted as any other."""
    if spec is None:
        spec = read_profiles_json(outdir)
    prof = spec.profiles.get(profile) if spec else None
    images = {i.name: i.type for i in prof.images} if prof else {}
    sums = {}
    if (outdir / "sha256sums").exists():
        sums = parse_sha256sums(untrusted.read_text(outdir / "sha256sums", "sha256sums"))
    out = []
    for f in sorted(outdir.iterdir()):
        if not f.is_file() or f.name in skip:
            continue
        kind = images.get(f.name) or (
            "manifest" if f.name.endswith(".manifest") else
            f.name if f.name in ("profiles.json", "sha256sums") else "other"
        )  # fmt: skip
        out.append(OutputFile(f, kind, sums.get(f.name)))
    return out


def of_build(build: BuildRecord) -> Artifacts:
    """Artifacts from a build record (read whole, results/build.py): the output its build
    measured, with OpenWrt's warnings and the record's notes; a version 1 record's rootfs
    (it kept none) measured now (cached) when its piece is still on disk."""
    out = build.output
    notes = [f"OpenWrt printed: {w.strip()}" for w in build.openwrt_warnings]
    notes += list(build.notes) + [n for n in out.notes if n not in build.notes]
    rootfs = out.rootfs
    if rootfs is None:
        piece = next((f for f in build.artifacts if f.type == "rootfs"), None)
        if piece and Path(piece.path).is_file():
            rootfs = measure_rootfs(Path(piece.path))
        elif piece:
            notes.append(f"rootfs piece {piece.path} is gone: no TLS library sizes")
        else:
            notes.append("the build record lists no rootfs piece: no TLS library sizes")
    return replace(
        out,
        rootfs=rootfs,
        flavour=build.flavour or out.flavour or (rootfs.flavour_guess() if rootfs else None),
        notes=notes,
    )


def measure(path: Path, profiles: list[str] | None = None) -> list[Artifacts]:
    """A directory or a single image file."""
    path = Path(path)
    if path.is_dir():
        return measure_dir(path, profiles)
    if path.is_file():
        profile = profiles[0] if profiles else None
        with path.open("rb") as fh:
            bare = fh.read(4) == b"hsqs" or path.name.endswith(".img.gz")
        return [measure_rootfs_only(path, profile) if bare else measure_image(path, profile)]
    raise WolfError(
        f"output directory not found: {path}",
        hint="give bin/targets/<target>/<subtarget>/ or a sysupgrade image file",
    )


def parse_sha256sums(text: str) -> dict[str, str]:
    """OpenWrt's sha256sums: '<hex> *<name>' (rules.mk sha256sums), also '<hex>  <name>'.
    Only plain names in the directory are kept (untrusted.file_name): an entry cannot name
    a file elsewhere (subdirectory entries are never looked up)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([0-9a-f]{64})\s+\*?(\S.*)$", line.strip())
        if m:
            with contextlib.suppress(WolfError):
                out[untrusted.file_name(m.group(2), "sha256sums")] = m.group(1)
    return out
