"""`invoke measure-memory`: argument checks, the boots with progress, the stored record, a table.
The VM (--image, or --device malta-* --flavour) or a router over SSH (--host), never both."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from .. import paths, term
from ..catalogue import devices, flavours
from ..errors import WolfError
from ..host import hosttools
from ..results.store import FileStore
from ..targets.vm.kernel import inspect_kernel, private_disk
from ..targets.vm.qemu import spec_for
from . import free_memory as mem
from . import router, show

ROOTS = ("initramfs", "disk")  # --root: where the VM's root filesystem lives


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
    root: str | None = None,
) -> None:
    ssh = {k: v for k, v in (ssh or {}).items() if v not in (None, False)}
    vm_only = {"--image": image, "--memory": memory, "--rootfs": rootfs, "--initrd": initrd,
               "--append": append, "--root": root}  # fmt: skip
    if root not in (None, *ROOTS):
        raise WolfError(f"--root {root!r}: not a root", hint=" or ".join(ROOTS))
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
        router.measure(out, fs, host, ssh, device=device, flavour=flavour, release=release,
                       boots=boots, idle=idle, wait_up=wait_up)  # fmt: skip
        return
    path, disk, release, flavour, dev_profile = _vm_image(
        fs, image, device, flavour, release, Path(rootfs) if rootfs else None, root
    )
    inspect_kernel(path)  # before a disk is made of the rootfs image
    hosttools.ensure(["qemu-system-mips", "qemu-system-mipsel"])
    with contextlib.ExitStack() as stack:
        spec = spec_for(
            path,
            memory_mb=memory,
            rootfs=stack.enter_context(private_disk(disk)) if disk else None,
            initrd=Path(initrd) if initrd else None,
            append=append,
        )
        first = f", {disk.name} as its disk, one boot first" if disk else ""
        out.print(
            f"measuring {path.name}{first}: {boots} boot(s) at -m {spec.memory()} MB, "
            f"{idle:g} s idle after boot"
        )
        with out.status("booting…"):
            result = mem.measure(
                spec, boots=boots, idle=idle, on_boot=show.progress(out, boots, "shell"),
                rootfs_image=disk,
            )  # fmt: skip
    rec, where = mem.store_result(fs, result, release=release, device=dev_profile, flavour=flavour)
    show.table(out, result, boots)
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


def _vm_image(
    fs: FileStore,
    image: str | None,
    device: str | None,
    flavour: str | None,
    release: str | None,
    rootfs: Path | None,
    root: str | None,
) -> tuple[Path, Path | None, str | None, str | None, str | None]:
    """The malta kernel to boot and its rootfs disk image (None: the initramfs): --image (with
    --rootfs), or the newest build of --device with --flavour (--root disk: its vmlinux.elf and
    rootfs-squashfs.img.gz). Returns them with the release, flavour and device profile the
    record gets."""
    if root == "disk" and image is not None and rootfs is None:
        raise WolfError("--root disk with --image needs --rootfs PATH (the image's rootfs)",
                        hint="or drop --image to take both from --device's build")  # fmt: skip
    if root == "initramfs" and rootfs is not None:
        raise WolfError("--root initramfs and --rootfs: give one or the other")
    if image is not None:
        name = flavours.get(flavour).name if flavour else None
        dev_profile = devices.resolve(device, release).profile if device else None
        return Path(image), rootfs, release, name, dev_profile
    if not device or not flavour:
        raise WolfError(
            "measure-memory needs --image PATH, or --device malta-be|malta-le|armsr-armv8 with "
            "--flavour, "
            "or --host ADDR for a router",
            hint="e.g. invoke measure-memory --device malta-be --flavour mbedtls",
        )
    dev = devices.resolve(device, release)
    if not dev.boots_in_vm:
        raise WolfError(
            f"{dev.profile} is not a device QEMU boots",
            hint="boot malta-be, malta-le or armsr-armv8; measure a router with --host ADDR",
        )
    flavour = flavours.get(flavour).name
    if root == "disk" or rootfs is not None:
        kernel, built_rootfs, release = mem.built_disk(fs, dev.profile, flavour, release)
        return kernel, rootfs or built_rootfs, release, flavour, dev.profile
    path, release = mem.built_image(fs, dev.profile, flavour, release)
    return path, None, release, flavour, dev.profile
