"""Task glue for the targets: `invoke flash` (sysupgrade a router over SSH) and `invoke vm`
(an interactive console on a malta image)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from .router.upgrade import flash as flash


def vm(
    image: str,
    *,
    ssh: bool = False,
    rootfs: str | None = None,
    initrd: str | None = None,
    append: str | None = None,
    memory: int = 0,
) -> None:
    """The `invoke vm` task."""
    from .vm.interactive import session, write_out
    from .vm.kernel import private_disk
    from .vm.machine import VM
    from .vm.qemu import spec_for

    with contextlib.ExitStack() as stack:
        # the session's own disk: its changes last across `reboot`, not past the task
        disk = stack.enter_context(private_disk(Path(rootfs))) if rootfs else None
        spec = spec_for(
            Path(image),
            memory_mb=int(memory),
            rootfs=disk,
            initrd=Path(initrd) if initrd else None,
            append=append,
        )
        with VM(spec, echo=write_out) as machine:
            session(machine, ssh=ssh)
