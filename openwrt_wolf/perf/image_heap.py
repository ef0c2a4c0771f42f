"""The lab's Memory test (perf/heap_use.py) on a real OpenWrt image's own programs, booted in
the malta VM: heaptrack (built with the image's toolchain) preloaded into its uclient-fetch,
for one 1 MiB download from the host verified against the image's own CA bundle directory,
and into its uhttpd (the lab's arguments, the image's px5g certificate), with SIGUSR2 marks
after one warm-up request, n, 2n and 4-at-once requests for a 1 KiB page from the host
through QEMU's port forward. The reference's method: "a small heap-tracking library loaded
into each process". Used by bench/openwrt_vm.py --only heap."""

from __future__ import annotations

import functools
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import WolfError
from ..results import store
from ..results.perf import MEMORY, HeapPhase, HeapUse
from ..targets.vm.machine import VM, lan_host
from . import heap, heap_use, image_boot, net

WOLF_HOST = "wolf-host"  # the host, as the guest's /etc/hosts names it for the download's SAN
DOWNLOAD_BYTES = 1 << 20
PAGE_BYTES = 1024
SETTLE = 1.0  # seconds uhttpd gets to finish a phase's connections before its mark


@dataclass(frozen=True)
class ImageHeap:
    download: HeapPhase
    download_bytes: int
    server: list[HeapPhase]  # before, requests, double, concurrent
    reports: dict[str, str]  # "uclient-fetch", "uhttpd": heaptrack's raw lines
    metrics: dict[str, dict[str, Any]]  # heap_use.memory_metrics


def download_pki(d: Path) -> net.Pki:
    """The lab's download (net.make_pki's file) behind a certificate for WOLF_HOST, signed by a
    CA the guest adds to its own bundle directory (/etc/ssl/certs). Made before the boot: a
    certificate newer than the guest's clock would not be valid yet."""
    pki = net.make_pki(d, PAGE_BYTES, DOWNLOAD_BYTES)
    ext = d / "ext-wolf-host"
    ext.write_text(f"subjectAltName=DNS:{WOLF_HOST}\nbasicConstraints=CA:FALSE\n")
    run = functools.partial(subprocess.run, cwd=d, check=True, timeout=60, capture_output=True)
    run(["openssl", "req", "-new", "-key", "srv.key", "-out", "host.csr", "-subj",
         f"/CN={WOLF_HOST}"])  # fmt: skip
    run(["openssl", "x509", "-req", "-in", "host.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
         "-CAcreateserial", "-extfile", ext.name, "-out", "host.crt", "-days", "30"])  # fmt: skip
    return net.Pki(pki.dir, pki.ca, d / "host.crt", pki.key, pki.www)


def insecure_context() -> ssl.SSLContext:
    """The host client's context: the image's px5g certificate is self-signed."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def https_get(
    port: int, path: str = "/", timeout: float = 60, ctx: ssl.SSLContext | None = None
) -> bytes:
    """One HTTP/1.0 GET over TLS to the forwarded uhttpd, read to the end: its first bytes."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw,
        (ctx or insecure_context()).wrap_socket(raw, server_hostname="OpenWrt") as s,
    ):
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: OpenWrt\r\n\r\n".encode())
        head = s.recv(64)
        while s.recv(65536):
            pass
        return head


def page_requests(port: int, n: int, at_once: bool = False) -> int:
    """n HTTPS GETs of /page, one after the other or all n connecting at the same moment (a
    barrier): how many got a 200."""
    ctx = insecure_context()
    gate = threading.Barrier(n) if at_once else None

    def one(_: int) -> bool:
        try:
            if gate:
                gate.wait(timeout=120)
            return b" 200 " in https_get(port, "/page", 120, ctx)[:16]
        except (OSError, ssl.SSLError, threading.BrokenBarrierError):
            return False

    if not at_once:
        return sum(one(i) for i in range(n))
    with ThreadPoolExecutor(n) as pool:
        return sum(pool.map(one, range(n)))


def _mark(vm: VM, out: str) -> heap.HeapReport:
    """SIGUSR2 to the preloaded uhttpd once its connections are done: its new mark line."""
    time.sleep(SETTLE)

    def marks() -> list[heap.HeapReport]:
        return [r for r in heap.parse(vm.run(f"cat {out}").output) if r.event == "mark"]

    n = len(marks())
    vm.run("kill -USR2 $(pidof uhttpd)")
    for _ in range(60):
        got = marks()
        if len(got) > n:
            return got[-1]
        time.sleep(0.5)
    raise WolfError(f"uhttpd wrote no heap mark to {out} in the image")


