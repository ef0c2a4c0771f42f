"""`invoke vm`: the guest's serial console on the user's terminal. Ctrl-] ends the session;
QEMU is killed on exit, on Ctrl-C and on any error."""

from __future__ import annotations

import contextlib
import os
import select
import sys
import termios
import tty

from .machine import VM

ESCAPE = b"\x1d"  # Ctrl-], as telnet


def write_out(data: bytes) -> None:
    """The VM's echo callback: console bytes straight to the terminal."""
    os.write(sys.stdout.fileno(), data)


def session(vm: VM, *, ssh: bool) -> None:
    """Boot (to the ssh state with ``ssh``, else just start) and hand the console over."""
    print(f"openwrt-wolf vm: {vm.spec.kernel.path} on {vm.name}; Ctrl-] quits", flush=True)
    vm.transition("ssh" if ssh else "booting")
    if ssh:
        print(
            f"\r\nSSH: ssh -p {vm.ssh_port} -o StrictHostKeyChecking=no "
            f"-o UserKnownHostsFile=/dev/null root@127.0.0.1   (scp needs -O)\r",
            flush=True,
        )
    stdin = sys.stdin.fileno()
    saved = termios.tcgetattr(stdin) if os.isatty(stdin) else None
    try:
        if saved is not None:
            tty.setraw(stdin)  # every key goes to the guest, Ctrl-C too
        while not vm.console.closed:
            ready, _, _ = select.select([stdin], [], [], 0.2)
            if not ready:
                continue
            data = os.read(stdin, 1024)
            if not data or ESCAPE in data:
                break
            vm.console.send_bytes(data.replace(b"\n", b"\r") if saved is None else data)
    finally:
        if saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
    if vm.console.closed:
        print("\nopenwrt-wolf vm: the guest powered off", flush=True)
