"""`invoke perf --target vm --test wifi`: what each flavour's hostapd and wpa_supplicant cost to
connect a station with WPA3-SAE (hunting-and-pecking, hash-to-element) and with OWE.

Per flavour, wpad-basic-<tls> (footprint/wpad.py: OpenWrt's hostapd source and patches against
the footprint lab's library build) runs in one x86_64 guest with two mac80211_hwsim radios
(targets/vm/wifiguest.py, booted once for all flavours). Per mode (data/perf/wifi.toml):

1. hostapd on wlan0 with heaptrack (LD_PRELOAD); once it reports AP-ENABLED and has idled,
   a SIGUSR2 mark gives its heap at idle with the AP up;
2. wpa_supplicant on wlan1; both daemons to debug level for one **witness** connection, whose
   lines (and `wpa_cli status` after it) say the key management, the group each side chose,
   the PMKID each derived and, for SAE, hash-to-element or not; both back to their default
   level;
3. N timed connections: disconnect, forget the PMKSA cache (each connection authenticates in
   full), reconnect. The time is the station's own `-t` event lines, from its first "SME:
   Trying to authenticate" to CTRL-EVENT-CONNECTED; each daemon's CPU time over the connection
   comes from /proc/PID/schedstat; a connection that does not come is counted as failed;
4. a second heap mark: hostapd's peak over the connections.

The guest runs under TCG with -icount: its clock counts instructions (1 ns each), so the
figures do not move with the host's load, but they are an emulated x86_64's, not a router's:
compare the ratios between flavours."""

from __future__ import annotations

import re
import shlex
import statistics
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from .. import paths, proc
from ..errors import CommandError, WolfError
from ..footprint import spec, toolchain, wpad
from ..host import hosttools
from ..results import store
from ..results.perf import (
    WIFI,
    HeapPhase,
    NetCommon,
    Where,
    WifiConnections,
    WifiMode,
    metric,
    record_key,
)
from ..targets.vm import wifiguest
from ..targets.vm.machine import VM
from ..targets.vm.qemu import VmSpec, binary
from . import heap, programs
from .place import Server
from .target_place import TargetPlace
from .wpalines import connection_times, negotiated, spread

AP_CLI = "-p /var/run/hostapd -i {ap}"
STA_CLI = "-p /var/run/wpa_supplicant -i {sta}"
_CPU = re.compile(r"^(cpu-before|cpu-after) (cpu|ticks) (-?\d+) (-?\d+)$", re.M)
NS = {"cpu": 1, "ticks": 10_000_000}  # the helper's units: schedstat ns, or USER_HZ ticks
CPU_CLOCK = {"cpu": "schedstat", "ticks": "ticks"}


@cache
def settings() -> dict[str, Any]:
    path = paths.DATA_DIR / "perf" / "wifi.toml"
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise WolfError(f"cannot read {path}: {e}") from None


def modes() -> list[str]:
    return list(settings()["mode"])


def configs() -> dict[str, str]:
    """/etc/wolf/ap-<mode>.conf and sta-<mode>.conf for every mode."""
    c = settings()
    fill = {k: c[k] for k in ("ssid", "passphrase", "ap_interface", "sta_interface")}

    def lines(items: list[str]) -> str:
        return "".join(f"{i.format(**fill)}\n" for i in items)

    out = {}
    for name, m in c["mode"].items():
        out[f"ap-{name}.conf"] = lines([*c["common"]["ap"], *m["ap"]])
        network = "".join(f"\t{i.format(**fill)}\n" for i in [*c["common"]["sta"], *m["sta"]])
        out[f"sta-{name}.conf"] = (lines([*c["common"]["sta_global"], *m["sta_global"]])
                                   + f"network={{\n{network}}}\n")  # fmt: skip
    return out


