"""perf/place.py's serving, on both kinds of place: a real server (tests/perf/serve_probe.c)
served by TargetPlace on the stand-in router (real OpenSSH sshd, tests/sshd_router.py: the
program runs on this machine behind a remote shell) and by QemuPlace under qemu-user (MIPS).
The same checks for both: it listens once serve returns, its output, its CPU time grows by
the CPU it burned per connection, a signal reaches it (it writes a mark to a file the place
reads back), the stop's SIGTERM reaches it (it writes "exit"), nothing of it runs afterwards;
a server that exits before listening, and a client's exit status with check=False.

Oracles: connections from this machine, the program's own file, /proc here (its processes),
`ls` over OpenSSH's client (the upload directory gone after close())."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from openwrt_wolf.errors import CommandError, WolfError
from openwrt_wolf.footprint import spec, toolchain
from openwrt_wolf.perf.place import Place, QemuPlace
from openwrt_wolf.perf.ports import free_port, listening
from openwrt_wolf.perf.qemu_user import find
from openwrt_wolf.perf.target_place import TargetPlace
from openwrt_wolf.targets.router.ssh import SSHTarget
from tests import sshd_router
from tests.conftest import need_tools
from tests.perf.test_place import _login, _none_left
from tests.perf.test_router import _ssh
from tests.sshd_router import FakeRouter

router_sftp = sshd_router.router_sftp
router = sshd_router.router
SOURCE = Path(__file__).resolve().parent / "serve_probe.c"
BURN = 0.2  # CPU seconds serve_probe.c burns per connection


def _until(what: str, get: Callable[[], str], seconds: float = 15) -> str:
    """What get() says once it says ``what``, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        got = get()
        if got == what or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def _exercise(place: Place, exe: str) -> None:
    marker = f"{os.getpid()}-{time.monotonic_ns()}"
    marks = f"{place.scratch('serve')}/marks.txt"
    port = free_port()
    with place.serve(exe, [str(port), marker], {"MARKS": marks}, port, 60) as served:
        assert listening(place.address, port)
        assert served.output() == f"listening on {port}\n"
        cpu0 = served.cpu_seconds()
        for _ in range(3):
            with socket.create_connection((place.address, port), timeout=30) as c:
                assert c.recv(1) == b""  # closed once its CPU is burned
        used = served.cpu_seconds() - cpu0
        assert 3 * BURN - 0.05 <= used < 3 * BURN + 2  # ticks of 10 ms; qemu translates too
        served.signal(signal.SIGUSR2)
        assert _until("mark 1\n", lambda: place.read(marks)) == "mark 1\n"
        served.signal(signal.SIGUSR2)
        assert _until("mark 1\nmark 2\n", lambda: place.read(marks)) == "mark 1\nmark 2\n"
    assert place.read(marks) == "mark 1\nmark 2\nexit\n"  # SIGTERM, and it ended on its own
    assert not listening(place.address, port)
    assert _none_left(marker)
    with pytest.raises(WolfError):
        served.signal(signal.SIGUSR2)

    no_port = pytest.raises(WolfError, match=f"exited .*before listening on {port}")
    with no_port, place.serve(exe, [], {}, port, 60):
        pass
    r = place.run(exe, [], {}, timeout=60, check=False)
    assert (r.status, r.output) == (2, "usage: serve_probe PORT\n")
    with pytest.raises(CommandError, match="exit"):
        place.run(exe, [], {}, timeout=60)
    assert place.read(f"{place.scratch('serve')}/absent") == ""
    with pytest.raises(WolfError, match="scratch"):
        place.scratch("../elsewhere")


def test_a_router_serves_a_real_server(router: FakeRouter, tmp_path: Path) -> None:
    need_tools("gcc", "ssh")
    exe = tmp_path / "serve_probe"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(SOURCE)], check=True, timeout=120)
    ssh = SSHTarget(_login(router))
    place = TargetPlace(ssh, label="router", emulated=False, address=router.host)
    try:
        assert place.host_address == "127.0.0.1"  # SSH_CLIENT there: where we came from
        _exercise(place, place.put(exe))
        # a server that neither listens nor exits: stopped after the wait, nothing left
        marker = f"{os.getpid()}.600"
        silent = pytest.raises(WolfError, match="nothing listens")
        with silent, place.serve("sleep", [marker], {}, free_port(), 1):
            pass
        assert _none_left(marker)
        assert not _ssh(router, f"ls {place.dir}/.*.pid").stdout.strip()  # no pidfile left
    finally:
        place.close()
        ssh.close()
    listing = _ssh(router, f"ls -d {place.dir}")
    assert listing.returncode != 0 and "No such file" in listing.stderr


def test_qemu_user_serves_a_real_server(tmp_path: Path) -> None:
    need_tools("mips-linux-gnu-gcc", "qemu-mips-static", "/usr/mips-linux-gnu/include/stdio.h")
    exe = tmp_path / "serve_probe"
    subprocess.run(["mips-linux-gnu-gcc", "-O1", "-o", str(exe), str(SOURCE)], check=True,
                   timeout=120)  # fmt: skip
    arch = spec.get_arch("mips_24kc")
    place = QemuPlace(find(arch, toolchain.find(arch), "24Kf"))
    try:
        assert place.host_address == "127.0.0.1"
        _exercise(place, place.put(exe))
        scratch = Path(place.scratch("serve")).parent
        assert scratch.is_dir()
    finally:
        place.close()
    assert not scratch.exists()  # its own temporary directory, removed by close()
