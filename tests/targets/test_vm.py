"""The VM target against a real kernel: Debian 12's mipsel 4Kc Malta kernel with the stand-in
busybox initramfs (tests/standin/malta_guest.py), booted in QEMU. Oracles are the guest itself
(uname -r, /sys/class/net, md5sum, /proc/meminfo read straight off the console), the host's
/proc (listening sockets, process state) and the facts of -m."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from openwrt_wolf.measure import free_memory
from openwrt_wolf.results.memory import MemoryResult
from openwrt_wolf.targets.vm import qemu
from openwrt_wolf.targets.vm.kernel import inspect_kernel
from openwrt_wolf.targets.vm.machine import VM, BootError, StateUnavailable
from openwrt_wolf.targets.vm.rundir import rundir
from tests.conftest import need_tools, preparing
from tests.standin import malta_guest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.vm


@pytest.fixture(scope="session")
def guest() -> malta_guest.StandIn:
    need_tools("qemu-system-mipsel", "apt-get", "dpkg-deb")
    with preparing("the test guest: Debian's mipsel malta kernel and a busybox initramfs"):
        return malta_guest.build()


def _spec(g: malta_guest.StandIn, extra: str = "", memory_mb: int = 0) -> qemu.VmSpec:
    return qemu.VmSpec(
        kernel=inspect_kernel(g.kernel.vmlinuz),
        initrd=g.initramfs,
        append=f"{g.cmdline} {extra}".strip(),
        memory_mb=memory_mb,
    )


def _running(pid: int) -> bool:
    """Alive and not a zombie, by the host's /proc."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _gone(pid: int, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _listen_addresses(port: int) -> list[str]:
    """Local addresses of TCP sockets listening on ``port`` (state 0A), from /proc/net/tcp."""
    out = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, _remote, st = line.split()[1:4]
        addr, p = local.split(":")
        if int(p, 16) == port and st == "0A":
            out.append(".".join(str(b) for b in reversed(bytes.fromhex(addr))))
    return out


def _raw_meminfo(vm: VM) -> dict[str, int]:
    """/proc/meminfo typed straight onto the console, not through VM.run or our parser."""
    c = vm.console
    start = c.pos
    c.send("cat /proc/meminfo; echo RAW''END\n")
    end = c.expect(r"(?m)^RAWEND$", start=start, deadline=time.monotonic() + 60)
    text = c.text[start : end.start()]
    return {k: int(v) for k, v in re.findall(r"(?m)^(MemTotal|MemFree):\s+(\d+) kB$", text)}


