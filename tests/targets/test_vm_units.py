"""VM pieces that need no boot: the initramfs writer (checked with the host's cpio), the kernel
header check (checked with readelf), meminfo/free parsing (checked against the host's own
/proc/meminfo), the QEMU command line and the CLI's error lines."""

from __future__ import annotations

import gzip
import os
import re
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from openwrt_wolf import paths
from openwrt_wolf.errors import WolfError
from openwrt_wolf.measure import free_memory, meminfo
from openwrt_wolf.results.store import FileStore, Record
from openwrt_wolf.targets.vm import machine, qemu
from openwrt_wolf.targets.vm.initramfs import Archive
from openwrt_wolf.targets.vm.kernel import inspect_kernel
from tests.conftest import need_tools

ROOT = Path(__file__).resolve().parents[2]


def test_initramfs_reads_back_with_cpio(tmp_path: Path) -> None:
    need_tools("cpio")
    payload = os.urandom(1001)  # not a multiple of 4: exercises the data padding
    a = Archive()
    a.dirs("bin", "etc")
    a.file("bin/tool", payload, mode=0o755)
    a.file("etc/motd", "hello\n")
    a.symlink("bin/sh", "tool")
    a.chardev("dev-console", 5, 1)
    out = a.write(tmp_path / "x.cpio.gz")
    raw = gzip.decompress(out.read_bytes())
    listing = subprocess.run(
        ["cpio", "-itv", "--quiet"], input=raw, capture_output=True, check=True
    ).stdout.decode()
    assert re.search(r"^crw-------.*\b5,\s+1\b.*dev-console$", listing, re.MULTILINE), listing
    assert re.search(r"^lrwxrwxrwx.*bin/sh -> tool$", listing, re.MULTILINE), listing
    dest = tmp_path / "x"
    dest.mkdir()
    subprocess.run(
        ["cpio", "-id", "--quiet", "--no-absolute-filenames", "--nonmatching", "dev-console"],
        input=raw, cwd=dest, check=True,
    )  # fmt: skip
    assert (dest / "bin/tool").read_bytes() == payload
    assert stat.S_IMODE((dest / "bin/tool").stat().st_mode) == 0o755
    assert (dest / "etc/motd").read_text() == "hello\n"
    assert os.readlink(dest / "bin/sh") == "tool"


def test_initramfs_rejects_orphans_and_duplicates() -> None:
    a = Archive()
    with pytest.raises(WolfError, match="before its directory"):
        a.file("usr/bin/x", b"")
    a.dir("usr")
    with pytest.raises(WolfError, match="added twice"):
        a.dir("usr")


def _readelf_endian(path: Path) -> str:
    out = subprocess.run(["readelf", "-h", path], capture_output=True, text=True, check=True)
    m = re.search(r"Data:\s+2's complement, (little|big) endian", out.stdout)
    assert m, out.stdout
    return m.group(1)


def test_big_endian_mips_elf_picks_qemu_system_mips(tmp_path: Path) -> None:
    need_tools("mips-linux-gnu-gcc", "readelf")
    src = tmp_path / "start.S"
    src.write_text(".globl __start\n__start:\n  b __start\n  nop\n")
    elf = tmp_path / "tiny.elf"
    subprocess.run(
        ["mips-linux-gnu-gcc", "-nostdlib", "-static", "-no-pie", "-o", elf, src], check=True
    )
    k = inspect_kernel(elf)
    assert k.endian == _readelf_endian(elf) == "big"
    assert qemu.binary(k) == "qemu-system-mips"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"#!/bin/sh\necho not a kernel\n", "not an ELF file"),
        (b"\x1f\x8b\x08\x00" + b"\0" * 60, "a gzip file"),
        (b"\x27\x05\x19\x56" + b"\0" * 60, "U-Boot uImage"),
    ],
)
def test_not_a_kernel_is_one_clear_line(tmp_path: Path, content: bytes, message: str) -> None:
    f = tmp_path / "openwrt-malta-be-vmlinux-initramfs.elf"
    f.write_bytes(content)
    with pytest.raises(WolfError, match=message) as e:
        inspect_kernel(f)
    assert "\n" not in str(e.value) and str(f) in str(e.value)


def test_host_elf_is_not_a_malta_kernel() -> None:
    host = Path(sys.executable).resolve()
    with pytest.raises(WolfError, match=r"not a 32-bit ELF|not MIPS"):
        inspect_kernel(host)


