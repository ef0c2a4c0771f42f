"""A stand-in OpenWrt guest for tests and benchmarks (never imported by openwrt_wolf): Debian
12's real mipsel Malta kernel plus a busybox initramfs whose /init behaves like OpenWrt's
console where the boot state machine looks: it prints "Please press Enter to activate this
console.", waits for Enter, shows an OpenWrt-style prompt, brings up lan (eth0,
192.168.1.1/24, OpenWrt's default) in the background like netifd, and answers ``ubus wait_for
network.interface.lan`` once lan is up.

Misbehaviour for tests is chosen on the kernel command line, so one initramfs serves all:
``wolf.test=panic`` (init exits: the kernel panics), ``wolf.test=stall`` (after Enter the
console goes quiet: no prompt ever comes).

The packages come from Debian's archive through the product's private apt root
(host/debian.py); which ones is malta_guest.toml here."""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from openwrt_wolf import paths
from openwrt_wolf.errors import WolfError
from openwrt_wolf.files.locks import locked
from openwrt_wolf.host.debian import AptRoot
from openwrt_wolf.targets.vm.initramfs import Archive, init_script


@cache
def data() -> dict[str, Any]:
    return tomllib.loads((Path(__file__).with_name("malta_guest.toml")).read_text())


# /init's own steps (initramfs.init_script adds the common start and the console loop)
_INIT = r"""case " $(cat /proc/cmdline) " in
*" wolf.test=panic "*) echo "wolf stand-in: init exits on purpose"; exit 1 ;;
*" wolf.test=stall "*)
    echo "Please press Enter to activate this console."
    read -r _
    echo "wolf stand-in: console stalls on purpose"
    while :; do sleep 3600; done ;;
esac
# netifd's part: load the NIC driver, configure lan, then announce it.
(
    for m in $(cat /lib/modules/order); do insmod /lib/modules/$m; done
    ip link set lo up
    ip link set eth0 up && ip addr add 192.168.1.1/24 dev eth0 && touch /var/run/lan.up
    # OpenWrt's default: dropbear on 22, root without a password may log in (-B).
    [ -x /usr/sbin/dropbear ] && mkdir -p /etc/dropbear && /usr/sbin/dropbear -R -B -p 22
) >/dev/null 2>&1 &
"""

# The one ubus call the boot state machine makes, with ubus's exit status (0 once the object
# exists, 4 = UBUS_STATUS_NOT_FOUND on a timeout) and its -t option (seconds, default 30).
_UBUS = r"""#!/bin/sh
t=30
[ "$1" = "-t" ] && { t=$2; shift 2; }
if [ "$1 $2" != "wait_for network.interface.lan" ]; then
    echo "ubus stand-in: only wait_for network.interface.lan" >&2
    exit 2
fi
# ubus returns on the event; a tenth of a second is close enough for a stand-in
t=$((t * 10))
while [ ! -e /var/run/lan.up ]; do
    t=$((t - 1)); [ $t -lt 0 ] && exit 4
    sleep 0.1
done
exit 0
"""


@dataclass(frozen=True)
class MaltaKernel:
    package: str  # linux-image-6.1.0-NN-4kc-malta
    version: str  # the Debian package version
    release: str  # the kernel release (uname -r), e.g. 6.1.0-NN-4kc-malta
    vmlinuz: Path  # a self-decompressing ELF that QEMU's -kernel boots
    modules: Path  # lib/modules/<release>


def malta_kernel(machine: str = "malta") -> MaltaKernel:
    """Debian 12's mipsel 4Kc Malta kernel (or, for ``machine="virt"``, its arm64 kernel),
    downloaded and unpacked under the cache (the package name is resolved with ``apt-cache
    depends``, never hard-coded)."""
    spec = data()[f"{machine}_kernel"]
    apt = AptRoot(spec["arch"])
    with locked(apt.base / ".lock"):
        apt.update()
        package = apt.depends(spec["meta_package"], spec["package_pattern"])
    pkg = apt.fetch(package)
    found = sorted((pkg.root / "boot").glob("vmlinuz-*"))
    if len(found) != 1:
        raise WolfError(f"{package} {pkg.version}: expected one boot/vmlinuz-*, found {found}")
    release = found[0].name.removeprefix("vmlinuz-")
    return MaltaKernel(
        package=package,
        version=pkg.version,
        release=release,
        vmlinuz=found[0],
        modules=pkg.root / "lib" / "modules" / release,
    )