def test_boot_run_put_memory_reboot(guest: malta_guest.StandIn, tmp_path: Path) -> None:
    with VM(_spec(guest)) as vm:
        vm.transition("network")
        assert [t.state for t in vm.transitions] == ["booting", "console", "shell", "network"]
        ats = [t.at for t in vm.transitions]
        assert ats == sorted(ats) and ats[0] > 0
        assert any("Please press Enter to activate this console." in ln for ln in vm.console_log())

        # The kernel that runs is the one Debian's package says it ships.
        assert vm.run("uname -r").output.strip() == guest.kernel.release
        # NIC wiring: OpenWrt's lan is eth0, wan eth1; the guest's own view by MAC address.
        lan, wan = (n for n in qemu.nics())
        assert (lan.role, wan.role) == ("lan", "wan")
        assert vm.run("cat /sys/class/net/eth0/address").output.strip() == lan.mac
        assert vm.run("cat /sys/class/net/eth1/address").output.strip() == wan.mac
        assert "inet 192.168.1.1/24" in vm.run("ip addr show dev eth0").output
        # SSH is forwarded from the host's loopback only.
        assert vm.ssh_port is not None and _listen_addresses(vm.ssh_port) == ["127.0.0.1"]

        # Exit statuses and output as a shell gives them.
        assert vm.run("false").exit_status == 1
        assert vm.run("exit 7").exit_status == 7
        assert vm.run("if then fi").exit_status == 2  # a syntax error still returns
        assert vm.run(". /nonexistent").exit_status != 0  # so does a failing special builtin
        assert vm.run("echo hello; echo oops >&2").output == "hello\noops\n"
        long = "x" * 500  # longer than busybox's line editor takes: goes through a script
        assert vm.run(f"echo {long}").output == long + "\n"

        blob = tmp_path / "blob"
        data = os.urandom(700)
        blob.write_bytes(data)
        vm.put(blob, "/tmp/blob")
        assert vm.run("md5sum /tmp/blob").output.split()[0] == hashlib.md5(data).hexdigest()

        # Our reading against the guest's /proc/meminfo read independently, and against -m.
        reading = free_memory.read_memory(vm)
        raw = _raw_meminfo(vm)
        assert reading.meminfo_kb["MemTotal"] == raw["MemTotal"] == reading.free_kb["total"]
        assert abs(reading.meminfo_kb["MemFree"] - raw["MemFree"]) < 0.02 * raw["MemTotal"]
        assert abs(reading.free_kb["free"] - raw["MemFree"]) < 0.02 * raw["MemTotal"]
        assert 0.8 * 128 * 1024 < raw["MemTotal"] <= 128 * 1024
        assert 0.5 * raw["MemTotal"] < raw["MemFree"] < raw["MemTotal"]

        # The stand-in has no SSH server: a clear error, and the VM stays up.
        with pytest.raises(StateUnavailable, match="no SSH server"):
            vm.transition("ssh")
        assert vm.state == "network" and vm.run("true").exit_status == 0

        # Reboot: a new QEMU, back in the same state, /tmp (tmpfs) fresh.
        vm.run("touch /tmp/before-reboot")
        first = vm.pid
        assert first is not None
        vm.reboot()
        assert vm.state == "network" and vm.pid != first and _gone(first)
        assert vm.run("test -e /tmp/before-reboot").exit_status == 1
        second = vm.pid
    assert second is not None and _gone(second)
    assert vm.state == "off" and vm.transitions[-1].state == "off"


