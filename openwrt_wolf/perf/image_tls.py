"""`perf --target vm --test handshake --image K --rootfs R --toolchain T`: the lab's handshake
test (perf/handshake.py) against a real image's own uhttpd, booted by perf/image_boot.py.

The image's uhttpd is restarted with the lab's P-256 certificate (net.make_pki: the host's
client verifies it against the lab's CA for "localhost", as in the lab), on the port QEMU
forwards. Per group the host's `openssl s_client -brief` is the session's witness, then
tlsprobe times `repeats` full TLS 1.3 handshakes (no request, no resumption) offering only that
group and ecdsa_secp256r1_sha256, after one warm-up. The server's CPU per handshake is uhttpd's
utime+stime over them, read in the guest (/proc/PID/stat, 10 ms ticks: the total over all
handshakes divided by their number): the router's work, where the wall time adds QEMU's
network and the host's half of the handshake."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..errors import WolfError
from ..results import store
from ..results.perf import HANDSHAKE, Handshakes, metric
from ..targets.vm.machine import VM
from . import crypto, handshake, image_boot, net

TICK_MS = 10  # USER_HZ


@dataclass(frozen=True)
class Request:
    flavour: str
    image: image_boot.Image
    quick: bool
    store: str | None


def uhttpd_cpu(vm: VM) -> tuple[int, int]:
    """(utime, stime) of uhttpd (the master) in clock ticks: /proc/<pid>/stat fields 14 and
    15, counted after the ")" that ends the command name."""
    r = vm.run("p=$(pidof uhttpd | cut -d' ' -f1); cat /proc/$p/stat")
    fields = r.output.strip().rsplit(")", 1)[-1].split()
    if len(fields) < 13:
        raise WolfError(f"no uhttpd in the image to read its CPU time from: {r.output[-200:]}")
    return int(fields[11]), int(fields[12])


def uhttpd_ticks(vm: VM) -> int:
    return sum(uhttpd_cpu(vm))


def _serve(vm: VM, pki: net.Pki) -> None:
    """The image's uhttpd, alone, with the lab's certificate on 443."""
    vm.put(pki.cert, "/tmp/wolf-perf.crt")
    vm.put(pki.key, "/tmp/wolf-perf.key")
    vm.run("/etc/init.d/uhttpd stop; sleep 1; (uhttpd -f -h /www -s 0.0.0.0:443 "
           "-C /tmp/wolf-perf.crt -K /tmp/wolf-perf.key </dev/null >/dev/null 2>&1 &); sleep 2",
           timeout=60)  # fmt: skip


def run(req: Request, say: Callable[[str], None] = print) -> Handshakes:
    conf = crypto.settings()["net"]
    repeats = int(conf["quick" if req.quick else "full"]["handshakes"])
    st = store.FileStore(paths.store_dir(req.store))
    req.image.check()
    probe = net.probe()
    ms: dict[str, list[float]] = {}
    sessions: dict[str, str] = {}
    negotiated: dict[str, dict[str, str]] = {}
    missing: dict[str, str] = {}
    cpu_ms: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="wolf-image-tls-") as tmp:
        pki = net.make_pki(Path(tmp) / "pki", int(conf["page_bytes"]), 1024)  # before the boot
        with image_boot.booted(req.image, extra=(), name="qemu-image-tls", say=say) as b:
            _serve(b.vm, pki)
            port = b.https_port
            for group in conf["groups"]:
                pr = probe if group in handshake.HOST_LACKS else None
                sessions[group] = witness = net.s_client_brief("127.0.0.1", port, pki.ca, group,
                                                               pr)  # fmt: skip
                warm = net.run_probe(probe, "127.0.0.1", port, pki.ca, group=group,
                                     handshake_only=True)  # fmt: skip
                if warm.failed or not handshake.witness_ok(witness, group):
                    why = warm.errors[0] if warm.errors else witness[-300:]
                    missing[group] = f"the image refused a handshake offering only {group}: {why}"
                    say(f"perf: {req.flavour}: handshake {group}: none ({missing[group][:120]})")
                    continue
                t0 = uhttpd_ticks(b.vm)
                got = net.run_probe(probe, "127.0.0.1", port, pki.ca, group=group, count=repeats,
                                    handshake_only=True,
                                    timeout=net.TIMEOUT + 30 * repeats)  # fmt: skip
                time.sleep(1)  # the server's side of the last close
                ticks = uhttpd_ticks(b.vm) - t0
                if got.failed:
                    missing[group] = f"{got.failed} of {repeats} handshakes failed: {got.errors[0]}"
                    continue
                c = got.conns[0]
                negotiated[group] = {"version": c.version, "group": c.group, "sig": c.sig}
                ms[group] = [x.ms for x in got.conns]
                cpu_ms[group] = round(ticks * TICK_MS / repeats, 2)
                say(f"perf: {req.flavour}: handshake {group}: median "
                    f"{statistics.median(ms[group]):.2f} ms of {repeats}, uhttpd CPU "
                    f"{cpu_ms[group]:.1f} ms each ({ticks} ticks)")  # fmt: skip
    medians = {g: round(statistics.median(v), 3) for g, v in ms.items()}
    metrics = {f"handshake_{g}_ms": metric(v, "ms") for g, v in medians.items()}
    metrics |= {f"handshake_{g}_cpu_ms": metric(v, "ms") for g, v in cpu_ms.items()}
    data = Handshakes(
        common=b.common(req.flavour, backend=f"the image's uhttpd (libustream-{req.flavour})",
                        client=f"tlsprobe, {probe.openssl}", metrics=metrics, quick=req.quick),
        repeats=repeats, ms=ms, median_ms=medians, sessions=sessions, negotiated=negotiated,
        missing=missing, server_cpu_ms=cpu_ms,
    )  # fmt: skip
    st.put(b.record(HANDSHAKE, "handshake", req.flavour, req.image.release, data.to_dict()))
    return data
