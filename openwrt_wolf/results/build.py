"""The build record: what was asked (the request, whose hash keys the store), what ran and
what came out, measured once (``output``, firmware/artifacts.py). Stored as
store.Record(kind="build", key=<request hash>, data=asdict(...)). docs/build.md describes every
field.

Version 2 (RECORD_VERSION) holds the output measured as results/artifacts.Artifacts; version 1
(no "version" field) held only the file list and the fit as a dict, and reads through
``upgrade_v1``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import WolfError
from ..files.hashing import file_sha256
from ..trust import untrusted
from . import key_policy
from .artifacts import Artifacts, ImageFile, PackageFile
from .fit_report import FitReport

KIND = "build"
# Bump when BuildRecord or the meaning of a request changes: old records stop matching.
BUILD_SCHEMA = 1
BACKENDS = ("imagebuilder", "sdk", "buildroot")
# The record's own layout, apart from the request's: 2 holds the measured output (Artifacts).
RECORD_VERSION = 2
# types of a build record's file list that are not images
NOT_IMAGES = ("kernel", "rootfs", "manifest", "profiles.json", "sha256sums", "other",
              "package", "package index")  # fmt: skip


@dataclass(frozen=True)
class BuildRequest:
    release: str
    target: str  # "ath79/generic"
    profile: str
    flavour: str
    packages: tuple[str, ...]  # the flavour's change set, sorted ("-libustream-mbedtls", ...)
    patch_set: str  # sha256 of the patch set applied, "none" for stock packages
    backend: str
    schema: int = BUILD_SCHEMA
    tree: str = ""  # buildroot: the tree's identity (git HEAD or its `version` file)
    # buildroot: sha256 of the tree's substitutions (wolf-substitutions.json's files), "" when
    # `invoke sources` never ran there: other source files make another build
    sources: str = ""
    # FILES=: sha256 of the overlay copied over the rootfs (hashing.dir_sha256), "" without
    # one: a build with other files is another build (it was the same request, so a cached
    # build without the overlay was given back)
    files: str = ""
    # the ImageBuilder and SDK the build used (build/download.py identity): their archives'
    # sha256, or a digest of a directory given by path; "" for the buildroot backend
    imagebuilder: str = ""
    sdk: str = ""
    variant: str = ""  # "patch-set" or "stock" (VARIANTS); "" in requests made before it

    def key(self) -> str:
        """The request hash: stable across runs and machines."""
        d = dataclasses.asdict(self)
        # the archives' identity is checked when a record is served (build/driver.py), not
        # hashed: a build farm's coordinator plans without a mirror (docs/build-farm.md)
        del d["imagebuilder"], d["sdk"]
        for optional in ("tree", "sources", "files", "variant"):
            if not d[optional]:
                del d[optional]  # requests without them hash as before these fields
        return key_policy.digest_json(d, 32, compact=True)

    @classmethod
    def from_dict(cls, d: Any, where: str = "build request") -> BuildRequest:
        return untrusted.typed(cls, d, where)


VARIANTS = ("patch-set", "stock")


def legacy_variant(flavour: str, backend: str, tree: str) -> str:
    """The variant of a record written before requests named it: a patched flavour built by
    the buildroot, or by the SDK from a tree (its base feed), was the patch set's."""
    from ..catalogue import flavours

    if not flavours.get(flavour).patched:
        return "stock"
    return "patch-set" if backend == "buildroot" or (backend == "sdk" and tree) else "stock"


def variant_in(data: Any, flavour: str) -> str:
    """The variant of a store's build record given as its data (any shape: older records, or
    records of another tool, are read by what they hold): its request's, else what its
    backend and tree imply."""
    from ..catalogue import flavours

    d: dict[str, Any] = data if isinstance(data, dict) else {}
    r = d.get("request")
    req: dict[str, Any] = r if isinstance(r, dict) else {}
    if req.get("variant") in VARIANTS:
        return str(req["variant"])
    if flavour not in flavours.names():
        return "stock"
    tree = req.get("tree")
    return legacy_variant(
        flavour, str(d.get("backend") or ""), tree if isinstance(tree, str) else ""
    )


@dataclass(frozen=True)
class Artifact:
    """A file a build produced, kept simple for the report's artifacts model."""

    name: str
    path: str
    sha256: str
    size: int
    type: str  # "sysupgrade", "factory", "kernel", "rootfs", "manifest", "profiles.json", ...

    @classmethod
    def of(cls, path: Path, type: str) -> Artifact:
        return cls(path.name, str(path), file_sha256(path), path.stat().st_size, type)