def measure(
    vm: VM, shim: Path, pki: net.Pki, https_port: int, requests: int,
    say: Callable[[str], None] = print,
) -> ImageHeap:  # fmt: skip
    """The six Memory rows of the image's own uclient-fetch and uhttpd (the VM booted to its
    network state, https_port forwarded to the guest's 443)."""
    host = lan_host(vm.spec.kernel)
    if host is None:
        raise WolfError("the VM has no lan: the image's uclient-fetch cannot reach the host")
    vm.put(shim, "/tmp/heaptrack.so", timeout=600)
    vm.put(pki.ca, "/etc/ssl/certs/wolf-perf-ca.crt")
    vm.run(f"grep -q ' {WOLF_HOST}$' /etc/hosts || echo '{host} {WOLF_HOST}' >> /etc/hosts")
    pre = f"LD_PRELOAD=/tmp/heaptrack.so {heap.ENV_OUT}"
    say("perf: memory: the image's uclient-fetch, 1 MiB over HTTPS")
    with net.download_server(pki) as dport:
        r = vm.run(f"rm -f /tmp/heap-fetch.txt /tmp/download; {pre}=/tmp/heap-fetch.txt "
                   f"uclient-fetch -q -O /tmp/download https://{WOLF_HOST}:{dport}/{net.DOWNLOAD}"
                   "; echo rc=$?; wc -c < /tmp/download", timeout=300)  # fmt: skip
    got = r.output.split()
    if "rc=0" not in got or got[-1] != str(DOWNLOAD_BYTES):
        clock = vm.run("date").output.strip()
        raise WolfError("the image's uclient-fetch download failed",
                        hint=f"{r.output[-300:]} (guest's clock: {clock})")  # fmt: skip
    fetch_raw = vm.run("cat /tmp/heap-fetch.txt").output
    ends = [x for x in heap.parse(fetch_raw) if x.event == "exit"]
    if not ends:
        raise WolfError("the image's uclient-fetch wrote no heap report")
    dl = ends[-1]
    out = "/tmp/heap-uhttpd.txt"
    say(f"perf: memory: the image's uhttpd, {requests}, {2 * requests} and 4-at-once requests")
    vm.run("/etc/init.d/uhttpd stop; sleep 1; dd if=/dev/urandom of=/www/page bs=1024 count=1 "
           f"2>/dev/null; rm -f {out}; ({pre}={out} uhttpd -f -h /www -s 0.0.0.0:443 "
           "-C /etc/uhttpd.crt -K /etc/uhttpd.key </dev/null >/dev/null 2>&1 &); sleep 2",
           timeout=60)  # fmt: skip
    try:
        phases, failed = _server_phases(vm, out, https_port, requests)
        raw = vm.run(f"cat {out}").output
    finally:
        vm.run("kill $(pidof uhttpd); sleep 1; /etc/init.d/uhttpd start; sleep 2", timeout=60)
    if failed:
        raise WolfError(f"{failed} requests to the image's preloaded uhttpd failed")
    download = HeapPhase("download", 1, dl.live, dl.peak, dl.allocs, dl.frees)
    return ImageHeap(download, DOWNLOAD_BYTES, phases, {"uclient-fetch": fetch_raw, "uhttpd": raw},
                     heap_use.memory_metrics(download, phases))  # fmt: skip


def _server_phases(vm: VM, out: str, port: int, n: int) -> tuple[list[HeapPhase], int]:
    deadline = time.monotonic() + 120
    while page_requests(port, 1) != 1:  # warm-up, and uhttpd is listening
        if time.monotonic() > deadline:
            raise WolfError("the image's preloaded uhttpd did not answer")
        time.sleep(2)
    m0 = _mark(vm, out)
    phases = [HeapPhase("before", 0, m0.live, m0.peak, m0.allocs, m0.frees)]
    failed = n - page_requests(port, n)
    m1 = _mark(vm, out)
    phases.append(heap_use.phase("requests", n, m1, m0))
    failed += 2 * n - page_requests(port, 2 * n)
    m2 = _mark(vm, out)
    phases.append(heap_use.phase("double", 2 * n, m2, m1))
    failed += 4 - page_requests(port, 4, at_once=True)
    m3 = _mark(vm, out)
    phases.append(heap_use.phase("concurrent", 4, m3, m2))
    return phases, failed


@dataclass(frozen=True)
class Request:
    flavour: str
    image: image_boot.Image
    requests: int  # n: the uhttpd phases are n, 2n and 4 at once
    quick: bool
    store: str | None


def run(req: Request, say: Callable[[str], None] = print) -> HeapUse:
    """`perf --target vm --test memory --image K --rootfs R --toolchain T`: boot the image,
    measure, store one perf-memory record keyed by the rootfs."""
    st = store.FileStore(paths.store_dir(req.store))
    req.image.check()
    with tempfile.TemporaryDirectory(prefix="wolf-image-heap-") as tmp:
        pki = download_pki(Path(tmp) / "pki")  # before the boot: the guest's clock is later
        with image_boot.booted(req.image, extra=(), name="qemu-image-heap", say=say) as b:
            got = measure(b.vm, b.shim, pki, b.https_port, req.requests, say)
    data = HeapUse(
        common=b.common(req.flavour, backend=f"libustream-{req.flavour} (the image's)",
                        client=f"python ssl, {ssl.OPENSSL_VERSION}; the image's uclient-fetch "
                        "from openssl s_server", metrics=got.metrics, quick=req.quick),
        download_bytes=got.download_bytes, download=got.download, server=got.server,
        reports=got.reports,
    )  # fmt: skip
    st.put(b.record(MEMORY, "memory", req.flavour, req.image.release, data.to_dict()))
    for phase in (got.download, *got.server[1:]):
        say(f"perf: {req.flavour}: memory: {phase.name}: peak {phase.peak:,} B, "
            f"{phase.allocs:,} allocations")  # fmt: skip
    return data
