"""The Wi-Fi guest: Debian 12's real amd64 kernel on QEMU's pc machine with two
mac80211_hwsim radios (wlan0, wlan1), and an initramfs holding a static busybox, each flavour's
wpad-basic build (footprint/wpad.py) under /opt/<flavour>, the heap tracker, the test's
configuration files under /etc/wolf and its helper /usr/bin/wolf-wifi (data/perf/wifi-guest.sh).

The kernel package's name is resolved with apt-cache (data/debian.toml [wifi_guest]), and only
the kernel and the module folders it needs are unpacked. The modules to load come with their
dependencies read from each module's own .modinfo section; built-in ones (modules.builtin)
are skipped. Shared objects the programs load are found from their ELF headers (DT_NEEDED,
PT_INTERP): the flavour's TLS library build first, then the compiler's library path (the
programs were linked against the build host's C library, so its copy goes with them).

/init behaves like the stand-in malta guest where the boot state machine looks (the "Please
press Enter" line, then a root@<host>:<dir># prompt), after loading the modules; a module that
does not load is reported on the console ("wolf-wifi: insmod ... failed")."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.elffile import ELFFile

from ... import paths, proc
from ...errors import WolfError
from ...files import elf
from ...files.locks import locked
from ...host import debian
from .initramfs import Archive, init_script
from .kernel import Kernel, inspect_bzimage

# /init's own steps (initramfs.init_script adds the common start and the console loop)
_INIT = r"""ip link set lo up
while read -r module options; do
    insmod "/lib/modules/$module" $options || echo "wolf-wifi: insmod $module failed"
done < /etc/wolf/modules
"""


@dataclass(frozen=True)
class GuestKernel:
    package: str  # linux-image-6.1.0-NN-amd64
    version: str  # the Debian package version
    release: str  # uname -r
    vmlinuz: Path
    modules: Path  # lib/modules/<release> (the unpacked members only)


@dataclass(frozen=True)
class GuestPrograms:
    """One flavour's programs for the guest (from footprint/wpad.py's build)."""

    name: str
    wpad: Path
    hostapd_cli: Path
    wpa_cli: Path
    libdir: Path  # the TLS library build's shared objects (and their soname links)


@dataclass(frozen=True)
class WifiGuest:
    kernel: GuestKernel
    initramfs: Path
    flavours: tuple[str, ...]
    modules: tuple[str, ...]  # loaded at boot, in order

    @property
    def image(self) -> Kernel:
        return inspect_bzimage(self.kernel.vmlinuz)

    @property
    def cmdline(self) -> str:
        return "console=ttyS0 rdinit=/init panic=-1 quiet"

    @staticmethod
    def opt(flavour: str, program: str) -> str:
        """Where a flavour's program is in the guest."""
        return f"/opt/{flavour}/{program}"


def kernel() -> GuestKernel:
    """Debian 12's amd64 kernel: vmlinuz and the module folders of data/debian.toml."""
    spec = debian.data()["wifi_guest"]
    apt = debian.AptRoot(spec["arch"])
    with locked(apt.base / ".lock"):
        apt.update()
        package = apt.depends(spec["meta_package"], spec["package_pattern"])
    pkg = apt.fetch(package, members=tuple(spec["members"]))
    found = sorted((pkg.root / "boot").glob("vmlinuz-*"))
    if len(found) != 1:
        raise WolfError(f"{package} {pkg.version}: expected one boot/vmlinuz-*, found {found}")
    release = found[0].name.removeprefix("vmlinuz-")
    return GuestKernel(package, pkg.version, release, found[0],
                       pkg.root / "lib" / "modules" / release)  # fmt: skip


def modinfo(path: Path) -> dict[str, str]:
    """A kernel module's .modinfo section ("key=value" strings), as `modinfo` reads it."""
    with path.open("rb") as fh:
        sec = ELFFile(fh).get_section_by_name(".modinfo")
        if sec is None:
            raise WolfError(f"{path} is not a kernel module (no .modinfo section)")
        raw = sec.data()
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, eq, value = item.decode("utf-8", "replace").partition("=")
        if eq:
            out.setdefault(key, value)
    return out


def load_order(modules: Path, roots: list[str]) -> list[Path]:
    """The .ko files to insmod, dependencies first. A module the kernel has built in
    (modules.builtin) is not loaded; one that is neither built in nor unpacked is an error."""
    index = {p.name.removesuffix(".ko").replace("-", "_"): p for p in modules.rglob("*.ko")}
    builtin_file = modules / "modules.builtin"
    builtin = {
        Path(line.strip()).name.removesuffix(".ko").replace("-", "_")
        for line in (builtin_file.read_text().splitlines() if builtin_file.is_file() else [])
    }
    order: list[Path] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        name = name.replace("-", "_")
        if name in builtin or any(p == index.get(name) for p in order):
            return
        if name not in index:
            raise WolfError(
                f"kernel module {name} is neither built in nor unpacked",
                hint="add its folder to data/debian.toml [wifi_guest] members",
            )
        if name in visiting:
            raise WolfError(f"kernel modules depend on each other in a circle at {name}")
        visiting.add(name)
        for dep in filter(None, modinfo(index[name]).get("depends", "").split(",")):
            visit(dep)
        visiting.discard(name)
        order.append(index[name])

    for root in roots:
        visit(root)
    return order