@dataclass(frozen=True)
class BuildRecord:
    request: BuildRequest
    key: str
    backend: str
    release: str
    release_commit: str
    device: str  # profile id
    flavour: str
    builder: str  # the ImageBuilder used: archive name or path
    builder_sha256: str | None  # of the archive, when downloaded
    packages_value: str  # PACKAGES= exactly as passed to make
    library_versions: dict[str, str]  # TLS library packages in the manifest -> version
    manifest: dict[str, str]  # every installed package -> version (`make manifest`)
    commands: list[str]  # a line reproducing every command run
    phases: dict[str, float]  # seconds per phase: imagebuilder, info, manifest, image, measure
    make_seconds: float  # wall time of the make runs alone
    log: str  # the full build log
    artifacts: list[Artifact]  # every file of the output directory, with its sha256
    output: Artifacts  # the output measured once: images, kernel, rootfs, the fit
    openwrt_warnings: list[str]  # OpenWrt's own "is too big" / "partition too big" lines
    image_deleted: bool  # OpenWrt built no sysupgrade image (too big)
    notes: list[str] = field(default_factory=list)  # the flavour's notes, model disagreements
    sdk: str | None = None  # sdk backend: the SDK used (archive name or path)
    sdk_sha256: str | None = None  # of the SDK archive, when downloaded
    config: dict[str, str] = field(default_factory=dict)  # buildroot: the checked .config symbols
    # the queue worker that built it (docs/build-farm.md): artifact paths are on its disk, or
    # on the shared storage its --artifacts named; "" for a local build
    worker: str = ""
    # buildroot: the tree's source substitutions (build/sources/dl.py): counts per class, every
    # file that is not OpenWrt's exact one with its origin and the tree edits it needed
    sources: dict[str, Any] = field(default_factory=dict)
    # sdk backend: the package files the SDK compiled and the image installs from
    # (name-version.apk, the ABI suffix kept: the patch set's minimal libwolfssl is told from
    # OpenWrt's full one by it)
    compiled: list[str] = field(default_factory=list)
    version: int = RECORD_VERSION

    @property
    def fit(self) -> FitReport:
        """The fit of the image: always evaluated for a build (checked when read)."""
        if self.output.fit is None:  # from_dict refuses such a record; a model made by hand
            raise WolfError(f"build record {self.key}: its output has no fit")
        return self.output.fit

    @property
    def variant(self) -> str:
        """ "patch-set": the USE_WOLFSSL patch set's packages (a patched flavour built by the
        SDK from a patched tree, or by the buildroot); "stock": OpenWrt's own (every Mbed TLS
        and OpenSSL build, a wolfSSL build with --stock)."""
        r = self.request
        return r.variant or legacy_variant(self.flavour, self.backend, r.tree)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Any, where: str = "build record", path: str = "") -> BuildRecord:
        """Read back from the store or a worker: every field checked (untrusted.typed); a
        version 1 record through upgrade_v1; ``path`` names where ``d`` sits in the file
        ("data")."""
        at = f"{path}." if path else ""
        if isinstance(d, dict) and "version" not in d:
            d = upgrade_v1(d, where, path)
        rec = untrusted.typed(cls, d, where, path)
        if rec.version != RECORD_VERSION:
            raise WolfError(
                f"{where}: field {at}version is {rec.version}, this tool reads 1 and "
                f"{RECORD_VERSION}",
                hint="a newer openwrt-wolf wrote it",
            )
        if rec.output.fit is None:
            raise WolfError(f"{where}: field {at}output.fit is null where a fit report belongs")
        return rec

    def image(self) -> Artifact | None:
        return next((a for a in self.artifacts if a.type == "sysupgrade"), None)


def upgrade_v1(d: dict[str, Any], where: str, path: str = "") -> dict[str, Any]:
    """A version 1 record (the file list and a fit dict) as version 2: its output is what the
    file list and the fit say (no rootfs measured: the report measures the rootfs piece when
    it is still on disk). Its file list and fit are checked whole first."""
    at = f"{path}." if path else ""
    files = d.get("artifacts")  # not a list: the typed read of the upgrade names it
    arts = [
        untrusted.typed(Artifact, a, where, f"{at}artifacts[{i}]")
        for i, a in enumerate(files if isinstance(files, list) else [])
    ]
    fit = FitReport.from_dict(d.get("fit"), where, f"{at}fit")
    manifest = d.get("manifest")  # likewise
    packages = sorted(manifest.items()) if isinstance(manifest, dict) else []
    kernel = next((a for a in arts if a.type == "kernel"), None)
    output = Artifacts(
        profile=str(d.get("device")),
        source="build record",
        layout="build record",
        release=d.get("release") if isinstance(d.get("release"), str) else None,
        images=[
            ImageFile(a.name, a.type, a.size, a.sha256, "build record")
            for a in arts
            if a.type not in NOT_IMAGES
        ],
        kernel_size=kernel.size if kernel else None,
        kernel_source=kernel.name if kernel else None,
        metadata_size=fit.metadata_size,
        fit=fit,
        flavour=d.get("flavour") if isinstance(d.get("flavour"), str) else None,
        manifest=[PackageFile(str(n), str(v)) for n, v in packages],
    )
    up = {k: v for k, v in d.items() if k != "fit"}
    return {**up, "output": output.to_dict(), "version": RECORD_VERSION}
