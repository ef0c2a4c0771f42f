"""`invoke measure-memory`: argument checks, the boots with progress, the stored record, a table.
The VM (--image, or --device malta-* --flavour) or a router over SSH (--host), never both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .. import paths, term
from ..catalogue import devices, flavours
from ..errors import WolfError
from ..host import hosttools
from ..results.store import FileStore
from ..targets.router.board import Board
from ..targets.router.board import board as read_board
from . import free_memory as mem


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
    host: str | None = None,
    ssh: dict[str, Any] | None = None,
    wait_up: float = 180.0,
) -> None:
    ssh = {k: v for k, v in (ssh or {}).items() if v not in (None, False)}
    vm_only = {"--image": image, "--memory": memory, "--rootfs": rootfs, "--initrd": initrd,
               "--append": append}  # fmt: skip
    if host is not None:
        _check_router_options(host, vm_only, device, release)
    elif ssh:
        names = ", ".join(f"--{k.replace('_', '-')}" for k in ssh)
        raise WolfError(
            f"measure-memory: {names} only apply with --host ADDR (a router over SSH)",
            hint="add --host, or drop them to measure the QEMU VM",
        )
    if boots < 1:
        raise WolfError(f"--boots {boots}: need at least one boot")
    if idle < 0:
        raise WolfError(f"--idle {idle}: seconds must not be negative")
    out = term.console()
    fs = FileStore(paths.store_dir(store))
    if host is not None:
        _router(out, fs, host, ssh, device=device, flavour=flavour, release=release,
                boots=boots, idle=idle, wait_up=wait_up)  # fmt: skip
        return
    path, release, flavour, dev_profile = _vm_image(fs, image, device, flavour, release)
    spec = mem.spec_for(
        path,
        memory_mb=memory,
        rootfs=Path(rootfs) if rootfs else None,
        initrd=Path(initrd) if initrd else None,
        append=append,
    )
    hosttools.ensure(["qemu-system-mips", "qemu-system-mipsel"])
    out.print(
        f"measuring {path.name}: {boots} boot(s) at -m {spec.memory()} MB, "
        f"{idle:g} s idle after boot"
    )
    with out.status("booting…"):
        result = mem.measure(spec, boots=boots, idle=idle, on_boot=_progress(out, boots, "shell"))
    rec, where = mem.store_result(fs, result, release=release, device=dev_profile, flavour=flavour)
    _table(out, result, boots)
    out.print(f"kernel {result.kernel_release}, release {rec.release}; record {where}")


def _check_router_options(
    host: str, vm_only: dict[str, Any], device: str | None, release: str | None
) -> None:
    """--host measures a router: none of the VM's options, and --device names a router."""
    given = [k for k, v in vm_only.items() if v]
    if given:
        raise WolfError(
            f"measure-memory: --host measures a router, {', '.join(given)} the QEMU VM; "
            "give one or the other",
            hint="drop --host to boot an image, or drop the VM options to measure the router",
        )
    if not host.strip():
        raise WolfError("--host is empty", hint="give the router's address, e.g. 192.168.1.1")
    if device and devices.resolve(device, release).recipe == "malta-initramfs":
        raise WolfError(
            f"measure-memory: --host measures a router, --device {device} the QEMU VM; "
            "give one or the other",
            hint="with --host, --device names the router's device (or leave it out)",
        )


def _vm_image(
    fs: FileStore, image: str | None, device: str | None, flavour: str | None, release: str | None
) -> tuple[Path, str | None, str | None, str | None]:
    """The malta image to boot: --image, or the newest build of --device with --flavour.
    Returns it with the release, flavour and device profile the record gets."""
    if image is not None:
        name = flavours.get(flavour).name if flavour else None
        dev_profile = devices.resolve(device, release).profile if device else None
        return Path(image), release, name, dev_profile
    if not device or not flavour:
        raise WolfError(
            "measure-memory needs --image PATH, or --device malta-be|malta-le with --flavour, "
            "or --host ADDR for a router",
            hint="e.g. invoke measure-memory --device malta-be --flavour mbedtls",
        )
    dev = devices.resolve(device, release)
    if dev.recipe != "malta-initramfs":
        raise WolfError(
            f"{dev.profile} is not a QEMU malta device",
            hint="boot malta-be or malta-le; measure a router with --host ADDR",
        )
    flavour = flavours.get(flavour).name
    path, release = mem.built_image(fs, dev.profile, flavour, release)
    return path, release, flavour, dev.profile


