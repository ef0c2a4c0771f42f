"""measure-memory: boot a malta image (or reboot a router) N times, let each boot settle, read
/proc/meminfo and `free`, and store every boot plus median/min/max as one record (kind "memory").

Every reading follows a boot of its own: a fresh QEMU for the VM, `reboot` for a router (its
current boot is never measured, its uptime and history are unknown). Both go through one loop,
`measure_boots`, that takes a boot step: a context manager handing over a settled Target.

Settle rule: S seconds idle after the boot reached its last state (network when the image has
ubus, else shell). Idle means we send nothing to the console. The load average is recorded but
not used to decide: Linux starts it at 0.00 and smooths it over a minute, so right after boot it
reads "idle" while init is still busy, and on an emulated CPU it follows the host's load."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import term
from ..catalogue import releases
from ..errors import WolfError
from ..files.hashing import file_sha256
from ..results.memory import KIND, BootMemory, MemoryResult, Spread, record_key
from ..results.store import FileStore, Record
from ..targets.router.board import Board, board
from ..targets.target import Target
from ..targets.vm.machine import VM, StateUnavailable
from ..targets.vm.qemu import VmSpec, binary
from . import meminfo

if TYPE_CHECKING:
    from ..targets.router.ssh import SSHTarget

DEFAULT_BOOTS = 3
DEFAULT_IDLE = 10.0


def _read(target: Target, command: str) -> str:
    r = target.run(command, timeout=30)
    if r.exit_status != 0:
        raise WolfError(
            f"{target.name}: `{command}` exited {r.exit_status}: {r.output.strip()[:200]}"
        )
    return r.output


def _release(target: Target) -> str | None:
    r = target.run("cat /etc/openwrt_release", timeout=30)
    if r.exit_status != 0:
        return None
    return releases.parse_openwrt_release(r.output).get("DISTRIB_RELEASE")


@dataclass(frozen=True)
class Reading:
    meminfo_kb: dict[str, int]
    free_kb: dict[str, int]
    loadavg: str
    uptime_s: float
    at: float  # time.monotonic() when /proc/meminfo had been read


def read_memory(target: Target) -> Reading:
    """/proc/meminfo first (the figure that matters), then `free`, then diagnostics. Any
    Target: the VM's console here, a router over SSH."""
    info = meminfo.parse_meminfo(_read(target, "cat /proc/meminfo"))
    at = time.monotonic()
    free = meminfo.parse_free(_read(target, "free"))
    loadavg = meminfo.parse_loadavg(_read(target, "cat /proc/loadavg"))
    uptime = meminfo.parse_uptime(_read(target, "cat /proc/uptime"))
    return Reading(info, free, loadavg, uptime, at)


@dataclass
class Booted:
    """What a boot step hands the measurement: a settled, usable target."""

    target: Target
    started_at: float  # time.monotonic() when the boot began (QEMU start, `reboot` sent)
    settled_state: str
    # [{state, at, took}]; a step may complete it when the boot ends (the VM's "off")
    transitions: list[dict[str, Any]] = field(default_factory=list)


BootStep = Callable[[int], AbstractContextManager[Booted]]


def measure_boots(
    step: BootStep,
    *,
    boots: int,
    idle: float,
    on_boot: Callable[[BootMemory], None] | None = None,
) -> tuple[list[BootMemory], str, str | None]:
    """Per boot: ``step(n)`` boots and settles, then ``idle`` seconds with nothing sent, then
    the reading. Returns the boots, the last uname -r and DISTRIB_RELEASE."""
    if boots < 1:
        raise WolfError(f"--boots {boots}: need at least one boot")
    if idle < 0:
        raise WolfError(f"--idle {idle}: seconds must not be negative")
    results: list[BootMemory] = []
    kernel = ""
    release: str | None = None
    with term.progress(f"boot 1/{boots}", total=boots) as bar:
        for n in range(1, boots + 1):
            bar.update(label=f"boot {n}/{boots}: booting, then {idle:g} s idle")
            with step(n) as b:
                time.sleep(idle)
                r = read_memory(b.target)
                kernel = _read(b.target, "uname -r").strip()
                release = _release(b.target)
            boot = BootMemory(
                boot=n,
                meminfo_kb=r.meminfo_kb,
                free_kb=r.free_kb,
                loadavg=r.loadavg,
                uptime_s=r.uptime_s,
                settled_state=b.settled_state,
                transitions=list(b.transitions),
                seconds_to_measurement=round(r.at - b.started_at, 3),
            )
            results.append(boot)
            if on_boot:
                on_boot(boot)
            bar.advance()
    return results, kernel, release


