"""`perf --target vm --test wifi --image K --rootfs R --packages P --toolchain T`: the Wi-Fi
test in a real OpenWrt image (issue 35), one flavour per run.

The malta image boots as a router does, its squashfs and overlay on a disk of its own
(targets/vm/image.private_disk), with a malta kernel K that has two mac80211_hwsim radios
(OpenWrt builds cfg80211, mac80211 and mac80211_hwsim from backports; docs/perf.md says how K
is made from the tree's own kernel). In the booted image:

1. `apk add wpad-basic-<flavour>`: the image's own package from P (the build's
   bin/packages/<arch>, served to the guest over QEMU's lan, its index signed with the key the
   image trusts), linking the TLS library the image already has;
2. hostapd_cli and wpa_cli: from P when it has OpenWrt's hostapd-utils and wpa-cli packages,
   else from --wpad-build (the tree's hostapd build directory of that wpad variant, where
   OpenWrt's make built both beside wpad);
3. heaptrack built with the image's toolchain T (musl), and the helper and configuration files
   of the lab's x86_64 guest, uploaded;
4. perf/wifi.py's modes run unchanged (witness connection, timed connections, heap marks).

QEMU runs without -icount (data/perf/wifi.toml says why): the guest's clock is the host's, so
the run wants an idle host (the record keeps its load); the figures are an emulated MIPS
24Kc's, compared as ratios between flavours and beside the reference's router."""

from __future__ import annotations

import re
import shlex
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import paths, proc
from ..errors import WolfError
from ..files.hashing import file_sha256
from ..results import store
from ..results.perf import WIFI, WifiConnections
from ..targets.vm.machine import VM, lan_host, served
from . import image_boot, wifi
from .target_place import TargetPlace

CLI = {"hostapd_cli": "hostapd", "wpa_cli": "wpa_supplicant"}  # program: its build subfolder
CLI_PACKAGES = ("hostapd-utils", "wpa-cli")
MAX_REPO_FILES = 20000  # a bin/packages/<arch>/base holds a few hundred


@dataclass(frozen=True)
class Request:
    flavour: str
    kernel: Path  # a malta kernel with cfg80211, mac80211 and mac80211_hwsim
    rootfs: Path  # the flavour's …-rootfs-squashfs.img(.gz)
    packages: Path  # the build's bin/packages/<arch> (or its base/)
    toolchain: str  # the image's OpenWrt toolchain (heaptrack)
    wpad_build: Path | None  # the tree's hostapd build directory for wpad-basic-<flavour>
    release: str
    quick: bool
    store: str | None


@dataclass(frozen=True)
class Repo:
    """The package directory served to the guest: its index and the files apk may fetch."""

    root: Path
    files: dict[str, Path]
    wpad: Path
    cli: tuple[Path, ...]  # hostapd-utils and wpa-cli, when the build made them
    ident: tuple[int, int] = (0, 0)  # root's (st_dev, st_ino) as listed: served() checks it


def repo(packages: Path, flavour: str) -> Repo:
    """The directory holding packages.adb and wpad-basic-<flavour>; one line when it is not."""
    hint = "pass --packages with the build's bin/packages/<arch> (or its base/)"
    for root in (packages / "base", packages):
        if (root / "packages.adb").is_file():
            break
    else:
        raise WolfError(f"--packages {packages}: no packages.adb there or in base/", hint=hint)
    files: dict[str, Path] = {}
    try:  # the directory as listed: the package server serves from this one only
        st = root.stat()
    except OSError as e:
        raise WolfError(f"--packages {root}: {e.strerror}", hint=hint) from None
    for f in root.iterdir():
        if len(files) >= MAX_REPO_FILES:
            raise WolfError(f"--packages {root}: over {MAX_REPO_FILES} files", hint=hint)
        if f.is_file() and not f.is_symlink() and f.suffix in (".apk", ".adb"):
            files[f.name] = f

    def one(name: str) -> Path | None:
        found = sorted(
            p for n, p in files.items() if re.fullmatch(rf"{re.escape(name)}-\d.*\.apk", n)
        )
        return found[-1] if found else None

    wpad = one(f"wpad-basic-{flavour}")
    if wpad is None:
        raise WolfError(f"--packages {root}: no wpad-basic-{flavour} package",
                        hint="build it in the tree: CONFIG_PACKAGE_wpad-basic-"
                        f"{flavour}=m")  # fmt: skip
    cli = tuple(p for p in (one(n) for n in CLI_PACKAGES) if p is not None)
    return Repo(root, files, wpad, cli if len(cli) == len(CLI_PACKAGES) else (),
                (st.st_dev, st.st_ino))  # fmt: skip


def cli_programs(wpad_build: Path | None) -> dict[str, Path]:
    """hostapd_cli and wpa_cli from the tree's wpad build directory."""
    hint = ("pass --wpad-build T/build_dir/target-<arch>_musl/hostapd-wpad-basic-<flavour>/"
            "hostapd-<version>, or build hostapd-utils and wpa-cli into --packages")  # fmt: skip
    if wpad_build is None:
        raise WolfError("--packages has no hostapd-utils and wpa-cli packages", hint=hint)
    out = {}
    for prog, sub in CLI.items():
        p = wpad_build / sub / prog
        if not p.is_file() or p.is_symlink() or _head(p) != b"\x7fELF":
            raise WolfError(f"--wpad-build {wpad_build}: no {sub}/{prog} program", hint=hint)
        out[prog] = p
    return out


