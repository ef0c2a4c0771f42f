"""`invoke measure-memory`: argument checks, the boots with progress, the stored record, a table."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from . import flavours, hosttools, paths, term
from . import memory as mem
from .errors import WolfError
from .store import FileStore


def main(
    *,
    device: str | None,
    flavour: str | None,
    image: str | None,
    release: str | None,
    boots: int,
    idle: float,
    memory: int,
    rootfs: str | None,
    initrd: str | None,
    append: str | None,
    store: str | None,
) -> None:
    out = term.console()
    fs = FileStore(paths.store_dir(store))
    dev_profile: str | None = None
    if image is None:
        if not device or not flavour:
            raise WolfError(
                "measure-memory needs --image PATH, or --device malta-be|malta-le with --flavour",
                hint="e.g. invoke measure-memory --device malta-be --flavour mbedtls",
            )
        from . import devices

        dev = devices.resolve(device, release)
        if dev.recipe != "malta-initramfs":
            raise WolfError(
                f"{dev.profile} is not a QEMU malta device",
                hint="measure-memory boots malta-be or malta-le; measure routers with their target",
            )
        flavour = flavours.get(flavour).name
        path, release = mem.built_image(fs, dev.profile, flavour, release)
        dev_profile = dev.profile
    else:
        path = Path(image)
        if flavour:
            flavour = flavours.get(flavour).name
        if device:
            from . import devices

            dev_profile = devices.resolve(device, release).profile
    spec = mem.spec_for(
        path,
        memory_mb=memory,
        rootfs=Path(rootfs) if rootfs else None,
        initrd=Path(initrd) if initrd else None,
        append=append,
    )
    if boots < 1:
        raise WolfError(f"--boots {boots}: need at least one boot")
    if idle < 0:
        raise WolfError(f"--idle {idle}: seconds must not be negative")
    hosttools.ensure(["qemu-system-mips", "qemu-system-mipsel"])
    out.print(
        f"measuring {path.name}: {boots} boot(s) at -m {spec.memory()} MB, "
        f"{idle:g} s idle after boot"
    )

    def progress(b: mem.BootMemory) -> None:
        t = {x["state"]: x["at"] for x in b.transitions}
        out.print(
            f"  boot {b.boot}/{boots}: MemFree {b.memfree_kb:,} kB, "
            f"MemAvailable {b.meminfo_kb.get('MemAvailable', 0):,} kB "
            f"(shell at {t.get('shell', 0):.1f} s, read at {b.seconds_to_measurement:.1f} s)"
        )

    with out.status("booting…"):
        result = mem.measure(spec, boots=boots, idle=idle, on_boot=progress)
    rec, where = mem.store_result(fs, result, release=release, device=dev_profile, flavour=flavour)
    table = Table(title=f"free memory at idle after boot, kB ({boots} boots)")
    for col in ("field", "median", "min", "max"):
        table.add_column(col, justify="left" if col == "field" else "right")
    for name, s in result.summary.items():
        table.add_row(name, f"{s.median:,.0f}", f"{s.min:,}", f"{s.max:,}")
    out.print(table)
    out.print(f"kernel {result.kernel_release}, release {rec.release}; record {where}")
