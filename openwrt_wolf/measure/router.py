"""Free memory of a router over SSH: its catalogue device and TLS flavour read off the
router, N reboots, the record stored."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from ..catalogue import devices
from ..errors import WolfError
from ..results.store import FileStore
from ..targets.router.board import Board
from ..targets.router.board import board as read_board
from . import free_memory as mem
from . import show


def device_for(board: Board, device: str | None, release: str | None) -> str | None:
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


def flavour_of(target: Any, flavour: str | None) -> str | None:
    """--flavour checked against the router's TLS packages, else the one flavour they match."""
    from ..targets.router import installed as packages

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


def measure(
    out: Console, fs: FileStore, host: str, ssh: dict[str, Any], *, device: str | None,
    flavour: str | None, release: str | None, boots: int, idle: float, wait_up: float,
) -> None:  # fmt: skip
    """Free memory at idle after each of N reboots of a router over SSH, stored as a memory
    record (measure-memory --host, and a router's queue job)."""
    from ..targets.router.ssh import open_target

    if device and devices.resolve(device, release).boots_in_vm:
        raise WolfError(
            f"measure-memory: --host measures a router, --device {device} the QEMU VM; "
            "give one or the other",
            hint="with --host, --device names the router's device (or leave it out)",
        )
    target = open_target(host, **ssh)
    try:
        board = read_board(target, hint="measure-memory --host needs an OpenWrt router")
        profile = device_for(board, device, release)
        flav = flavour_of(target, flavour)
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
                on_boot=show.progress(out, boots, "ssh"), known=board,
            )  # fmt: skip
    finally:
        target.close()
    rec, where = mem.store_result(fs, result, release=None, device=profile, flavour=flav)
    show.table(out, result, boots)
    out.print(f"kernel {result.kernel_release}, release {rec.release}; record {where}")
