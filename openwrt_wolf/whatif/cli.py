"""`invoke what-if`: would another flavour fit, as a table beside the image as built."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from ..results import whatif
from ..term import console
from ..units import figure as _n
from . import swap


def _verdict(v: str | None) -> str:
    return {"FITS": "[green]FITS[/]", "TOO_BIG": "[red]TOO BIG[/]"}.get(v or "", "UNKNOWN")


def table(w: whatif.WhatIf) -> Table:
    """The image as built beside the prediction: rootfs, image, blocks, headroom, verdicts."""
    t = Table(title=f"{w.profile} ({w.release}): {w.flavour_from} image → {w.flavour_to}?")
    t.add_column("", style="bold")
    t.add_column(f"{w.flavour_from} (as built)", justify="right")
    t.add_column(f"{w.flavour_to} (predicted)", justify="right")
    t.add_column("", style="dim")
    a, b = w.fit_from, w.fit_to
    rows = [
        ("root filesystem", _n(w.rootfs_from), _n(w.rootfs_to), "squashfs, mksquashfs4"),
        ("Δ rootfs", "", f"{w.rootfs_to - w.rootfs_from:+,} B", ""),
        ("image", _n(a["checked_size"]), _n(b["checked_size"]), "what check-size compares"),
        ("erase blocks", _n(a["erase_blocks"], True), _n(b["erase_blocks"], True),
         f"{b['blocksize']:,} B each" if b["blocksize"] else ""),
        ("limit", _n(a["limit"]), _n(b["limit"]), b["limit_name"]),
        ("headroom", _n(a["rootfs_room"]), _n(b["rootfs_room"]),
         "more rootfs bytes that keep the image"),
        ("blocks left", _n(a["headroom_blocks"], True), _n(b["headroom_blocks"], True),
         "whole erase blocks under the limit"),
        ("sysupgrade", _verdict(a["verdict"]), _verdict(b["verdict"]), ""),
    ]  # fmt: skip
    fa, fb = a.get("factory"), b.get("factory")
    if fa and fb:
        rows += [
            (f"{fb['name']} headroom", _n(fa["rootfs_room"]), _n(fb["rootfs_room"]),
             "more rootfs bytes that keep it"),
            (fb["name"], _verdict(fa["verdict"]), _verdict(fb["verdict"]), fb["limit_name"]),
        ]  # fmt: skip
    for r in rows:
        t.add_row(*r)
    return t


def main(
    *,
    flavour: str,
    image: str | None,
    from_dir: str | None,
    device: str | None,
    packages: str | None,
    release: str | None,
    store_dir: str | None,
    output: str | None = None,
    as_json: bool = False,
    check: bool = False,
) -> None:
    from .. import paths
    from ..catalogue import flavours
    from ..files import hashing
    from ..results import store
    from ..term import progress

    flavours.get(flavour)  # an unknown name is one line before any work starts
    with progress("what-if") as p:
        w = swap.predict(
            flavour=flavour,
            image=image,
            from_dir=from_dir,
            device=device,
            packages=packages,
            release=release,
            output=output,
            step=lambda s: p.update(label=f"what-if: {s}"),
        )
    key = (
        f"{w.profile}-{w.flavour_from}-to-{w.flavour_to}-{hashing.file_sha256(Path(w.source))[:12]}"
    )
    store.FileStore(paths.store_dir(store_dir)).put(
        store.Record(whatif.KIND, key, w.release, w.profile, w.flavour_to, w.to_dict())
    )
    if as_json:
        print(json.dumps({"schema": 1, "what_if": w.to_dict()}, indent=2))
    else:
        out = console()
        out.print(table(w))
        out.print(f"packages out: {' '.join(w.removed) or '–'}", markup=False, soft_wrap=True)
        out.print(f"packages in:  {' '.join(w.added) or '–'}", markup=False, soft_wrap=True)
        out.print(f"installed list from {w.installed_from}; packages from {w.package_source}",
                  markup=False, soft_wrap=True)  # fmt: skip
        notes = [*w.notes, *w.fit_to["notes"]]
        if w.fit_to.get("factory"):
            notes += w.fit_to["factory"]["notes"]
        for note in notes:
            out.print(f"note: {note}", markup=False, soft_wrap=True)
    if check and w.fit_to["verdict"] == "TOO_BIG":
        raise SystemExit(1)
