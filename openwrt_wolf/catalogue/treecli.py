"""`invoke devices --tree PATH [--device D] [--target T] [--write]`: read devices from an
OpenWrt tree, print them with what could not be read, compare them with the catalogue and
optionally update data/devices.toml."""

from __future__ import annotations

import difflib
import fnmatch
from collections import Counter
from pathlib import Path

from rich.table import Table

from ..errors import WolfError
from ..paths import DATA_DIR
from ..term import console
from ..units import kib
from . import devices, devices_toml, devtree, releases


def _release_for(tree_version: str | None, release: str | None, write: bool) -> str:
    """The catalogue release this tree is compared with / written to."""
    tree_rel = None
    if tree_version:
        try:
            tree_rel = releases.get(tree_version.lower()).name
        except WolfError:
            tree_rel = None
    if release is None:
        return tree_rel or releases.get(None).name
    rel = releases.get(release).name
    if write and tree_rel and tree_rel != rel:
        raise WolfError(
            f"the tree is OpenWrt {tree_version}, not {rel}: --write would mix releases",
            hint=f"use --release {tree_rel}, or a {rel} tree",
        )
    return rel


def _targets(target: str | None, release: str, tree: Path) -> list[str] | None:
    if target == "all":
        return None
    if target:
        return [t.strip() for t in target.split(",") if t.strip()]
    # default: the targets the catalogue covers for the release
    cat = sorted({d.target for d in devices.for_release(release)})
    have = set(devtree.targets(tree))
    return [t for t in cat if t in have] or None


def _select(
    read: devtree.TreeRead, pattern: str | None, release: str, said: list[str]
) -> list[devtree.TreeDevice]:
    if not pattern:
        return read.devices
    picked: list[devtree.TreeDevice] = []
    names = [d.profile for d in read.devices]
    for want in (p.strip() for p in pattern.split(",") if p.strip()):
        hits = [d for d in read.devices if fnmatch.fnmatch(d.profile, want)]
        if not hits:
            try:  # a catalogue alias (tl-wr902ac -> tplink_tl-wr902ac-v1)
                prof = devices.resolve(want, release).profile
                hits = [d for d in read.devices if d.profile == prof]
                said.append(f"--device {want}: catalogue alias of {prof}")
            except WolfError:
                hits = []
        if not hits:
            close = difflib.get_close_matches(want, names, n=4, cutoff=0.6)
            raise WolfError(
                f"no device {want!r} in the targets read from {read.tree}",
                hint=f"did you mean: {', '.join(close)}" if close else "try --target all",
            )
        picked += [d for d in hits if d not in picked]
    return picked


def _firmware_cell(d: devtree.TreeDevice) -> str:
    p = d.firmware_partition
    return f"0x{p.offset:06x}+0x{p.size:06x}" if p else "–"


def devices_table(devs: list[devtree.TreeDevice], title: str) -> Table:
    t = Table(title=title)
    for col in ("profile", "target", "SoC", "IMAGE_SIZE", "KERNEL_SIZE", "BLOCKSIZE",
                "recipe", "squashfs", "DTS firmware", "check"):  # fmt: skip
        t.add_column(col)
    for d in devs:
        t.add_row(
            d.profile + (" (BROKEN)" if d.broken else ""),
            d.target_path,
            d.soc or "–",
            d.image_size_text or "–",
            d.kernel_size_text or "–",
            d.blocksize_text or "–",
            d.recipe,
            kib(d.squashfs_block),
            _firmware_cell(d),
            d.dts_check(),
        )
    return t


def subtargets_table(read: devtree.TreeRead) -> Table:
    t = Table(title="subtargets")
    for col in ("target", "arch packages", "FEATURES", "squashfs", "devices", "read",
                "not read", "DTS = IMAGE_SIZE", "DTS differs", "DTS unknown"):  # fmt: skip
        t.add_column(col)
    for st in read.subtargets:
        mine = [d for d in read.devices if (d.target, d.subtarget) == (st.target, st.subtarget)]
        checks = Counter(d.dts_check() for d in mine)
        bad = sum(
            1 for u in read.unreadable if (u.target, u.subtarget) == (st.target, st.subtarget)
        )
        t.add_row(
            st.path,
            st.arch_packages,
            " ".join(st.features),
            kib(st.squashfs_block),
            str(st.profiles) if st.profiles else "none (legacy image)",
            str(len(mine)),
            str(bad),
            *(str(checks[k]) for k in ("ok", "differs", "unknown")),
        )
    return t