def vm_boots(spec: VmSpec, timeouts: dict[str, float] | None = None) -> BootStep:
    """A fresh QEMU per boot, settled at the network state (the shell when the image has no
    ubus), powered off after the reading."""

    @contextlib.contextmanager
    def step(n: int) -> Iterator[Booted]:
        with VM(spec, timeouts=timeouts) as vm:
            with contextlib.suppress(StateUnavailable):
                vm.transition("network")
            b = Booted(vm, vm.started_at, vm.state)
            yield b
            vm.close()
            b.transitions[:] = [asdict(t) for t in vm.transitions]

    return step


def _spread(values: list[int]) -> Spread:
    return Spread(median=statistics.median(values), min=min(values), max=max(values))


def _summary(results: list[BootMemory]) -> dict[str, Spread]:
    return {
        f: _spread([b.meminfo_kb[f] for b in results])
        for f in meminfo.KEY_FIELDS
        if all(f in b.meminfo_kb for b in results)
    }


def measure(
    spec: VmSpec,
    *,
    boots: int = DEFAULT_BOOTS,
    idle: float = DEFAULT_IDLE,
    timeouts: dict[str, float] | None = None,
    on_boot: Callable[[BootMemory], None] | None = None,
    rootfs_image: Path | None = None,
) -> MemoryResult:
    """Boot the VM ``boots`` times and summarise. With a rootfs disk (``spec.rootfs``, a copy
    of ``rootfs_image``) one boot comes first that is not measured: the first boot after
    flashing formats the overlay and runs the uci-defaults scripts, which a router does once."""
    if spec.rootfs is not None:
        with vm_boots(spec, timeouts)(0):
            pass
    results, kernel, release = measure_boots(
        vm_boots(spec, timeouts), boots=boots, idle=idle, on_boot=on_boot
    )
    return _result(
        results,
        kernel,
        boots=boots,
        idle=idle,
        settle=f"{idle:g} s idle after the network state (ubus wait_for network.interface.lan), "
        "or after the shell prompt when the image has no ubus"
        + ("; one boot before them not measured (the first after flashing)" if spec.rootfs else ""),
        qemu_memory_mb=spec.memory(),
        image=str(spec.kernel.path),
        image_sha256=file_sha256(spec.kernel.path),
        rootfs=str(rootfs_image or spec.rootfs) if spec.rootfs else None,
        arch=spec.kernel.arch,
        openwrt_release=release,
        qemu=binary(spec.kernel),
        root="disk" if spec.rootfs else "initramfs",
        rootfs_sha256=file_sha256(rootfs_image or spec.rootfs) if spec.rootfs else None,
    )


def _result(
    results: list[BootMemory], kernel: str, *, boots: int, idle: float, settle: str, **what: Any
) -> MemoryResult:
    """The boots summarised (medians, the spread), with what was booted (``what``)."""
    summary = _summary(results)
    avail = summary.get("MemAvailable")
    return MemoryResult(
        memfree_kb=summary["MemFree"].median,
        memavailable_kb=avail.median if avail else None,
        memtotal_kb=results[0].meminfo_kb["MemTotal"],
        boots=boots,
        settle=settle,
        idle_s=idle,
        kernel_release=kernel,
        summary=summary,
        per_boot=results,
        **what,
    )


# -- a router over SSH ---------------------------------------------------------------------


def router_boots(target: SSHTarget, *, wait_up: float = 180.0) -> BootStep:
    """`reboot` per boot; settled once SSH answers and the login works again (so the LAN and
    dropbear are up). The connection stays open for the next reboot."""

    @contextlib.contextmanager
    def step(n: int) -> Iterator[Booted]:
        t0 = time.monotonic()
        target.reboot(timeout=wait_up)
        up = round(target.started_at - t0, 3)
        yield Booted(
            target,
            t0,
            "ssh",
            [{"state": "reboot", "at": 0.0, "took": 0.0}, {"state": "ssh", "at": up, "took": up}],
        )

    return step


