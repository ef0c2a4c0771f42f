"""perf/target_place.py's TargetPlace on the stand-in router (real OpenSSH sshd,
tests/sshd_router.py): a program that outlives its timeout is ended, servers are stopped and
uploads removed by close(); and what a real OpenWrt router answers to the platform probe maps
to the lab's mips_24kc, refused with a glibc toolchain. Oracles: /proc here (the stand-in's
processes), an `ls` over OpenSSH's client, and the probe answers written out by hand."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from openwrt_wolf.errors import CommandError, WolfError
from openwrt_wolf.footprint import spec, toolchain
from openwrt_wolf.footprint.toolchain import Toolchain
from openwrt_wolf.perf import open_place
from openwrt_wolf.perf.place import QemuPlace
from openwrt_wolf.perf.qemu_user import find
from openwrt_wolf.perf.target_place import TargetPlace, parse_probe
from openwrt_wolf.targets.router.login import Login
from openwrt_wolf.targets.router.ssh import SSHTarget
from tests import sshd_router
from tests.conftest import need_tools
from tests.perf.test_router import _ssh
from tests.sshd_router import FakeRouter

router_sftp = sshd_router.router_sftp
router = sshd_router.router


def _login(r: FakeRouter) -> Login:
    return Login(host=r.host, port=r.port, user=r.user, key=r.userkey, known_hosts=r.known_hosts)


def _procs(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``marker``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            out.append(int(d.name))
    return out


def _none_left(marker: str) -> bool:
    deadline = time.monotonic() + 5
    while _procs(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _procs(marker)


def test_timeout_ends_a_silent_program(router: FakeRouter) -> None:
    """`sleep` prints nothing, so no SIGPIPE would end it when the session goes: the place
    must kill it itself."""
    ssh = SSHTarget(_login(router))
    place = TargetPlace(ssh, label="router", emulated=False, address=router.host)
    marker = f"{os.getpid()}.25"
    try:
        with pytest.raises(CommandError, match="did not finish within 2 s"):
            place.run("sleep", [marker], {}, timeout=2)
        assert _none_left(marker)
    finally:
        place.close()
        ssh.close()


def test_close_stops_servers_and_removes_uploads(router: FakeRouter, tmp_path: Path) -> None:
    ssh = SSHTarget(_login(router))
    place = TargetPlace(ssh, label="router", emulated=False, address=router.host)
    marker = f"{os.getpid()}.75"
    try:
        f = tmp_path / "payload.bin"
        f.write_bytes(os.urandom(4096))
        remote = place.put(f)
        assert remote == f"{place.dir}/payload.bin"
        assert _ssh(router, f"wc -c < {remote}").stdout.strip() == "4096"
        server = place.spawn("sleep", [marker], {})
        deadline = time.monotonic() + 10
        while not _procs(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _procs(marker), "the server never started"
        assert server.pidfile.startswith(place.dir)
        assert place.find("sh") is not None and place.find("no-such-program-here") is None
        ran = place.run("sh", ["-c", "echo out; echo err >&2"], {"X": "1"}, timeout=30)
        assert ran.output.split() == ["out", "err"]
        with pytest.raises(CommandError, match="exited with 3"):
            place.run("sh", ["-c", "exit 3"], {}, timeout=30)
    finally:
        place.close()
        ssh.close()
    assert _none_left(marker)
    listing = _ssh(router, f"ls -d {place.dir}")
    assert listing.returncode != 0 and "No such file" in listing.stderr


# What OpenWrt 25.12 on a TL-WR902AC v1 (ath79, mips_24kc) answers to the probe: MIPS big-endian
# ELF (EI_DATA 2), musl's soft-float loader, the board name in /tmp/sysinfo/model.
OPENWRT_ANSWER = """mips
OpenWrt
loaders: /lib/ld-musl-mips-sf.so.1
model: TP-Link TL-WR902AC v1
elf: 127 69 76 70 1 2
"""


def _debian_mips_toolchain() -> Toolchain:
    return Toolchain(prefix="/usr/bin/mips-linux-gnu-", version="12.2.0", target="mips-linux-gnu",
                     soft_float=False, origin="debian", gcc_sha256="0" * 64,
                     sysroot="/usr/mips-linux-gnu")  # fmt: skip


def test_openwrt_router_is_mips_24kc_musl() -> None:
    p = parse_probe(OPENWRT_ANSWER)
    assert (p.machine, p.endian, p.libc) == ("mips", "big", "musl")
    assert p.loader == "/lib/ld-musl-mips-sf.so.1" and p.model == "TP-Link TL-WR902AC v1"
    assert open_place.lab_arch(p, "router") == "mips_24kc"


def test_glibc_programs_refused_for_a_musl_router(router: FakeRouter) -> None:
    ssh = SSHTarget(_login(router))
    place = TargetPlace(ssh, label="router", emulated=False, address=router.host)
    try:
        place.platform = parse_probe(OPENWRT_ANSWER)  # a real router's answer
        with pytest.raises(WolfError) as e:
            open_place.check_libc(place, _debian_mips_toolchain())
        assert "musl (/lib/ld-musl-mips-sf.so.1)" in e.value.message
        assert "--toolchain" in (e.value.hint or "")
    finally:
        place.close()
        ssh.close()


def test_unknown_architecture_is_one_line() -> None:
    p = parse_probe(OPENWRT_ANSWER.replace("mips\n", "riscv64\n", 1).replace(" 1 2", " 2 1"))
    assert (p.machine, p.endian) == ("riscv64", "little")
    with pytest.raises(WolfError, match="runs riscv64 little-endian"):
        open_place.lab_arch(p, "router")


def test_an_armsr_guest_is_the_lab_s_aarch64() -> None:
    """armsr/armv8 (aarch64_generic) in the virt VM: the lab's AArch64 build, whose flags name
    no CPU (-Os -pipe), so its programs run on any ARMv8."""
    p = parse_probe(OPENWRT_ANSWER.replace("mips\n", "aarch64\n", 1).replace(" 1 2", " 2 1"))
    assert open_place.lab_arch(p, "vm") == "aarch64_cortex-a76"
    from openwrt_wolf.footprint import spec

    assert not any(
        f.startswith(("-mcpu", "-march")) for f in spec.get_arch("aarch64_cortex-a76").cflags
    )


def test_qemu_place_runs_and_stops_a_server(tmp_path: Path) -> None:
    """QemuPlace: a MIPS program under qemu-user; spawn/stop a server by its process group."""
    need_tools("mips-linux-gnu-gcc", "qemu-mips-static", "/usr/mips-linux-gnu/include/stdio.h")
    src = tmp_path / "wait.c"
    src.write_text('#include <stdio.h>\n#include <unistd.h>\n'
                   'int main(int c, char **v) { printf("up %s\\n", v[1]); fflush(stdout);\n'
                   '  if (c > 2) sleep(600); return 0; }\n')  # fmt: skip
    exe = tmp_path / "wait"
    subprocess.run(["mips-linux-gnu-gcc", "-o", str(exe), str(src)], check=True, timeout=120)
    arch = spec.get_arch("mips_24kc")
    place = QemuPlace(find(arch, toolchain.find(arch), "24Kf"))
    assert place.put(exe) == str(exe)  # nothing is copied
    assert place.run(str(exe), ["once"], {}, timeout=60).output == "up once\n"
    marker = f"{os.getpid()}-server"
    server = place.spawn(str(exe), [marker, "stay"], {})
    deadline = time.monotonic() + 30
    while not _procs(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _procs(marker)
    place.close()
    assert server.stopped and _none_left(marker)
