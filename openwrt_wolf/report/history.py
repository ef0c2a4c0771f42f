"""`invoke history --device D [--flavour F]`: one device's builds over time and releases —
image size, headroom, TLS libraries (xz), free memory — from every build record the store
ever held (replaced records are kept, store.FileStore.history), oldest first."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import paths
from ..catalogue import devices, flavours
from ..errors import WolfError
from ..results import memory
from ..results.store import FileStore, Record, now_utc
from .sizereport import StoredMemory, cell_from_artifacts, read_builds, read_memory, variant_of

SCHEMA = "openwrt-wolf/history/1"


@dataclass(frozen=True)
class Point:
    created: str
    release: str
    flavour: str
    source: str  # "store:build/<key>"
    image: int | None
    image_computed: bool
    limit: int | None
    headroom: int | None
    headroom_blocks: int | None
    verdict: str
    tls_xz: int | None
    memfree_kb: int | None  # median MemFree of the memory record made after this build
    mem_source: str | None


@dataclass(frozen=True)
class History:
    device: str
    title: str
    flavours: list[str]
    points: list[Point]
    created: str = field(default_factory=now_utc)
    schema: str = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _memory_for(build: Record, later: str | None, mems: list[StoredMemory]) -> StoredMemory | None:
    """The newest memory record of this build's device, flavour and release made after it and
    before the next build of the same flavour and release."""
    hits = [
        m
        for m in mems
        if m.flavour == build.flavour
        and m.record.release == build.release
        and m.record.created >= build.created
        and (later is None or m.record.created < later)
    ]
    return hits[-1] if hits else None


def build(
    *,
    store: str | os.PathLike[str] | None,
    device: str | None,
    flavour: str | None = None,
    release: str | None = None,
) -> History:
    if not device:
        raise WolfError("history needs --device", hint="e.g. `./wolf history --device tl-wr902ac`")
    (dev,) = devices.resolve_many(device, release)[:1]
    wanted = {f.name for f in flavours.resolve_many(flavour)} if flavour else None
    fs = FileStore(paths.store_dir(store))
    read = read_builds(
        [r for r in fs.history("build", device=dev.profile) if not wanted or r.flavour in wanted]
    )
    builds = [rec for rec, _a in read]
    mems = read_memory(fs.history(memory.KIND, device=dev.profile))
    points = []
    for i, (rec, a) in enumerate(read):
        flav = rec.flavour or a.flavour or "unknown"
        c = cell_from_artifacts(flav, a, f"store:build/{rec.key}")
        # a stock build of a flavour the patch set makes is its own line, never one series
        # with the patch set's (the step between them is not a change of the image)
        if flav in flavours.names() and flavours.get(flav).patched and \
                variant_of(rec, flav) == "stock":  # fmt: skip
            flav = f"{flav} (stock)"
        later = next(
            (
                b.created
                for b in builds[i + 1 :]
                if b.flavour == rec.flavour and b.release == rec.release
            ),
            None,
        )
        mem = _memory_for(rec, later, mems)
        points.append(
            Point(
                created=rec.created,
                release=rec.release,
                flavour=flav,
                source=c.source,
                image=c.image,
                image_computed=c.image_computed,
                limit=c.limit,
                headroom=c.headroom,
                headroom_blocks=c.headroom_blocks,
                verdict=c.verdict,
                tls_xz=c.tls_xz,
                memfree_kb=mem.result.medians().get("MemFree") if mem else None,
                mem_source=f"store:memory/{mem.record.key}" if mem else None,
            )
        )
    if not points:
        what = f" in flavour {flavour}" if flavour else ""
        raise WolfError(
            f"no build records of {dev.profile}{what} in {fs.root}",
            hint=f"run `./wolf build --device {device} --flavour all` first",
        )
    names = {p.flavour for p in points}
    order = [n for n in flavours.names() if n in names] + sorted(names - set(flavours.names()))
    return History(dev.profile, dev.title, order, points)