def test_cli_rejects_a_non_kernel_before_qemu_starts(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("hello\n")
    r = subprocess.run(
        [str(ROOT / "wolf"), "measure-memory", "--image", str(f), "--store", str(tmp_path / "s")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines == [lines[-1]] and lines[-1].startswith("error: ") and "not an ELF" in lines[-1]
    assert "qemu-system" not in r.stderr  # the reproducing line is logged when QEMU starts


def test_no_build_record_says_run_build_first(tmp_path: Path) -> None:
    with pytest.raises(WolfError, match=r"invoke build --device malta-be --flavour wolfssl"):
        free_memory.built_image(FileStore(tmp_path), "malta-be", "wolfssl", None)


def test_build_record_lookup_finds_the_initramfs(tmp_path: Path) -> None:
    fs = FileStore(tmp_path / "s")
    kernel = tmp_path / "openwrt-malta-be-vmlinux-initramfs.elf"
    kernel.write_bytes(b"x")
    data = {"artifacts": [str(tmp_path / "sha256sums"), {"path": str(kernel)}]}
    fs.put(Record("build", "b1", "25.12.5", "malta-be", "mbedtls", data))
    path, release = free_memory.built_image(fs, "malta", "mbedtls", None)
    assert (path, release) == (kernel, "25.12.5")
    kernel.unlink()
    with pytest.raises(WolfError, match="does not exist any more"):
        free_memory.built_image(fs, "malta-be", "mbedtls", None)


def test_host_meminfo_and_free_agree() -> None:
    """The parsers against the host's own kernel and procps `free` (an independent program)."""
    need_tools("free")
    info = meminfo.parse_meminfo(Path("/proc/meminfo").read_text())
    free = meminfo.parse_free(subprocess.run(["free", "-k"], capture_output=True, text=True).stdout)
    assert free["total"] == info["MemTotal"]
    assert info["MemFree"] <= info["MemTotal"]


def test_busybox_free_layout() -> None:
    text = (
        "              total        used        free      shared  buff/cache   available\n"
        "Mem:         114404        6000      101256        2420        7148      101968\n"
        "Swap:             0           0           0\n"
    )
    assert meminfo.parse_free(text)["free"] == 101256
    with pytest.raises(WolfError, match="no MemFree"):
        meminfo.parse_meminfo("MemTotal: 1 kB\n[  12.3] pcnet32 eth0: link up\n")


def test_uptime_and_loadavg_among_a_shell_s_noise() -> None:
    """A router's shell may write to stderr before the command (the channel carries both): a
    CI machine's ~/.bashrc put "rm: ..." first and float() raised a traceback. The figures
    against the host's own clocks: CLOCK_BOOTTIME and getloadavg()."""
    import time

    noise = "rm: cannot remove '/root/.pyenv/shims/.pyenv-shim': No such file or directory\n"
    before = time.clock_gettime(time.CLOCK_BOOTTIME)
    up = meminfo.parse_uptime(noise + Path("/proc/uptime").read_text())
    assert before - 0.02 <= up <= time.clock_gettime(time.CLOCK_BOOTTIME) + 0.02
    load = meminfo.parse_loadavg(noise + Path("/proc/loadavg").read_text())
    figures = [float(a) for a in load.split()[:3]]
    assert [abs(a - b) < 1.0 for a, b in zip(figures, os.getloadavg(), strict=True)] == [True] * 3
    for bad, parse in ((noise, meminfo.parse_uptime), ("", meminfo.parse_loadavg),
                       ("1e999 0\n", meminfo.parse_uptime)):  # fmt: skip
        with pytest.raises(WolfError, match="cannot read /proc/"):
            parse(bad)


def _mipsel_elf(k: Path) -> Path:
    """A minimal little-endian MIPS32 ELF header (test_qemu_command_line checks it with readelf)."""
    hdr = bytearray(52)
    hdr[:6] = b"\x7fELF\x01\x01"
    hdr[6] = 1
    hdr[16:20] = (2).to_bytes(2, "little") + (8).to_bytes(2, "little")
    hdr[20:24] = (1).to_bytes(4, "little")
    hdr[40:42] = (52).to_bytes(2, "little")
    k.write_bytes(bytes(hdr))
    return k


def test_qemu_command_line(tmp_path: Path) -> None:
    need_tools("readelf")
    k = _mipsel_elf(tmp_path / "k.elf")
    assert _readelf_endian(k) == "little"
    spec = qemu.VmSpec(kernel=inspect_kernel(k), ssh_port=2222)
    argv = qemu.command(spec, tmp_path / "c.sock")
    assert argv[0] == "qemu-system-mipsel"
    joined = " ".join(argv)
    assert "-M malta -cpu 24Kc -m 128" in joined
    assert "-append" not in argv  # OpenWrt's kernels bring their own command line
    fwd = [a for a in argv if "hostfwd" in a]
    assert len(fwd) == 1 and "hostfwd=tcp:127.0.0.1:2222-192.168.1.1:22" in fwd[0]
    # more forwards (HTTPS of the image's uhttpd) go to the lan address as well, only there
    spec = qemu.VmSpec(kernel=inspect_kernel(k), forwards=((8443, 443),))
    fwd = [a for a in qemu.command(spec, tmp_path / "c.sock") if "hostfwd" in a]
    assert fwd == [a for a in fwd if a.startswith("user,id=lan,")]
    assert len(fwd) == 1 and fwd[0].endswith(",hostfwd=tcp:127.0.0.1:8443-192.168.1.1:443")
    with pytest.raises(WolfError, match="out of range"):
        qemu.VmSpec(kernel=spec.kernel, memory_mb=4).memory()


def test_vm_states_are_the_data_files_in_boot_order(tmp_path: Path) -> None:
    """The state machine's states are data/vm.toml's [states.*] in the file's order after
    'off', each with a handler and its timeout; an unknown state name is one line and starts
    nothing."""
    states = tomllib.loads((paths.DATA_DIR / "vm.toml").read_text())["states"]
    assert [str(s) for s in machine.ORDER] == ["off", *states]
    spec = qemu.VmSpec(kernel=inspect_kernel(_mipsel_elf(tmp_path / "k.elf")))
    vm = machine.VM(spec, timeouts={"shell": 5})
    assert set(vm.handlers) == set(machine.ORDER[1:])
    assert vm.timeouts == {**{k: float(v["timeout"]) for k, v in states.items()}, "shell": 5}
    with pytest.raises(WolfError, match="unknown VM state 'bogus'") as e:
        vm.transition("bogus")
    assert e.value.hint == "one of off, booting, console, shell, network, ssh"
    assert vm.state == "off" and vm.pid is None and vm.transitions == []
    with pytest.raises(WolfError, match="unknown VM state 'shel'"):
        machine.VM(spec, timeouts={"shel": 5})


def _main(tmp_path: Path, **kw: object) -> None:
    from openwrt_wolf.measure import cli as measure_cli

    args: dict[str, object] = dict(
        device=None, flavour=None, image=None, release=None, boots=3, idle=10.0, memory=0,
        rootfs=None, initrd=None, append=None, store=str(tmp_path / "s"),
    )  # fmt: skip
    args.update(kw)
    measure_cli.main(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({}, r"needs --image PATH, or --device malta-be\|malta-le\|armsr-armv8 with --flavour"),
        ({"device": "malta-be"}, "needs --image PATH"),
        ({"device": "tl-wr902ac", "flavour": "mbedtls"}, "not a device QEMU boots"),
        ({"device": "rpi-5", "flavour": "mbedtls"}, "not a device QEMU boots"),
        ({"device": "malta-be", "flavour": "gnutls"}, "unknown flavour"),
        ({"device": "malta-le", "flavour": "openssl"}, r"run `invoke build --device malta-le"),
        ({"image": "/nonexistent/k.elf"}, "does not exist"),
    ],
)
def test_measure_memory_bad_input(tmp_path: Path, kw: dict[str, object], message: str) -> None:
    with pytest.raises(WolfError, match=message):
        _main(tmp_path, **kw)


def test_measure_memory_bad_numbers(tmp_path: Path) -> None:
    elf = tmp_path / "k.elf"
    hdr = bytearray(52)
    hdr[:7] = b"\x7fELF\x01\x01\x01"
    hdr[16:20] = (2).to_bytes(2, "little") + (8).to_bytes(2, "little")
    elf.write_bytes(bytes(hdr))
    with pytest.raises(WolfError, match="out of range"):
        _main(tmp_path, image=str(elf), memory=8)
    with pytest.raises(WolfError, match="at least one boot"):
        _main(tmp_path, image=str(elf), boots=0)
    with pytest.raises(WolfError, match="must not be negative"):
        _main(tmp_path, image=str(elf), idle=-1.0)


def test_a_rootfs_disk_is_the_task_s_own_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guest writes to its disk (the overlay after the squashfs): each task boots a copy of
    its own, the bytes the host's gzip packed, zero padding left as holes, and nothing of it
    stays (before: a plain .img was booted as given, written to, and an .img.gz's one cached
    copy carried a run's overlay into the next)."""
    from openwrt_wolf.targets.vm.kernel import private_disk

    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    img = tmp_path / "openwrt-malta-be-rootfs-squashfs.img"
    img.write_bytes(os.urandom(3000) + b"\0" * (8 << 20))  # a squashfs padded to its partition
    gz = tmp_path / (img.name + ".gz")
    subprocess.run(["gzip", "-k", "-9", img], check=True)  # the host's gzip as the writer
    for given in (gz, img):
        with private_disk(given) as disk:
            assert disk.read_bytes() == img.read_bytes()
            assert disk.stat().st_blocks * 512 < 2 << 20  # the 8 MiB of zeros: holes
            with disk.open("r+b") as fh:  # what the guest does
                fh.seek(5000)
                fh.write(b"overlay")
        assert not disk.exists()
        assert not list((tmp_path / "cache" / "disks").iterdir())
    assert gz.stat().st_size < 100_000 and img.read_bytes()[5000:5007] == bytes(7)
    with pytest.raises(WolfError, match="does not exist"), private_disk(tmp_path / "no.img"):
        pass
    os.mkfifo(tmp_path / "fifo.img")
    with pytest.raises(WolfError, match=r"FIFO|fifo|pipe"), private_disk(tmp_path / "fifo.img"):
        pass
    assert not list((tmp_path / "cache" / "disks").iterdir())


def test_a_rootfs_disk_bomb_is_refused_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gzip stream of 1.1 GiB of zeros (1 MiB): past image.DISK.total, one line."""
    import zlib

    from openwrt_wolf.targets.vm.kernel import DISK, private_disk

    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    bomb = tmp_path / "bomb.img.gz"
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(16 << 20)
    with bomb.open("wb") as fh:
        for _ in range((DISK.total >> 24) + 4):
            fh.write(z.compress(block))
        fh.write(z.flush())
    with pytest.raises(WolfError, match="unpacks to more than"), private_disk(bomb):
        pass
    assert not list((tmp_path / "cache" / "disks").iterdir())


def test_root_disk_takes_the_build_s_kernel_and_rootfs(tmp_path: Path) -> None:
    fs = FileStore(tmp_path / "s")
    names = [
        "openwrt-malta-be-vmlinux-initramfs.elf",
        "openwrt-malta-be-vmlinux.elf",
        "openwrt-malta-be-rootfs-squashfs.img.gz",
        "openwrt-malta-be-rootfs-ext4.img.gz",
    ]
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    data = {"artifacts": [{"path": str(tmp_path / n)} for n in names]}
    fs.put(Record("build", "b1", "25.12.5", "malta-be", "wolfssl", data))
    kernel, rootfs, release = free_memory.built_disk(fs, "malta-be", "wolfssl", None)
    assert (kernel.name, rootfs.name, release) == (names[1], names[2], "25.12.5")
    fs.put(Record("build", "b2", "25.12.5", "malta-be", "mbedtls", {"artifacts": names[:1]}))
    with pytest.raises(WolfError, match="lists no kernel ELF"):
        free_memory.built_disk(fs, "malta-be", "mbedtls", None)
    with pytest.raises(WolfError, match="needs --rootfs"):
        _main(tmp_path, image=str(tmp_path / names[1]), root="disk")
    with pytest.raises(WolfError, match="not a root"):
        _main(tmp_path, image=str(tmp_path / names[1]), root="flash")


def test_console_lines_fit_openwrts_busybox(openwrt_tree_25125: Path, tmp_path: Path) -> None:
    """OpenWrt's busybox cuts an input line at FEATURE_EDITING_MAX_LEN (its Config-defaults.in;
    a real malta image's console broke a 96-byte chunk's line): every line a copy over the
    console sends stays under it, and the shell's own printf turns the lines back into the
    bytes (worst case: every byte an escape; a long path)."""
    import random

    from openwrt_wolf.targets.vm import machine

    text = (openwrt_tree_25125 / "package/utils/busybox/Config-defaults.in").read_text()
    m = re.search(r"config BUSYBOX_DEFAULT_FEATURE_EDITING_MAX_LEN\s+int\s+default (\d+)", text)
    assert m, "FEATURE_EDITING_MAX_LEN not in the tree's busybox defaults"
    limit = int(m.group(1))
    data = random.Random(7).randbytes(3000) + bytes(range(256))
    out = tmp_path / ("d" * 60) / "wolf-perf-0123456789ab" / "mbedtls-cpuclock.so"
    out.parent.mkdir(parents=True)
    commands = machine.write_commands(data, str(out))
    lines = [machine.console_line(c, "0123456789") for c in commands]
    assert max(len(ln) for ln in lines) < limit, (max(len(ln) for ln in lines), limit)
    for ln in lines:  # what the guest's shell does with each line (dash here: POSIX printf)
        subprocess.run(["sh", "-c", ln], check=True, capture_output=True, timeout=30)
    assert out.read_bytes() == data