def _system_lib(gcc: str, name: str) -> Path:
    out = proc.run([gcc, f"-print-file-name={name}"], timeout=30).output.strip()
    if out == name or not Path(out).is_file():
        raise WolfError(f"{name}: not in the compiler's library path ({gcc})",
                        hint="install the package that ships it on this machine")  # fmt: skip
    return Path(out).resolve()


class _Libraries:
    """System shared objects the guest's programs need, found once each."""

    def __init__(self, gcc: str) -> None:
        self.gcc = gcc
        self.found: dict[str, Path] = {}  # guest path -> local file

    def add(self, program: Path, own: Path | None = None) -> None:
        """program's needs (and theirs): from ``own`` (a library folder that goes to the
        guest whole) when there, else the system's, into /lib (the loader's own path)."""
        todo = [program]
        while todo:
            interp, needed = elf.needs(todo.pop())
            if interp and interp not in self.found:
                self.found[interp] = Path(interp).resolve()
            for name in needed:
                if own is not None and (own / name).exists():
                    todo.append((own / name).resolve())
                    continue
                dest = f"/lib/{name}"
                if dest not in self.found:
                    self.found[dest] = _system_lib(self.gcc, name)
                    todo.append(self.found[dest])


def build(
    flavours: list[GuestPrograms], heaptrack: Path, etc: dict[str, str], gcc: str
) -> WifiGuest:
    """The initramfs (cached by its content's hash) for these flavours' programs. ``etc``:
    file name -> text, written to /etc/wolf (the modes' configuration files)."""
    k = kernel()
    spec = debian.data()["wifi_guest"]
    busybox = debian.AptRoot(spec["arch"]).fetch(spec["busybox"]).root / "bin" / "busybox"
    if not busybox.is_file():
        raise WolfError(f"{spec['busybox']} ({spec['arch']}) has no bin/busybox")
    mods = load_order(k.modules, list(spec["modules"]))
    options = {"mac80211_hwsim": " ".join(spec["hwsim_options"])}
    a = Archive()
    a.dirs("bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "root")
    a.dirs("etc", "etc/wolf", "lib", "lib/modules", "var", "var/run", "opt", "opt/wolf")
    a.chardev("dev/console", 5, 1)  # the kernel opens it for init before devtmpfs is mounted
    a.copy("bin/busybox", busybox, mode=0o755)
    a.symlink("bin/sh", "busybox")
    a.file("init", init_script("wifi", _INIT), mode=0o755)
    a.file("usr/bin/wolf-wifi", (paths.DATA_DIR / "perf" / "wifi-guest.sh").read_text(),
           mode=0o755)  # fmt: skip
    for m in mods:
        a.copy(f"lib/modules/{m.name}", m, mode=0o644)
    modlines = [f"{m.name} {options.get(m.name.removesuffix('.ko'), '')}".rstrip() for m in mods]
    a.file("etc/wolf/modules", "\n".join(modlines) + "\n")
    for name, text in sorted(etc.items()):
        a.file(f"etc/wolf/{name}", text)
    libs = _Libraries(gcc)
    a.copy("opt/wolf/heaptrack.so", heaptrack, mode=0o755)
    libs.add(heaptrack)
    for f in flavours:
        base = f"opt/{f.name}"
        a.dirs(base, f"{base}/lib")
        for prog in (f.wpad, f.hostapd_cli, f.wpa_cli):
            a.copy(f"{base}/{prog.name}", prog, mode=0o755)
            libs.add(prog, own=f.libdir)
        a.symlink(f"{base}/hostapd", "wpad")  # multicall.c dispatches on argv[0]
        a.symlink(f"{base}/wpa_supplicant", "wpad")
        for lib in sorted(f.libdir.iterdir()):
            if ".so" not in lib.name:
                continue
            if lib.is_symlink():
                a.symlink(f"{base}/lib/{lib.name}", os.readlink(lib))
            else:
                a.copy(f"{base}/lib/{lib.name}", lib, mode=0o755)
    made = {"lib"}
    for guest, local in sorted(libs.found.items()):
        parent = str(Path(guest).parent).lstrip("/")  # /lib, or the loader's /lib64
        if parent not in made:
            a.dir(parent)
            made.add(parent)
        a.copy(guest.lstrip("/"), local, mode=0o755)
    digest = hashlib.sha256(a.to_cpio()).hexdigest()[:16]
    out = paths.cache_dir() / "wifi-guest" / f"initramfs-{k.release}-{digest}.cpio.gz"
    if not out.exists():
        a.write(out)
    return WifiGuest(k, out, tuple(f.name for f in flavours), tuple(m.name for m in mods))