# -- the run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Where one flavour's daemons, their control programs, the helper, the configuration files
    and the heap tracker are in the guest: the lab's x86_64 guest has each flavour's build under
    /opt/<flavour>; a real OpenWrt image has its own wpad in /usr/sbin (perf/wifi_image.py)."""

    hostapd: str
    wpa_supplicant: str
    hostapd_cli: str
    wpa_cli: str
    helper: str  # data/perf/wifi-guest.sh
    confdir: str  # ap-<mode>.conf and sta-<mode>.conf
    heaptrack: str
    libdir: str | None = None  # LD_LIBRARY_PATH; None: the system's libraries

    @staticmethod
    def opt(flavour: str) -> Layout:
        """The lab's x86_64 guest (targets/vm/wifiguest.py)."""
        o = wifiguest.WifiGuest.opt
        return Layout(o(flavour, "hostapd"), o(flavour, "wpa_supplicant"),
                      o(flavour, "hostapd_cli"), o(flavour, "wpa_cli"),
                      helper="/usr/bin/wolf-wifi", confdir="/etc/wolf",
                      heaptrack="/opt/wolf/heaptrack.so",
                      libdir=f"/opt/{flavour}/lib:/lib")  # fmt: skip

    def env(self) -> dict[str, str]:
        return {"LD_LIBRARY_PATH": self.libdir} if self.libdir else {}


@dataclass
class Session:
    """The booted guest and what every step needs."""

    place: TargetPlace
    quick: bool
    say: Callable[[str], None]
    layout: Layout

    def sh(self, command: str, timeout: float | None = None) -> str:
        """A shell command in the guest (logged as the place logs it)."""
        limit = float(timeout or settings()["timeouts"]["run"])
        return self.place.run("sh", ["-c", command], {}, timeout=limit).output

    def wait(self, file: str, pattern: str, count: int, seconds: int) -> None:
        self.place.run(self.layout.helper, ["wait", file, pattern, str(count), str(seconds)],
                       {}, timeout=float(settings()["timeouts"]["run"]))  # fmt: skip

    def lines(self, file: str, after: int = 0) -> str:
        return self.sh(f"tail -n +{after + 1} {shlex.quote(file)}")

    def count(self, file: str) -> int:
        return int(self.sh(f"wc -l < {shlex.quote(file)}").strip() or 0)

    def pid(self, server: Server) -> str:
        return self.sh(f"cat {shlex.quote(server.pidfile)}").strip()


def _mark(s: Session, hostapd: Server, heap_file: str, marks: int) -> heap.HeapReport:
    s.sh(f"kill -USR2 {s.pid(hostapd)}")
    s.wait(heap_file, "event=mark", marks, int(settings()["timeouts"]["start"]))
    found = [r for r in heap.parse(s.lines(heap_file)) if r.event == "mark"]
    if len(found) < marks:
        raise WolfError(f"hostapd wrote {len(found)} heap marks to {heap_file}, expected {marks}")
    return found[marks - 1]


def _phase(name: str, r: heap.HeapReport, prev: heap.HeapReport | None) -> HeapPhase:
    if prev is None:
        return HeapPhase(name, 0, r.live, r.peak, r.allocs, r.frees)
    return HeapPhase(name, 0, r.live - prev.live, r.peak, r.allocs - prev.allocs,
                     r.frees - prev.frees)  # fmt: skip


def _witness_lines(text: str) -> str:
    keep = settings()["witness_patterns"]
    # a key's hexdump says "[REMOVED]" (the daemons hide keys without -K): nothing to keep
    return "\n".join(ln for ln in text.splitlines()
                     if any(p in ln for p in keep) and "[REMOVED]" not in ln)  # fmt: skip


@dataclass
class Daemons:
    """One mode's hostapd and wpa_supplicant in the guest, and how to reach them."""

    flavour: str
    mode: str
    hostapd: Server
    heap_file: str
    ap_cli: str
    sta_cli: str
    station: Server | None = None


def _start(s: Session, flavour: str, mode: str) -> Daemons:
    c, at = settings(), s.layout
    heap_file = f"{s.place.dir}/{flavour}-{mode}-heap.txt"
    env = {**at.env(), "LD_PRELOAD": at.heaptrack, heap.ENV_OUT: heap_file}
    ap = s.place.spawn(at.hostapd, ["-t", f"{at.confdir}/ap-{mode}.conf"], env)
    return Daemons(flavour, mode, ap, heap_file,
                   f"{at.hostapd_cli} " + AP_CLI.format(ap=c["ap_interface"]),
                   f"{at.wpa_cli} " + STA_CLI.format(sta=c["sta_interface"]))  # fmt: skip


def _station(s: Session, d: Daemons) -> Server:
    c, at = settings(), s.layout
    args = ["-t", "-i", c["sta_interface"], "-c", f"{at.confdir}/sta-{d.mode}.conf"]
    d.station = s.place.spawn(at.wpa_supplicant, args, at.env())
    s.wait(d.station.logfile, "Successfully initialized", 1, int(c["timeouts"]["start"]))
    return d.station


