"""`invoke devices`: show the catalogue as a table."""

from __future__ import annotations

from rich.table import Table

from ..errors import WolfError
from ..term import console
from ..units import kib
from . import devices, releases


def _disk(d: devices.Device) -> str:
    """A disk image's partitions instead of a flash chip: boot + root MiB."""
    if not d.partitioned:
        return "–"
    boot = f"boot {d.kernel_partsize} + " if d.kernel_partsize else ""
    return f"disk: {boot}root {d.rootfs_partsize} MiB"


def catalogue_table(devs: list[devices.Device], title: str) -> Table:
    t = Table(title=title)
    for col in ("profile", "target", "arch", "flash", "IMAGE_SIZE", "BLOCKSIZE", "recipe",
                "squashfs", "aliases"):  # fmt: skip
        t.add_column(col)
    for d in devs:
        t.add_row(
            d.profile,
            d.target_path,
            d.arch_packages,
            f"{d.flash_size // 2**20} MiB" if d.flash_size else _disk(d),
            kib(d.image_size) if d.image_size else "–",
            kib(d.blocksize) if d.blocksize else "–",
            d.recipe,
            kib(d.squashfs_block),
            ", ".join(d.aliases),
        )
    return t


def main(
    release: str | None = None,
    tree: str | None = None,
    write: bool = False,
    device: str | None = None,
    target: str | None = None,
) -> None:
    if write and not tree:
        raise WolfError("--write needs --tree PATH: the catalogue is updated from an OpenWrt tree")
    if tree:
        from . import treecli  # the tree reader is only loaded when asked for

        treecli.main(tree, release=release, device=device, target=target, write=write)
        return
    if target:
        raise WolfError("--target only applies with --tree PATH")
    rel = releases.get(release)
    devs = devices.for_release(rel.name)
    if not devs:
        raise WolfError(f"no devices catalogued for release {rel.name}")
    console().print(catalogue_table(devs, f"OpenWrt {rel.name} devices"))
