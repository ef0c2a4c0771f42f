"""`invoke fit`: the fit of one image (or its kernel and rootfs) on one device, as a table."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from ..catalogue import devices
from ..errors import WolfError
from ..results.fit_report import FitReport
from ..term import console
from ..units import figure as _n
from . import fit


def report_table(rep: FitReport, title: str) -> Table:
    t = Table(title=title, show_header=False)
    t.add_column("what", style="bold")
    t.add_column("value", justify="right")
    t.add_column("", style="dim")
    verdict = {"FITS": "[green]FITS[/]", "TOO_BIG": "[red]TOO BIG[/]"}.get(rep.verdict, "UNKNOWN")
    if rep.recipe in devices.PARTITIONED:
        # a disk image: no erase blocks, no check-size; the rootfs against its partition
        rows = [
            ("recipe", rep.recipe, "a disk image: boot and root partitions"),
            ("kernel", _n(rep.kernel_size), "in the boot partition"),
            ("root filesystem", _n(rep.rootfs_size), "squashfs, written into the root partition"),
            ("limit", _n(rep.limit), rep.limit_name),
            ("headroom", _n(rep.rootfs_room), "more rootfs bytes the partition holds (the "
             "rest of it is the overlay)"),
            ("verdict", verdict, ""),
        ]  # fmt: skip
        for r in rows:
            t.add_row(*r)
        return t
    rows = [
        ("recipe", rep.recipe, ""),
        ("kernel", _n(rep.kernel_size), "as appended"),
        ("root filesystem", _n(rep.rootfs_size), "squashfs"),
        ("padding", _n(rep.padding), "pad-to / pad-rootfs fill"),
        ("checked size", _n(rep.checked_size), "what check-size compares"),
        (
            "erase blocks",
            _n(rep.erase_blocks, True),
            f"{rep.blocksize:,} B each" if rep.blocksize else "",
        ),
        ("limit", _n(rep.limit), rep.limit_name),
        ("headroom", _n(rep.rootfs_room), "more rootfs bytes that keep the image"),
        ("blocks left", _n(rep.headroom_blocks, True), "whole erase blocks under the limit"),
        ("limit − checked", _n(rep.margin), "limit minus checked size"),
        ("verdict", verdict, ""),
        ("metadata", _n(rep.metadata_size), "append-metadata trailer"),
        ("final size", _n(rep.final_size), "file size"),
    ]
    if rep.factory is not None:
        f = rep.factory
        fverdict = {"FITS": "[green]FITS[/]", "TOO_BIG": "[red]TOO BIG[/]"}[f.verdict]
        rows += [
            (f"{f.name} limit", _n(f.limit), f.limit_name),
            (f"{f.name} headroom", _n(f.rootfs_room), "more rootfs bytes that keep it"),
            (f"{f.name} verdict", fverdict, ""),
        ]
    elif rep.verdict != "UNKNOWN":
        rows.append(("factory image", "–", f"none built by the {rep.recipe} recipe"))
    for r in rows:
        t.add_row(*r)
    return t


def main(
    *,
    device: str,
    image: str | None,
    kernel: str | None,
    rootfs: str | None,
    release: str | None,
    check: bool,
    as_json: bool = False,
) -> None:
    if image and (kernel or rootfs):
        raise WolfError("give --image, or --kernel with --rootfs, not both")
    if not image and not (kernel and rootfs):
        raise WolfError("fit needs --image PATH, or --kernel PATH and --rootfs PATH")
    dev = devices.resolve(device, release)
    out = console()
    if dev.profile != device and not as_json:
        out.print(f"device {device!r}: using profile {dev.profile} ({dev.release})")
    if image:
        rep = fit.evaluate_image(dev, Path(image))
        title = f"{dev.profile}: {Path(image).name}"
    else:
        assert kernel and rootfs
        rep = fit.evaluate_files(dev, Path(kernel), Path(rootfs))
        title = f"{dev.profile}: {Path(kernel).name} + {Path(rootfs).name}"
    if as_json:
        print(json.dumps({"schema": 1, "fit": rep.to_dict()}, indent=2))
    else:
        out.print(report_table(rep, title))
        for note in rep.notes + (rep.factory.notes if rep.factory else ()):
            out.print(f"note: {note}", markup=False, soft_wrap=True)
    if check and rep.verdict == "TOO_BIG":
        raise SystemExit(1)