def _witness(s: Session, d: Daemons, sta: Server) -> tuple[bool, dict[str, str], int, int]:
    """One connection with both daemons at debug level: (connected, witness, log lines of
    hostapd and wpa_supplicant so far)."""
    seconds = int(settings()["timeouts"]["connect"])
    ap0, sta0 = s.count(d.hostapd.logfile), s.count(sta.logfile)
    s.sh(f"{d.ap_cli} log_level DEBUG >/dev/null; {d.sta_cli} log_level DEBUG >/dev/null; "
         f"{d.sta_cli} enable_network 0 >/dev/null")  # fmt: skip
    connected = True
    try:
        s.wait(sta.logfile, "CTRL-EVENT-CONNECTED", 1, seconds)
        s.wait(d.hostapd.logfile, "AP-STA-CONNECTED", 1, seconds)
    except CommandError:
        connected = False
    # the AP's PMKSA cache, for a wpad built without debug lines (OpenWrt's default
    # WPA_MSG_MIN_PRIORITY 3 compiles them out: the real images' wpad-basic)
    witness = {"wpa_cli status": s.sh(f"{d.sta_cli} status"),
               "hostapd_cli pmksa": s.sh(f"{d.ap_cli} pmksa")}  # fmt: skip
    s.sh(f"{d.ap_cli} log_level INFO >/dev/null; {d.sta_cli} log_level INFO >/dev/null")
    ap1, sta1 = s.count(d.hostapd.logfile), s.count(sta.logfile)
    for who, f, a, b in (("hostapd", d.hostapd.logfile, ap0, ap1),
                         ("wpa_supplicant", sta.logfile, sta0, sta1)):  # fmt: skip
        witness[who] = _witness_lines(s.sh(f"sed -n '{a + 1},{b}p' {f}"))
    return connected, witness, ap1, sta1


