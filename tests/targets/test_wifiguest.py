"""The Wi-Fi guest's pieces that need no boot, against Debian's real amd64 packages: the kernel
header check (oracle: `file`), the kernel modules' load order (oracle: each module's .modinfo
read with binutils' objcopy), the partial unpacking of a .deb (oracle: `dpkg-deb -x` of the
same file), the shared objects a program needs (oracle: `readelf -d`), and the pc machine's
QEMU command line."""

from __future__ import annotations

import filecmp
import re
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.files import elf
from openwrt_wolf.host import debian
from openwrt_wolf.targets.vm import qemu, wifiguest
from openwrt_wolf.targets.vm.kernel import inspect_bzimage, inspect_kernel
from tests.conftest import need_tools, preparing


@pytest.fixture(scope="module")
def kernel() -> wifiguest.GuestKernel:
    need_tools("apt-get", "dpkg-deb")
    with preparing("Debian 12's amd64 kernel (the Wi-Fi guest's; 70 MB, a few files unpacked)"):
        return wifiguest.kernel()


def _modinfo_depends(ko: Path) -> list[str]:
    raw = subprocess.run(["objcopy", "-O", "binary", "--only-section=.modinfo", str(ko),
                          "/dev/stdout"], capture_output=True, check=True).stdout  # fmt: skip
    fields = [f.decode() for f in raw.split(b"\0") if f.startswith(b"depends=")]
    return [d for d in fields[0].removeprefix("depends=").split(",") if d] if fields else []


def test_bzimage_is_what_file_says(kernel: wifiguest.GuestKernel, tmp_path: Path) -> None:
    need_tools("file")
    said = subprocess.run(["file", "-b", str(kernel.vmlinuz)], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    assert said.startswith("Linux kernel x86 boot executable bzImage"), said
    assert f"version {kernel.release} " in said
    k = inspect_bzimage(kernel.vmlinuz)
    assert (k.machine, k.arch, k.endian) == ("pc", "x86_64", "little")
    bad = tmp_path / "not-a-kernel"
    bad.write_bytes(b"\x7fELF" + bytes(1000))
    with pytest.raises(WolfError, match="not an x86 Linux kernel"):
        inspect_bzimage(bad)
    with pytest.raises(WolfError, match="not an ELF file"):
        inspect_kernel(kernel.vmlinuz)  # the malta reader refuses it in one line


def test_modules_load_after_their_dependencies(kernel: wifiguest.GuestKernel) -> None:
    need_tools("objcopy")
    roots = list(debian.data()["wifi_guest"]["modules"])
    order = wifiguest.load_order(kernel.modules, roots)
    names = [p.name.removesuffix(".ko") for p in order]
    builtin = {Path(ln).name.removesuffix(".ko") for ln in
               (kernel.modules / "modules.builtin").read_text().split()}  # fmt: skip
    for i, ko in enumerate(order):
        for dep in _modinfo_depends(ko):
            assert dep in builtin or dep in names[:i], (ko.name, dep, names)
    # the radios' driver and what mac80211 asks the crypto API for are all there
    assert {"mac80211_hwsim", "mac80211", "cfg80211"} <= set(names)
    assert set(roots) - set(names) <= builtin
    assert len(names) == len(set(names))
    with pytest.raises(WolfError, match="neither built in nor unpacked"):
        wifiguest.load_order(kernel.modules, ["no_such_module"])


def test_partial_unpack_matches_dpkg_deb(tmp_path: Path) -> None:
    need_tools("apt-get", "dpkg-deb")
    spec = debian.data()["wifi_guest"]
    apt = debian.AptRoot(spec["arch"])
    apt.update()
    version = apt.version(spec["busybox"])
    subprocess.run(["apt-get", "download", "-q", f"{spec['busybox']}={version}"], cwd=tmp_path,
                   env={**apt._env(), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}, check=True,
                   capture_output=True)  # fmt: skip
    (deb,) = tmp_path.glob("*.deb")
    whole, part = tmp_path / "whole", tmp_path / "part"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(whole)], check=True)
    got = debian.extract_members(deb, part, ("bin/*", "usr/share/doc/*/copyright"))
    rel = sorted(str(p.relative_to(part)) for p in got)
    assert "bin/busybox" in rel and any(r.endswith("/copyright") for r in rel)
    for r in rel:
        assert filecmp.cmp(part / r, whole / r, shallow=False), r
    assert not (part / "usr" / "share" / "man").exists()  # only what the patterns name
    with pytest.raises(WolfError, match="no member matches"):
        debian.extract_members(deb, tmp_path / "none", ("no/such/*",))
    notdeb = tmp_path / "x.deb"
    notdeb.write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(WolfError, match="not a Debian package"):
        debian.extract_members(notdeb, tmp_path / "y", ("*",))


def test_needed_libraries_match_readelf() -> None:
    need_tools("readelf")
    exe = Path("/bin/ls").resolve()
    interp, needed = elf.needs(exe)
    out = subprocess.run(["readelf", "-d", "-l", str(exe)], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert needed == re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    assert interp == re.search(r"Requesting program interpreter: ([^\]]+)\]", out)[1]  # type: ignore[index]


def test_pc_command_line(tmp_path: Path) -> None:
    k = tmp_path / "bzImage"
    k.write_bytes(bytes(0x1FE) + b"\x55\xaa" + bytes(2) + b"HdrS" + bytes(64))
    spec = qemu.VmSpec(kernel=inspect_bzimage(k), initrd=tmp_path / "i.gz", append="console=ttyS0",
                       extra=("-icount", "shift=0,sleep=off"))  # fmt: skip
    argv = qemu.command(spec, tmp_path / "console.sock")
    assert argv[0] == "qemu-system-x86_64"
    assert argv[argv.index("-M") + 1] == "pc" and argv[argv.index("-m") + 1] == "512"
    assert argv[argv.index("-nic") + 1] == "none" and not any("pcnet" in a for a in argv)
    assert argv[-2:] == ["-icount", "shift=0,sleep=off"]
    assert qemu.nics(spec.kernel) == []
    with pytest.raises(WolfError, match="no rootfs"):
        qemu.command(qemu.VmSpec(kernel=spec.kernel, rootfs=tmp_path / "r.img"), tmp_path / "s")