def _head(path: Path) -> bytes:
    with path.open("rb") as fh:
        return fh.read(4)


def run(req: Request, say: Callable[[str], None] = print) -> WifiConnections:
    """Boot the image, install its wpad, measure every mode, store one perf-wifi record."""
    img = image_boot.Image(req.kernel, req.rootfs, req.toolchain, req.release)
    img.check()
    if not req.packages.is_dir():
        raise WolfError(f"--packages {req.packages}: not a directory")
    rp = repo(req.packages, req.flavour)
    cli = {} if rp.cli else cli_programs(req.wpad_build)
    c = wifi.settings()
    st = store.FileStore(paths.store_dir(req.store))
    extra = tuple(c["qemu_extra_malta"])
    with image_boot.booted(img, extra=extra, name="qemu-malta-wifi", say=say) as b:
        nets = b.vm.run("ls /sys/class/net", timeout=60).output.split()
        if not {c["ap_interface"], c["sta_interface"]} <= set(nets):
            raise WolfError(f"{req.kernel.name} gives the image no {c['ap_interface']}/"
                            f"{c['sta_interface']} radios (interfaces: {' '.join(nets)})",
                            hint="boot a kernel with mac80211_hwsim (docs/perf.md, Wi-Fi in "
                            "the real malta images)")  # fmt: skip
        installed = _install(b.vm, rp, req.flavour, say)
        layout = _upload(b.place, cli, b.shim)
        b.guest["radios"] = b.vm.run("ls /sys/class/ieee80211").output.strip()
        session = wifi.Session(b.place, req.quick, say, layout)
        results = wifi.measure_modes(session, req.flavour)
    rec = WifiConnections(
        common=b.common(req.flavour, backend=f"the image's wpad-basic-{req.flavour} "
                        f"({rp.wpad.name})", client="the same image's wpa_supplicant (wpad-basic)",
                        metrics=wifi.metrics(results), quick=req.quick,
                        machine=f"{b.machine} (mac80211_hwsim)"),
        modes=results,
        wpad={"package": rp.wpad.name, "package_sha256": file_sha256(rp.wpad),
              "installed": installed,
              "cli": {n: {"from": str(p), "sha256": file_sha256(p)} for n, p in cli.items()}
              or {p.name: {"from": str(p), "sha256": file_sha256(p)} for p in rp.cli}},
        guest=b.guest,
    )  # fmt: skip
    st.put(b.record(WIFI, "wifi", req.flavour, req.release, rec.to_dict()))
    return rec


def _install(vm: VM, rp: Repo, flavour: str, say: Callable[[str], None]) -> list[str]:
    """apk add the image's wpad (and the control programs' packages when built); wpad's own
    service stopped so only the lab's daemons use the radios. The installed packages."""
    host = lan_host(vm.spec.kernel)
    if host is None:
        raise WolfError("the VM has no lan to fetch packages over")
    names = [f"wpad-basic-{flavour}", *(CLI_PACKAGES if rp.cli else ())]
    token = uuid.uuid4().hex
    say(f"perf: wifi: apk add {' '.join(names)} from {rp.root}")
    with served(rp.files, token, listed={rp.root: rp.ident}) as port:
        url = f"http://{host}:{port}/{token}/packages.adb"
        r = vm.run(f"apk --repositories-file /dev/null -X {url} add {' '.join(names)} 2>&1",
                   timeout=600)  # fmt: skip
    if r.exit_status != 0:
        raise WolfError(f"apk add {' '.join(names)} failed in the image",
                        hint=" | ".join(r.output.strip().splitlines()[-3:])[:400])  # fmt: skip
    # wpad's service (procd) runs hostapd and wpa_supplicant for netifd: not the measured ones
    vm.run("/etc/init.d/wpad stop 2>/dev/null; killall hostapd wpa_supplicant 2>/dev/null; "
           "sleep 1", timeout=120)  # fmt: skip
    left = vm.run("pidof hostapd wpa_supplicant").output.strip()
    if left:
        raise WolfError(f"the image still runs hostapd/wpa_supplicant (pids {left}) after "
                        "stopping wpad")  # fmt: skip
    return sorted(vm.run("apk info 2>/dev/null").output.split())


def _upload(place: TargetPlace, cli: dict[str, Path], shim: Path) -> wifi.Layout:
    """The helper, the configuration files, heaptrack and (when not installed) the control
    programs, where the image runs them."""
    with tempfile.TemporaryDirectory(prefix="wolf-wifi-conf-") as tmp:
        conf = Path(tmp) / "conf"
        conf.mkdir()
        for name, text in wifi.configs().items():
            (conf / name).write_text(text)
        confdir = place.put_dir(conf)
    helper = place.put(paths.DATA_DIR / "perf" / "wifi-guest.sh", "wolf-wifi")
    place.t.run(f"chmod 755 {shlex.quote(helper)}", timeout=30)
    progs = {n: place.put(p) for n, p in cli.items()}
    for n in CLI:
        if n not in progs:
            found = place.find(n)
            if found is None:
                raise WolfError(f"the image has no {n} after installing its packages")
            progs[n] = found
    proc.log.info("wifi: %s", progs)
    return wifi.Layout(hostapd="/usr/sbin/hostapd", wpa_supplicant="/usr/sbin/wpa_supplicant",
                       hostapd_cli=progs["hostapd_cli"], wpa_cli=progs["wpa_cli"],
                       helper=helper, confdir=confdir,
                       heaptrack=place.put(shim, "heaptrack.so"))  # fmt: skip