def _timed(
    s: Session, d: Daemons, sta: Server, n: int
) -> tuple[list[str], list[tuple[float, float]], str]:
    """n connections: each one's result, when ok (hostapd, wpa_supplicant) CPU in ms, and the
    clock the CPU times come from (schedstat, or 10 ms ticks)."""
    t = settings()["timeouts"]
    ap_pid, sta_pid = s.pid(d.hostapd), s.pid(sta)
    cpu: list[tuple[float, float]] = []
    results: list[str] = []
    clock = "schedstat"
    for i in range(n):
        args = ["connect", d.sta_cli, sta.logfile, d.hostapd.logfile, ap_pid, sta_pid,
                str(int(t["connect"]))]  # fmt: skip
        out = s.place.run(s.layout.helper, args, {}, timeout=float(t["run"])).output
        ok = "result ok" in out
        results.append("ok" if ok else "timeout")
        found = _CPU.findall(out)
        cpus = {k: (int(a) * NS[u], int(b) * NS[u]) for k, u, a, b in found}
        if ok and len(cpus) == 2 and min(min(v) for v in cpus.values()) >= 0:
            clock = CPU_CLOCK[found[0][1]]
            (a0, b0), (a1, b1) = cpus["cpu-before"], cpus["cpu-after"]
            cpu.append(((a1 - a0) / 1e6, (b1 - b0) / 1e6))
        if (i + 1) % max(1, n // 4) == 0 or i + 1 == n:
            s.say(f"perf: {d.flavour}: wifi {d.mode}: {i + 1}/{n} connections "
                  f"({results.count('timeout')} failed)")  # fmt: skip
    return results, cpu, clock


ERROR_LINE = re.compile(r"fail|error|not compiled|reject|unsupported", re.I)


def measure_mode(s: Session, flavour: str, mode: str) -> WifiMode:
    c = settings()
    title = c["mode"][mode]["title"]
    n = int(c["quick" if s.quick else "full"]["connections"])
    d = _start(s, flavour, mode)
    try:
        try:
            s.wait(d.hostapd.logfile, "AP-ENABLED", 1, int(c["timeouts"]["start"]))
        except CommandError:
            raise WolfError(f"hostapd ({flavour}, {mode}) did not bring the AP up",
                            hint=s.lines(d.hostapd.logfile)[-600:]) from None  # fmt: skip
        s.sh(f"sleep {int(c['timeouts']['settle'])}")
        idle = _mark(s, d.hostapd, d.heap_file, 1)
        sta = _station(s, d)
        connected, witness, ap1, sta1 = _witness(s, d, sta)
        got, wrong = negotiated(mode, witness)
        if not connected or wrong:
            why = wrong or "no connection"
            lines = f"{witness['hostapd']}\n{witness['wpa_supplicant']}".splitlines()
            # each distinct complaint once, without its time stamp (a station retries)
            said = (ln.split(": ", 1)[-1] for ln in lines if ERROR_LINE.search(ln))
            errs = list(dict.fromkeys(said))
            s.say(f"perf: {flavour}: wifi {mode}: none ({why}; {errs[0] if errs else ''})")
            return WifiMode(mode, title, n, 0, 0, [], [], None, {}, [], [], got, witness,
                            _phase("idle", idle, None), None,
                            missing=f"{why}: " + ("; ".join(errs[:3]) or "see the witness lines"),
                            errors=errs[:10], heap_report=s.lines(d.heap_file))  # fmt: skip
        results, cpu, clock = _timed(s, d, sta, n)
        conn = _mark(s, d.hostapd, d.heap_file, 2)
        log = {"wpa_supplicant": s.lines(sta.logfile, sta1),
               "hostapd": s.lines(d.hostapd.logfile, ap1)}  # fmt: skip
        timed = connection_times(log["wpa_supplicant"])
        errors = []
        if len(timed) != results.count("ok"):
            errors.append(f"{len(timed)} connections in wpa_supplicant's lines, "
                          f"{results.count('ok')} reported ok")  # fmt: skip
        ms = [x.ms for x in timed]
        median = round(statistics.median(ms), 3) if ms else None
        if median is not None:
            per = statistics.mean if clock == "ticks" else statistics.median
            cpu_said = "no CPU times"
            if cpu:
                cpu_said = (f"CPU hostapd {per(a for a, _ in cpu):.1f} ms, wpa_supplicant "
                        f"{per(b for _, b in cpu):.1f} ms ({clock})")  # fmt: skip
            s.say(f"perf: {flavour}: wifi {mode}: median {median:.1f} ms of {len(ms)}, {cpu_said} "
                  f"(group {got.get('group', 'not reported')})")  # fmt: skip
        return WifiMode(
            mode, title, n, results.count("ok"), results.count("timeout"), ms,
            [x.auth_ms for x in timed], median, spread(ms),
            [round(a, 3) for a, _ in cpu], [round(b, 3) for _, b in cpu], got, witness,
            _phase("idle", idle, None), _phase("connections", conn, idle), errors=errors,
            log=log, heap_report=s.lines(d.heap_file), cpu_clock=clock,
        )  # fmt: skip
    finally:
        for server in (d.station, d.hostapd):
            if server is not None:
                s.place.stop(server)


def measure_modes(s: Session, flavour: str) -> dict[str, WifiMode]:
    return {mode: measure_mode(s, flavour, mode) for mode in modes()}


def metrics(modes: dict[str, WifiMode]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, m in modes.items():
        key = name.replace("-", "_")
        if m.median_ms is not None:
            out[f"wifi_{key}_ms"] = metric(m.median_ms, "ms")
        # per connection: the median of schedstat's ns; of 10 ms ticks, the mean (a median of
        # values that are multiples of 10 ms says little)
        per = statistics.mean if m.cpu_clock == "ticks" else statistics.median
        if m.median_ms is not None and m.ap_cpu_ms:
            out[f"wifi_{key}_ap_cpu_ms"] = metric(round(per(m.ap_cpu_ms), 3), "ms")
            out[f"wifi_{key}_sta_cpu_ms"] = metric(round(per(m.sta_cpu_ms), 3), "ms")
        if m.heap_idle is not None:
            out[f"hostapd_heap_idle_{key}"] = metric(m.heap_idle.live, "B")
        if m.heap_connections is not None:
            out[f"hostapd_heap_peak_{key}"] = metric(m.heap_connections.peak, "B")
    return out


def _guest(builds: dict[str, wpad.WpadBuild]) -> tuple[wifiguest.WifiGuest, VmSpec, str]:
    """The guest for these builds, how QEMU boots it, and the label of where it ran."""
    c = settings()
    tc = toolchain.find(spec.get_arch(wpad.ARCH), None)
    bs = spec.resolve("mbedtls", wpad.data()["release"], "openwrt", wpad.ARCH)  # for its flags
    shim = programs.shim("heaptrack", bs, tc)
    guest = wifiguest.build(
        [wifiguest.GuestPrograms(f, b.wpad, b.hostapd_cli, b.wpa_cli, b.libdir)
         for f, b in builds.items()],
        shim, configs(), tc.tool("gcc"),
    )  # fmt: skip
    vm_spec = VmSpec(kernel=guest.image, memory_mb=int(c["memory_mb"]), initrd=guest.initramfs,
                     append=guest.cmdline, extra=tuple(c["qemu_extra"]))  # fmt: skip
    version = proc.run([binary(vm_spec.kernel), "--version"], timeout=30).output.split()
    qemu = f"{binary(vm_spec.kernel)} {version[3] if len(version) > 3 else '?'}"
    machine = (f"{qemu} -M pc TCG {' '.join(c['qemu_extra'])}, Debian {guest.kernel.release}, "
               "mac80211_hwsim")  # fmt: skip
    return guest, vm_spec, machine


def _record(
    f: str, b: wpad.WpadBuild, modes_: dict[str, WifiMode], quick: bool, seconds: float,
    guest: wifiguest.WifiGuest, machine: str, loaded: str,
) -> WifiConnections:  # fmt: skip
    lib = b.library
    where = Where(target="vm", emulated=True, machine=machine, clock="guest instructions")
    common = NetCommon(
        flavour=f, library=f"{lib.title} {lib.version} {lib.config}"
        f"{' ' + lib.ecc if lib.ecc else ''}",
        backend=f"wpad-basic-{f} (CONFIG_TLS={wpad.data()['flavour'][f]['tls']})",
        userland_key=b.root.name, footprint_key=lib.cache_key,
        client="wpa_supplicant of the same wpad build", where=where, target="vm",
        emulated=True, quick=quick, metrics=metrics(modes_), seconds=round(seconds, 1),
    )  # fmt: skip
    return WifiConnections(
        common=common, modes=modes_,
        wpad={"root": str(b.root), "source": b.source, "patches": list(b.patches),
              "make_options": list(b.make_options), "files": [x.__dict__ for x in b.files],
              "notes": list(b.notes)},
        guest={"kernel": f"{guest.kernel.package} {guest.kernel.version}",
               "release": guest.kernel.release, "modules": " ".join(guest.modules),
               "proc_modules": loaded, "qemu": machine},
    )  # fmt: skip


def run(
    flavours: tuple[str, ...], *, quick: bool, store_dir: str | None,
    say: Callable[[str], None] = print,
) -> list[WifiConnections]:  # fmt: skip
    """Build, boot once, measure every flavour, store one record per flavour."""
    st = store.FileStore(paths.store_dir(store_dir))
    c = settings()
    builds = {f: wpad.build(f, say=say) for f in flavours}
    hosttools.ensure("wifi")
    guest, vm_spec, machine = _guest(builds)
    out = []
    say(f"perf: wifi: booting the x86_64 guest ({guest.kernel.package}, mac80211_hwsim)")
    boot = {k: float(c["timeouts"][k]) for k in ("booting", "console")}
    with VM(vm_spec, name="qemu-pc-wifi", timeouts=boot) as vm:
        vm.boot("shell")
        nets = vm.run("ls /sys/class/net", timeout=60).output
        if not {c["ap_interface"], c["sta_interface"]} <= set(nets.split()):
            raise WolfError(f"the guest has no {c['ap_interface']}/{c['sta_interface']} radios "
                            f"(interfaces: {' '.join(nets.split())})",
                            hint="; ".join(ln for ln in vm.console_log()
                                           if "wolf-wifi:" in ln)[:300] or None)  # fmt: skip
        loaded = vm.run("cat /proc/modules", timeout=60).output
        place = TargetPlace(vm, label="vm", emulated=True, address="")
        try:
            for f in flavours:
                start = time.monotonic()
                session = Session(place, quick, say, Layout.opt(f))
                results = measure_modes(session, f)
                rec = _record(f, builds[f], results, quick, time.monotonic() - start, guest,
                              machine, loaded)  # fmt: skip
                st.put(store.Record(kind=WIFI, key=record_key(f, "vm", "wifi"),
                                    release=builds[f].library.release,
                                    device=None, flavour=f, data=rec.to_dict()))  # fmt: skip
                out.append(rec)
        finally:
            place.close()
    return out