def busybox_static(machine: str = "malta") -> Path:
    """A static busybox binary for the kernel's architecture."""
    spec = data()["busybox" if machine == "malta" else f"{machine}_busybox"]
    pkg = AptRoot(spec["arch"]).fetch(spec["package"])
    path = pkg.root / "bin" / "busybox"
    if not path.is_file():
        raise WolfError(f"{spec['package']} {pkg.version} has no bin/busybox")
    return path


@dataclass(frozen=True)
class StandIn:
    kernel: MaltaKernel
    initramfs: Path
    machine: str = "malta"

    @property
    def cmdline(self) -> str:
        """Debian's kernel has no built-in command line (OpenWrt's has)."""
        console = data()[f"{self.machine}_kernel"]["console"]
        return f"console={console} rdinit=/init panic=-1"


def _dropbear() -> dict[str, Path]:
    """Debian's dropbear and the shared libraries it loads, by the name the guest needs."""
    spec = data()["dropbear"]
    apt = AptRoot(spec["arch"])
    files = {"usr/sbin/dropbear": apt.fetch(spec["package"]).root / "usr/sbin/dropbear"}
    for pkg, names in spec["libraries"].items():
        root = apt.fetch(pkg).root
        for name in names:
            found = [p for d in _LIBDIRS if (p := root / d / name).exists()]
            if not found:
                raise WolfError(f"{pkg}: no {name} in {', '.join(_LIBDIRS)}")
            # No ld.so.cache in the guest: everything goes straight into /lib.
            files[f"lib/{name}"] = found[0].resolve()
    return files


_LIBDIRS = ("lib/mipsel-linux-gnu", "usr/lib/mipsel-linux-gnu")


def build(*, ssh: bool = False, machine: str = "malta") -> StandIn:
    """Fetch (cached) kernel and busybox and write the initramfs, named by its content's hash
    (building it in memory takes milliseconds; the boots are what is slow).
    ``ssh`` adds Debian's dropbear (dynamically linked, so with its libraries: about 2 MB; malta
    only). ``machine="virt"``: Debian's arm64 kernel for QEMU's virt machine (armsr/armv8)."""
    if ssh and machine != "malta":
        raise WolfError("the stand-in guest has dropbear on malta only")
    kernel = malta_kernel(machine)
    busybox = busybox_static(machine)
    mods = [kernel.modules / m for m in data()[f"{machine}_kernel"]["modules"]]
    a = Archive()
    a.dirs("bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "root")
    a.dirs("etc", "lib", "lib/modules", "var", "var/run")
    a.chardev("dev/console", 5, 1)  # the kernel opens it for init before devtmpfs is mounted
    a.copy("bin/busybox", busybox, mode=0o755)
    a.symlink("bin/sh", "busybox")
    a.file("init", init_script("OpenWrt", _INIT), mode=0o755)
    a.file("usr/bin/ubus", _UBUS, mode=0o755)
    a.file("etc/banner", "stand-in for OpenWrt (Debian's kernel, busybox)\n")
    for m in mods:
        a.copy(f"lib/modules/{m.name}", m, mode=0o644)
    a.file("lib/modules/order", "".join(f"{m.name}\n" for m in mods))
    if ssh:
        # root without a password, as a fresh OpenWrt; dropbear -B lets it in
        a.file("etc/passwd", "root::0:0:root:/root:/bin/sh\n")
        a.file("etc/group", "root:x:0:\n")
        a.file("etc/shells", "/bin/sh\n")
        for name, path in sorted(_dropbear().items()):
            a.copy(name, path, mode=0o755)
    digest = hashlib.sha256(a.to_cpio()).hexdigest()[:16]
    out = paths.cache_dir() / "standin" / f"initramfs-{kernel.release}-{digest}.cpio.gz"
    if not out.exists():
        a.write(out)
    return StandIn(kernel, out, machine)
