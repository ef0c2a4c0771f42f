"""The build record: what was asked (the request, whose hash keys the store), what ran and
what came out. Stored as store.Record(kind="build", key=<request hash>, data=asdict(...)).
docs/build.md describes every field."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..firmware import fit
from ..hashing import file_sha256
from ..trust import untrusted

KIND = "build"
# Bump when BuildRecord or the meaning of a request changes: old records stop matching.
BUILD_SCHEMA = 1
BACKENDS = ("imagebuilder", "sdk", "buildroot")


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

    def key(self) -> str:
        """The request hash: stable across runs and machines."""
        d = dataclasses.asdict(self)
        for optional in ("tree", "sources", "files"):
            if not d[optional]:
                del d[optional]  # requests without them hash as before these fields
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    @classmethod
    def from_dict(cls, d: Any, where: str = "build request") -> BuildRequest:
        return untrusted.typed(cls, d, where)


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
    artifacts: list[dict[str, Any]]  # [{"name","path","sha256","size","type"}] of every file
    fit: dict[str, Any]  # fit.FitReport.to_dict()
    openwrt_warnings: list[str]  # OpenWrt's own "is too big" / "partition too big" lines
    image_deleted: bool  # OpenWrt built no sysupgrade image (too big)
    notes: list[str] = field(default_factory=list)  # the flavour's notes, model disagreements
    sdk: str | None = None  # sdk backend: the SDK used (archive name or path)
    sdk_sha256: str | None = None  # of the SDK archive, when downloaded
    config: dict[str, str] = field(default_factory=dict)  # buildroot: the checked .config symbols
    # the queue worker that built it (docs/build-farm.md): artifact paths are on its disk, or
    # on the shared storage its --artifacts named; "" for a local build
    worker: str = ""
    # buildroot: the tree's source substitutions (build/sources.py): counts per class, every
    # file that is not OpenWrt's exact one with its origin and the tree edits it needed
    sources: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Any, where: str = "build record") -> BuildRecord:
        """Read back from the store or a worker: every field checked (untrusted.typed), each
        artifact as an Artifact."""
        rec = untrusted.typed(cls, d, where)
        for i, a in enumerate(rec.artifacts):
            untrusted.typed(Artifact, a, where, f"artifacts[{i}]")
        fit.FitReport.from_dict(rec.fit, f"{where}, fit")  # complete, every value typed
        return rec

    def image(self) -> dict[str, Any] | None:
        for a in self.artifacts:
            if a["type"] == "sysupgrade":
                return a
        return None