def _progress(out: Console, boots: int, state: str) -> Any:
    def progress(b: mem.BootMemory) -> None:
        t = {x["state"]: x["at"] for x in b.transitions}
        out.print(
            f"  boot {b.boot}/{boots}: MemFree {b.memfree_kb:,} kB, "
            f"MemAvailable {b.meminfo_kb.get('MemAvailable', 0):,} kB "
            f"({state} at {t.get(state, 0):.1f} s, read at {b.seconds_to_measurement:.1f} s)"
        )

    return progress


def _table(out: Console, result: mem.MemoryResult, boots: int) -> None:
    table = Table(title=f"free memory at idle after boot, kB ({boots} boots)")
    for col in ("field", "median", "min", "max"):
        table.add_column(col, justify="left" if col == "field" else "right")
    for name, s in result.summary.items():
        table.add_row(name, f"{s.median:,.0f}", f"{s.min:,}", f"{s.max:,}")
    out.print(table)


def _device_for(board: Board, device: str | None, release: str | None) -> str | None:
    """The catalogue profile of the router: --device checked against its board_name, else
    the entry whose supported_devices name it (the router's release first)."""
    if device:
        dev = devices.resolve(device, release)
        if dev.supported_devices and board.board_name not in dev.supported_devices:
            raise WolfError(
                f"the router is a {board.board_name} ({board.model}), not {dev.profile} "
                f"(boards {', '.join(dev.supported_devices)})",
                hint="check --host and --device, or leave --device out",
            )
        return dev.profile
    found = [d for d in devices.catalogue() if board.board_name in d.supported_devices]
    found.sort(key=lambda d: d.release != (board.release or release))
    return found[0].profile if found else None


def _flavour_of(target: Any, flavour: str | None) -> str | None:
    """--flavour checked against the router's TLS packages, else the one flavour they match."""
    from ..targets.router import packages

    manager, installed = packages.installed(target)
    if flavour:
        check = packages.check(manager, installed, flavour)
        if not check.ok:
            bad = [*(f"missing {g}" for g in check.missing), *check.unwanted]
            raise WolfError(
                f"the router does not run the {check.flavour} flavour ({manager}: "
                f"{', '.join(bad)}; TLS packages: {', '.join(check.tls_packages) or 'none'})",
                hint="give the flavour it runs, or omit --flavour to read it off its packages",
            )
        return check.flavour
    fits = [f for f in packages.rules() if packages.check(manager, installed, f).ok]
    return fits[0] if len(fits) == 1 else None


def _router(
    out: Console, fs: FileStore, host: str, ssh: dict[str, Any], *, device: str | None,
    flavour: str | None, release: str | None, boots: int, idle: float, wait_up: float,
) -> None:  # fmt: skip
    from ..targets.router.ssh import open_target

    target = open_target(host, **ssh)
    try:
        board = read_board(target, hint="measure-memory --host needs an OpenWrt router")
        profile = _device_for(board, device, release)
        flav = _flavour_of(target, flavour)
        out.print(
            f"measuring {target.name}: {board.board_name} ({board.model}), "
            f"{board.release or 'release ?'}, flavour {flav or '?'}; {boots} reboot(s), "
            f"{idle:g} s idle after each"
        )
        if profile is None or flav is None:
            out.print(
                "  note: no catalogue device or no single TLS flavour for this router "
                "(give --device/--flavour): size-report will not show this record"
            )
        with out.status("rebooting…"):
            result = mem.measure_router(
                target, boots=boots, idle=idle, wait_up=wait_up,
                on_boot=_progress(out, boots, "ssh"), known=board,
            )  # fmt: skip
    finally:
        target.close()
    rec, where = mem.store_result(fs, result, release=None, device=profile, flavour=flav)
    _table(out, result, boots)
    out.print(f"kernel {result.kernel_release}, release {rec.release}; record {where}")