def test_measure_memory_cli_records_each_boot(guest: malta_guest.StandIn, tmp_path: Path) -> None:
    store = tmp_path / "results"
    r = subprocess.run(
        [str(ROOT / "wolf"), "measure-memory", "--image", str(guest.kernel.vmlinuz),
         "--initrd", str(guest.initramfs), "--append", guest.cmdline, "--device", "malta-le",
         "--flavour", "mbedtls", "--boots", "2", "--idle", "1", "--memory", "64",
         "--store", str(store)],
        capture_output=True, text=True, cwd=ROOT, timeout=400,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    files = list((store / "memory").glob("*.json"))
    assert len(files) == 1
    rec = json.loads(files[0].read_text())
    assert (rec["kind"], rec["device"], rec["flavour"]) == ("memory", "malta-le", "mbedtls")
    d = MemoryResult.from_dict(rec["data"])
    assert d.boots == 2 and len(d.per_boot) == 2 and d.qemu_memory_mb == 64
    assert d.kernel_release == guest.kernel.release and d.arch == "mipsel"
    assert d.image_sha256 == hashlib.sha256(guest.kernel.vmlinuz.read_bytes()).hexdigest()
    for b in d.per_boot:
        # -m 64: the guest sees at most 64 MiB, less what the kernel keeps for itself
        assert 0.7 * 64 * 1024 < b.meminfo_kb["MemTotal"] <= 64 * 1024
        assert b.free_kb["total"] == b.meminfo_kb["MemTotal"]
        assert b.settled_state == "network"
        assert [t["state"] for t in b.transitions][-1] == "off"
    s = d.summary["MemFree"]
    assert s.min <= s.median <= s.max and d.memfree_kb == s.median
    assert {"MemTotal", "MemAvailable", "Buffers", "Cached", "Slab"} <= set(d.summary)
    assert "boot 2/2: MemFree" in r.stdout


def test_guest_panic_names_the_state(guest: malta_guest.StandIn) -> None:
    vm = VM(_spec(guest, "wolf.test=panic"))
    with pytest.raises(BootError) as e:
        vm.transition("shell")
    assert e.value.state == "console"
    assert "Kernel panic" in str(e.value)
    assert any("init exits on purpose" in ln for ln in e.value.tail)
    assert vm.last_pid is not None and _gone(vm.last_pid)


def test_stalled_console_times_out_in_its_state(guest: malta_guest.StandIn) -> None:
    # The stall comes after the console line, so the short timeout is only ever spent in
    # 'shell', however slow the host is at booting the kernel.
    vm = VM(_spec(guest, "wolf.test=stall"), timeouts={"shell": 5})
    with pytest.raises(BootError) as e:
        vm.transition("network")
    assert e.value.state == "shell" and "within 5 s" in str(e.value)
    assert [t.state for t in vm.transitions] == ["booting", "console"]
    assert 0 < len(e.value.tail) <= 30
    assert any("console stalls on purpose" in ln for ln in e.value.tail)
    assert "last" in e.value.details() and "stalls on purpose" in e.value.details()
    assert vm.last_pid is not None and _gone(vm.last_pid)


_CHILD = """
import sys, time
from tests.standin import malta_guest
from openwrt_wolf.targets.vm.kernel import inspect_kernel
from openwrt_wolf.targets.vm.machine import VM
from openwrt_wolf.targets.vm.qemu import VmSpec
g = malta_guest.build()
vm = VM(VmSpec(kernel=inspect_kernel(g.kernel.vmlinuz), initrd=g.initramfs, append=g.cmdline))
vm.transition("booting")
print(vm.pid, flush=True)
time.sleep(600)  # no finally here: the reaper must clean up on its own
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_qemu_outlives_a_killed_task(guest: malta_guest.StandIn, sig: signal.Signals) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        pid = int(child.stdout.readline())
        assert _running(pid)
        assert "qemu-system-mips" in Path(f"/proc/{pid}/cmdline").read_text()
        child.send_signal(sig)
        child.wait(timeout=30)
        assert _gone(pid), f"QEMU {pid} outlived its task after {sig.name}"
        left = list(Path(tempfile.gettempdir()).glob(f"wolf-vm-{child.pid}-*"))
        if sig == signal.SIGKILL:  # nothing ran in the child: the next VM's start sweeps it
            assert len(left) == 1
            shutil.rmtree(rundir())
            left = list(Path(tempfile.gettempdir()).glob(f"wolf-vm-{child.pid}-*"))
        assert left == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, comm) of the processes whose parent is ``pid``, from /proc."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        if int(text.rsplit(")", 1)[1].split()[1]) == pid:
            out.append((int(stat.parent.name), comm))
    return out


def _read_until(stream: subprocess.Popen[bytes], needle: bytes, seen: bytearray) -> None:
    assert stream.stdout is not None
    deadline = time.monotonic() + 240
    while needle not in seen:
        assert time.monotonic() < deadline, f"no {needle!r} in {bytes(seen[-2000:])!r}"
        chunk = os.read(stream.stdout.fileno(), 4096)
        assert chunk, f"invoke vm ended before {needle!r}: {bytes(seen[-2000:])!r}"
        seen += chunk


def test_invoke_vm_ssh_and_console(tmp_path: Path) -> None:
    """`invoke vm --ssh` on the stand-in with Debian's dropbear: the ssh state, a real SSH login
    through the forwarded port, the console for a person, Ctrl-] and no QEMU left."""
    need_tools("qemu-system-mipsel", "apt-get", "dpkg-deb", "ssh")
    g = malta_guest.build(ssh=True)
    p = subprocess.Popen(
        [str(ROOT / "wolf"), "vm", "--image", str(g.kernel.vmlinuz), "--initrd",
         str(g.initramfs), "--append", g.cmdline, "--ssh"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        seen = bytearray()
        _read_until(p, b"(scp needs -O)", seen)
        m = re.search(rb"ssh -p (\d+) .*root@127\.0\.0\.1", seen)
        assert m, bytes(seen[-500:])
        qemus = [pid for pid, comm in _children(p.pid) if comm.startswith("qemu-system")]
        assert len(qemus) == 1
        r = subprocess.run(
            ["ssh", "-p", m.group(1).decode(), "-o", "StrictHostKeyChecking=no",
             "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
             "-o", "ConnectTimeout=30", "root@127.0.0.1", "cat /sys/class/net/eth0/address"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == qemu.nics()[0].mac  # the lan NIC, as forwarded
        assert p.stdin is not None
        p.stdin.write(b"echo typed-by-a-person-$((6*7))\n")
        p.stdin.flush()
        _read_until(p, b"typed-by-a-person-42", seen)
        p.stdin.write(b"\x1d")  # Ctrl-]
        p.stdin.flush()
        assert p.wait(timeout=60) == 0
        assert _gone(qemus[0])
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_taken_ssh_port_is_replaced(guest: malta_guest.StandIn) -> None:
    """QEMU cannot forward from a port someone else holds; the VM picks another one."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        spec = qemu.VmSpec(**{**_spec(guest).__dict__, "ssh_port": port})
        with VM(spec) as vm:
            vm.transition("booting")
            assert vm.ssh_port not in (None, port)
            assert vm.ssh_port is not None and _listen_addresses(vm.ssh_port) == ["127.0.0.1"]
        assert vm.last_pid is not None and _gone(vm.last_pid)