def measure_router(
    target: SSHTarget,
    *,
    boots: int = DEFAULT_BOOTS,
    idle: float = DEFAULT_IDLE,
    wait_up: float = 180.0,
    on_boot: Callable[[BootMemory], None] | None = None,
    known: Board | None = None,
) -> MemoryResult:
    """Reboot the router ``boots`` times and summarise; the current boot is not measured.
    ``known``: its board, when the caller asked already."""
    b = known or board(target, hint="measure-memory --host needs an OpenWrt router")
    results, kernel, release = measure_boots(
        router_boots(target, wait_up=wait_up), boots=boots, idle=idle, on_boot=on_boot
    )
    return _result(
        results,
        kernel,
        boots=boots,
        idle=idle,
        settle=f"{idle:g} s idle after `reboot`, once SSH answers and the login works again",
        qemu_memory_mb=None,
        image=None,
        image_sha256=None,
        rootfs=None,
        arch=None,
        openwrt_release=release or b.release,
        qemu=None,
        target="router",
        host=target.name,
        board_name=b.board_name,
        model=b.model,
    )


def store_result(
    store: FileStore, result: MemoryResult, *, release: str | None, device: str | None,
    flavour: str | None,
) -> tuple[Record, Path]:  # fmt: skip
    rec = Record(
        kind=KIND,
        key=record_key(result, device, flavour),
        release=release or result.openwrt_release or "unknown",
        device=device,
        flavour=flavour,
        data=asdict(result),
    )
    return rec, store.put(rec)


def _newest_build(store: FileStore, device: str, flavour: str, release: str | None) -> Record:
    from ..catalogue import devices

    dev = devices.resolve(device, release)
    records = store.query("build", device=dev.profile, flavour=flavour, release=release)
    if not records:
        raise WolfError(
            f"no build of {dev.profile} ({flavour}) in the results store {store.root}",
            hint=f"run `invoke build --device {dev.profile} --flavour {flavour}` first, "
            "or pass --image PATH",
        )
    return records[-1]


def _artifact(rec: Record, wanted: str, fallback: Callable[[str], bool], what: str) -> Path:
    """The build record's file named ``wanted`` (else the first ``fallback`` accepts), which
    must still exist. A build record's data["artifacts"] lists files, as paths or as
    {"path": ...} entries."""
    found: list[Path] = []
    for a in rec.data.get("artifacts", []):
        p = a if isinstance(a, str) else a.get("path") or a.get("file") or a.get("name") or ""
        path = Path(str(p))
        if path.name == wanted or fallback(path.name):
            found.append(path)
    if not found:
        raise WolfError(
            f"build record {rec.key} of {rec.device} ({rec.flavour}) lists no {what}",
            hint=f"rebuild with the {what} enabled, or pass --image PATH",
        )
    exact = [p for p in found if p.name == wanted]
    path = (exact or found)[0]
    if not path.is_file():
        raise WolfError(
            f"build record {rec.key} names {path}, which does not exist any more",
            hint="run `invoke build` again, or pass --image PATH",
        )
    return path


def built_image(
    store: FileStore, device: str, flavour: str, release: str | None
) -> tuple[Path, str]:
    """The initramfs kernel of the newest build record for device and flavour, with its release."""
    from ..catalogue import devices

    rec = _newest_build(store, device, flavour, release)
    wanted = str(devices.resolve(device, release).extra.get("initramfs", ""))
    path = _artifact(rec, wanted, lambda n: "initramfs" in n, "initramfs kernel")
    return path, rec.release


def built_disk(
    store: FileStore, device: str, flavour: str, release: str | None
) -> tuple[Path, Path, str]:
    """The kernel without initramfs and the rootfs image it mounts (--root disk) of the newest
    build record for device and flavour, with its release."""
    from ..catalogue import devices

    rec = _newest_build(store, device, flavour, release)
    extra = devices.resolve(device, release).extra
    kernel = _artifact(
        rec, str(extra.get("kernel", "")), lambda n: n.endswith("-vmlinux.elf"), "kernel ELF"
    )
    rootfs = _artifact(
        rec,
        str(extra.get("rootfs_image", "")),
        lambda n: n.endswith(("-rootfs-squashfs.img.gz", "-rootfs-squashfs.img")),
        "squashfs rootfs image",
    )
    return kernel, rootfs, rec.release