def main(
    tree: str,
    release: str | None = None,
    device: str | None = None,
    target: str | None = None,
    write: bool = False,
    catalogue: Path | None = None,
) -> devtree.TreeRead:
    con = console()
    path = devtree.check_tree(Path(tree))
    version = devtree.tree_version(path)
    rel = _release_for(version, release, write)
    want = _targets(target, rel, path)
    with console(stderr=True).status(f"reading {path} ...") as status:

        def progress(sub: str, n: int) -> None:
            status.update(f"reading {path}: {sub} ({n} devices)")

        read = devtree.read_tree(path, want, progress)
    said: list[str] = []
    shown = _select(read, device, rel, said)
    con.print(
        f"OpenWrt tree {path} (version {version or 'unknown'}), compared with catalogue "
        f"release {rel}"
    )
    for line in said:
        con.print(line)
    con.print(subtargets_table(read))
    con.print(devices_table(shown, f"devices read ({len(shown)} shown)"))
    per_target = Counter(d.target for d in read.devices)
    bad_target = Counter(u.target for u in read.unreadable)
    for t in sorted(set(per_target) | set(bad_target)):
        con.print(f"{t}: {per_target[t]} devices read, {bad_target[t]} could not be read")
    wanted = {d.profile for d in shown}
    bad = [u for u in read.unreadable if not device or u.profile in wanted]
    for u in bad:
        con.print(f"  could not read {u.target}/{u.subtarget} {u.profile}: {u.reason}")
    for note in read.notes:
        con.print(f"  note: {note}")
    unknown = Counter(
        (d.target, d.dts_unknown_reason()) for d in shown if d.dts_check() == "unknown"
    )
    if unknown:
        con.print("IMAGE_SIZE not cross-checked with the DTS:")
        for (t, why), count in sorted(unknown.items()):
            con.print(f"  {t}: {count} devices: {why}")
    differs = [d for d in shown if d.dts_check() == "differs"]
    if differs:
        con.print(f"IMAGE_SIZE differs from the DTS firmware partition ({len(differs)}):")
        for d in differs:
            p = d.firmware_partition
            assert p is not None and d.image_size is not None
            sign = "larger" if d.image_size > p.size else "smaller"
            con.print(
                f"  {d.profile}: IMAGE_SIZE {d.image_size_text} = {d.image_size} B, "
                f"{d.firmware.dts if d.firmware else ''} firmware 0x{p.size:x} = {p.size} B "
                f"(IMAGE_SIZE {abs(d.image_size - p.size)} B {sign})"
            )
    if device:
        for d in shown:
            if d.firmware and d.firmware.note:
                con.print(f"  {d.profile}: DTS: {d.firmware.note}")
            for note in d.notes:
                con.print(f"  {d.profile}: {note}")
            if d.sysupgrade:
                con.print(f"  {d.profile}: IMAGE/sysupgrade.bin = {d.sysupgrade}")
    cat = [d for d in devices.for_release(rel) if not device or d.profile in wanted]
    comp = devices_toml.compare(cat, read)
    con.print(f"catalogue {rel} against the tree:")
    for prof in comp.matched:
        con.print(f"  {prof}: same as the tree")
    for diff in comp.differences:
        con.print(f"  {diff.profile}: {diff.field}: catalogue {diff.catalogue}, tree {diff.tree}")
    for prof in comp.absent:
        con.print(f"  {prof}: not in the targets read from the tree")
    if write:
        target_file = catalogue or DATA_DIR / "devices.toml"
        report = devices_toml.write(target_file, read, rel, add=shown if device else ())
        devices.catalogue.cache_clear()
        con.print(
            f"wrote {report.path}: {len(report.updated)} updated "
            f"({', '.join(report.updated) or '-'}), {len(report.added)} added "
            f"({', '.join(report.added) or '-'}), {len(report.unchanged)} unchanged, "
            f"{len(report.absent)} not in the tree"
        )
    return read