@pytest.fixture(scope="session")
def virt_guest() -> malta_guest.StandIn:
    need_tools("qemu-system-aarch64", "apt-get", "dpkg-deb")
    with preparing("the arm64 test guest: Debian's arm64 kernel and a busybox initramfs"):
        return malta_guest.build(machine="virt")


def test_virt_machine_boots_an_arm64_image(virt_guest: malta_guest.StandIn) -> None:
    """armsr/armv8's machine (issue 34): an AArch64 Image is read by its header's magic and
    booted on QEMU's virt machine with -cpu cortex-a76; the same states, NICs (virtio-net, lan
    first) and memory reading as on malta, against the guest's own uname, /sys and meminfo."""
    spec = _spec(virt_guest, memory_mb=256)
    assert (spec.kernel.machine, spec.kernel.arch) == ("virt", "aarch64")
    argv = qemu.command(spec, Path("/nonexistent.sock"))
    assert argv[0] == "qemu-system-aarch64" and argv[argv.index("-M") + 1] == "virt"
    assert argv[argv.index("-cpu") + 1] == "cortex-a76"
    with VM(spec) as vm:
        vm.transition("network")
        assert [t.state for t in vm.transitions] == ["booting", "console", "shell", "network"]
        assert vm.run("uname -m").output.strip() == "aarch64"
        assert vm.run("uname -r").output.strip() == virt_guest.kernel.release
        # the CPU QEMU gave it: a Cortex-A76 (MIDR part 0xd0b) with the AES extension
        cpuinfo = vm.run("cat /proc/cpuinfo").output
        assert re.search(r"(?m)^CPU part\s*:\s*0xd0b$", cpuinfo), cpuinfo[:400]
        assert re.search(r"(?m)^Features\s*:.*\baes\b", cpuinfo)
        lan, wan = qemu.nics()
        assert vm.run("cat /sys/class/net/eth0/address").output.strip() == lan.mac
        assert vm.run("cat /sys/class/net/eth1/address").output.strip() == wan.mac
        assert "inet 192.168.1.1/24" in vm.run("ip addr show dev eth0").output
        reading = free_memory.read_memory(vm)
        raw = _raw_meminfo(vm)
        assert reading.meminfo_kb["MemTotal"] == raw["MemTotal"] == reading.free_kb["total"]
        assert 0.7 * 256 * 1024 < raw["MemTotal"] <= 256 * 1024
        assert 0.5 * raw["MemTotal"] < raw["MemFree"] < raw["MemTotal"]
        pid = vm.pid
    assert pid is not None and _gone(pid)
