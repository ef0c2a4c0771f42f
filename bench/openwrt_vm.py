"""Checks inside a real OpenWrt malta image booted in QEMU (issue 22), one flavour at a time:

1. the TLS libraries in the image: the files under /usr/lib and what `apk info` says is
   installed (the wolfSSL image must have no Mbed TLS at all);
2. uhttpd answers HTTPS: from the host through a QEMU port forward, with Python's ssl (the
   host's OpenSSL: an independent client), giving the negotiated protocol and cipher and the
   certificate the image made at boot (px5g-*, or openssl req on the OpenSSL image);
3. the image's own TLS client against it: `uclient-fetch https://127.0.0.1/` in the guest;
4. apk verifies a signed index: the build's packages.adb served over HTTP from the host
   (QEMU's user network: the host is 192.168.1.2 on the lan side), `apk update` against it
   must succeed with the build key the image trusts, and fail on a copy with one byte of the
   signature changed and (with --apk, a host apk-tools 3) on the same packages indexed and
   signed with another key;
5. uhttpd's memory (/proc/<pid>/status): after boot, after 20 HTTPS requests from the host
   (the handshake time of each: median and spread), and with 10 TLS sessions held open at
   once (per-connection RssAnon and VmData: the TLS library's state in uhttpd's heap);
6. the handshake's cost on the router's CPU (issue 35): --cpu-handshakes full TLS 1.3
   handshakes offering only X25519, then only P-256, against the image's P-256 certificate;
   uhttpd's utime+stime read in the guest over all of them, beside the host's wall times;
7. with --soak N: N HTTPS requests four at a time, --soak-downloads runs of the image's
   uclient-fetch and --soak-updates `apk update`s; failures and uhttpd's memory before/after.

With --rootfs IMG (…-rootfs-squashfs.img.gz) and --image the kernel without initramfs
(…-vmlinux.elf), the image boots as a router does, its squashfs and overlay on a disk of its
own, after one first boot that is not measured.

Run (after `./wolf build --tree T --device malta-be --flavour F`):
  .venv/bin/python bench/openwrt_vm.py \\
      --image T/bin/targets/malta/be/openwrt-malta-be-vmlinux-initramfs.elf \\
      --packages T/bin/packages/mips_24kc --flavour wolfssl [--json out.json] \\
      [--apk T/staging_dir/host/bin/apk] [--store DIR]
With --store (or $OPENWRT_WOLF_STORE) the figures become a "perf-image" record
(openwrt_wolf/results/perf.py ImageServer), which `./wolf size-report` shows in its Memory
and Performance tables beside the lab's. Emulated (TCG): times are QEMU's, not a router's.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openwrt_wolf import paths
from openwrt_wolf.files.hashing import file_sha256
from openwrt_wolf.perf import image_boot, image_heap
from openwrt_wolf.perf.image_heap import https_get, insecure_context
from openwrt_wolf.perf.image_tls import uhttpd_cpu, uhttpd_ticks
from openwrt_wolf.results.perf import (
    IMAGE,
    MEMORY,
    HeapPhase,
    HeapUse,
    ImageServer,
    NetCommon,
    Where,
    metric,
    record_key,
)
from openwrt_wolf.results.store import FileStore, Record
from openwrt_wolf.targets.vm import qemu
from openwrt_wolf.targets.vm.kernel import private_disk
from openwrt_wolf.targets.vm.machine import VM, lan_host
from openwrt_wolf.targets.vm.qemu import spec_for

TLS_FILES = r"^lib(mbedtls|mbedx509|mbedcrypto|wolfssl|ssl|crypto|ustream-ssl)"


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, int]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, int(srv.server_address[1])


def https_from_host(port: int, deadline: float) -> dict[str, Any]:
    """GET / over TLS through the forward, retried until uhttpd listens (it starts once the
    certificate exists)."""
    ctx = insecure_context()
    last = ""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
                t = time.monotonic()
                with ctx.wrap_socket(raw, server_hostname="OpenWrt") as s:
                    took = time.monotonic() - t
                    s.sendall(b"GET / HTTP/1.0\r\nHost: OpenWrt\r\n\r\n")
                    head = s.recv(200).split(b"\r\n", 1)[0].decode(errors="replace")
                    der = s.getpeercert(binary_form=True) or b""
                    return {"ok": True, "version": s.version(), "cipher": s.cipher()[0],
                            "status": head, "handshake_s": round(took, 3),
                            "certificate_bytes": len(der), "der": der}  # fmt: skip
        except (OSError, ssl.SSLError) as e:
            last = f"{type(e).__name__}: {e}"
            time.sleep(3)
    return {"ok": False, "error": last}


def uhttpd_memory(vm: VM) -> dict[str, int]:
    """kB from the kernel's own accounting of the uhttpd process (the first, the master):
    /proc/<pid>/status (generic OpenWrt kernels have no smaps: PROC_PAGE_MONITOR is off)."""
    fields = "VmPeak|VmSize|VmHWM|VmRSS|RssAnon|RssFile|VmData"
    r = vm.run(f"p=$(pidof uhttpd | cut -d' ' -f1); grep -E '^({fields}):' /proc/$p/status")
    out: dict[str, int] = {}
    for line in r.output.splitlines():
        k, _, v = line.partition(":")
        if v.strip().endswith("kB"):
            out[k.strip()] = int(v.split()[0])
    return out


def handshakes(port: int, n: int) -> dict[str, Any]:
    times = []
    for _ in range(n):
        r = https_from_host(port, time.monotonic() + 60)
        if r.get("ok"):
            times.append(r["handshake_s"])
    if not times:
        return {"ok": 0}
    return {"ok": len(times), "median_s": statistics.median(times), "min_s": min(times),
            "max_s": max(times), "times_s": times}  # fmt: skip


def cpu_split(vm: VM, https_port: int, http_port: int, n: int) -> dict[str, Any]:
    """Where uhttpd's CPU per handshake goes, measured rather than derived: per connection,
    user and system ticks for (a) a plain HTTP/1.0 request on port 80 (no TLS at all), (b) a
    TLS 1.3 handshake closed without a request, (c) a handshake with its request (the
    handshake_cpu figure), for X25519 and P-256 key exchange."""
    ctx = insecure_context()
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3

    def plain() -> None:
        with socket.create_connection(("127.0.0.1", http_port), timeout=30) as s:
            s.sendall(b"GET / HTTP/1.0\r\nHost: OpenWrt\r\n\r\n")
            while s.recv(65536):
                pass

    def tls(request: bool) -> None:
        if request:
            https_get(https_port, "/", 30, ctx)
            return
        with (
            socket.create_connection(("127.0.0.1", https_port), timeout=30) as raw,
            ctx.wrap_socket(raw, server_hostname="OpenWrt"),
        ):
            pass

    out: dict[str, Any] = {}
    cases: list[tuple[str, str | None, Any]] = [("plain_http", None, plain)]
    for kex in GROUPS:
        cases += [(f"handshake_only_{kex}", kex, lambda: tls(False)),
                  (f"handshake_request_{kex}", kex, lambda: tls(True))]  # fmt: skip
    for name, kex, fn in cases:
        if kex:
            ctx.set_ecdh_curve(GROUPS[kex])
        u0, s0 = uhttpd_cpu(vm)
        failed = 0
        for _ in range(n):
            try:
                fn()
            except (OSError, ssl.SSLError):
                failed += 1
        time.sleep(1)  # the server's side of the last close
        u1, s1 = uhttpd_cpu(vm)
        done = n - failed
        out[name] = {"connections": done, "failed": failed, "utime_ticks": u1 - u0,
                     "stime_ticks": s1 - s0,
                     "user_ms": round((u1 - u0) * 10 / done, 2) if done else None,
                     "system_ms": round((s1 - s0) * 10 / done, 2) if done else None}  # fmt: skip
    return out


GROUPS = {"x25519": "X25519", "p256": "prime256v1"}  # the host client's only offered group


def handshake_cpu(vm: VM, port: int, kex: str, n: int) -> dict[str, Any]:
    """``n`` full TLS 1.3 handshakes (each with its one HTTP/1.0 request) offering only one key
    exchange group, timed twice: uhttpd's CPU time in the guest over all of them, and each
    one's wall time at the host. The CPU figure is the router's work; the wall time adds the
    emulator's network and the host's own half of the handshake."""
    ctx = insecure_context()
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_ecdh_curve(GROUPS[kex])
    before = uhttpd_ticks(vm)
    walls, failed = [], 0
    for _ in range(n):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
                t = time.monotonic()
                with ctx.wrap_socket(raw, server_hostname="OpenWrt") as s:
                    walls.append(time.monotonic() - t)
                    s.sendall(b"GET / HTTP/1.0\r\nHost: OpenWrt\r\n\r\n")
                    while s.recv(65536):
                        pass
        except (OSError, ssl.SSLError):
            failed += 1
    ticks = uhttpd_ticks(vm) - before
    done = n - failed
    return {
        "group": GROUPS[kex], "handshakes": done, "failed": failed, "cpu_ticks": ticks,
        "cpu_ms_per_handshake": round(ticks * 10 / done, 2) if done else None,
        "wall_median_ms": round(statistics.median(walls) * 1000, 2) if walls else None,
    }  # fmt: skip


def soak(vm: VM, port: int, a: argparse.Namespace, index_url: str) -> dict[str, Any]:
    """Issue 35's soak: ``a.soak`` HTTPS requests from the host, four at a time, then
    ``a.soak_downloads`` downloads by the image's own uclient-fetch and ``a.soak_updates``
    `apk update` runs against the build's signed index; failures counted, uhttpd's memory
    before and after (a leak shows as RssAnon that stays)."""
    from concurrent.futures import ThreadPoolExecutor

    ctx = insecure_context()

    def one(i: int) -> str | None:
        """None for a 200, else what went wrong (kept: issue 35 asks the soak to name them)."""
        t = time.monotonic() - t0
        try:
            head = https_get(port, ctx=ctx)
            if head.startswith(b"HTTP/1.") and b" 200 " in head[:16]:
                return None
            return f"#{i} at {t:.1f} s: answer {head[:32]!r}"
        except (OSError, ssl.SSLError) as e:
            return f"#{i} at {t:.1f} s: {type(e).__name__}: {e}"

    pids = [vm.run("pidof uhttpd").output.strip()]
    before = uhttpd_memory(vm)
    t0 = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        errors = [e for e in pool.map(one, range(a.soak)) if e is not None]
    requests_s = round(time.monotonic() - t0, 1)
    after_requests = uhttpd_memory(vm)
    fetch = ("uclient-fetch -q -O /dev/null --no-check-certificate https://127.0.0.1/ "
             "|| f=$((f+1))")  # fmt: skip
    dl_fail = _loop_failures(vm, fetch, a.soak_downloads, 30 + 10 * a.soak_downloads)
    upd = (f"apk --repositories-file /dev/null -X {index_url} update >/dev/null 2>&1 "
           "|| f=$((f+1))")  # fmt: skip
    up_fail = _loop_failures(vm, upd, a.soak_updates, 60 + 120 * a.soak_updates)
    return {
        "requests": a.soak, "request_failures": len(errors), "requests_s": requests_s,
        "request_errors": errors[:200],
        "logread_tail": vm.run("logread | tail -n 40").output.splitlines() if errors else [],
        # a uhttpd that died shows as a new pid (procd respawns it) and in the kernel's log
        "uhttpd_pids": [*pids, vm.run("pidof uhttpd").output.strip()],
        "dmesg_tail": vm.run("dmesg | tail -n 30").output.splitlines() if errors else [],
        "downloads": a.soak_downloads, "download_failures": dl_fail,
        "updates": a.soak_updates, "update_failures": up_fail,
        "uhttpd_before_kB": before, "uhttpd_after_requests_kB": after_requests,
        "uhttpd_after_kB": uhttpd_memory(vm),
    }  # fmt: skip


def _loop_failures(vm: VM, command: str, n: int, timeout: float) -> int:
    """Run ``command`` (which adds 1 to $f when it fails) n times in the guest: the failures,
    or -1 when the loop's own count did not come back."""
    r = vm.run(f"f=0; for i in $(seq {n}); do {command}; done; echo fails=$f", timeout=timeout)
    m = re.search(r"^fails=(\d+)$", r.output, re.M)
    return int(m.group(1)) if m else -1


def heap_in_image(
    vm: VM, a: argparse.Namespace, work: Path, pki: Any, https_port: int
) -> dict[str, Any]:
    """The lab's Memory test on the image's own programs (openwrt_wolf/perf/image_heap.py)."""
    so = image_boot.heaptrack("mips_24kc", str(a.heap_toolchain), a.release)
    got = image_heap.measure(vm, so, pki, https_port, a.requests, say=print)
    return {
        "download": asdict(got.download),
        "download_bytes": got.download_bytes,
        "server": [asdict(p) for p in got.server],
        "reports": got.reports,
        "metrics": got.metrics,
    }


def certificate_key(der: bytes) -> str:
    """The server certificate's key, as the host's openssl names it (px5g's default: P-256)."""
    pem = ssl.DER_cert_to_PEM_cert(der)
    r = subprocess.run(["openssl", "x509", "-noout", "-text"], input=pem, capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    keep = ("Public Key Algorithm", "Public-Key", "NIST CURVE", "ASN1 OID")
    lines = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith(keep)]
    return "; ".join(dict.fromkeys(lines))


def held_connections(vm: VM, port: int, n: int) -> dict[str, Any]:
    """uhttpd's memory with ``n`` TLS sessions open at once (handshake done, request not yet
    complete, so uhttpd keeps each session's state): the per-connection cost from the kernel's
    RssAnon and VmData of the process, against the same figures before."""
    ctx = insecure_context()
    before = uhttpd_memory(vm)
    held = []
    try:
        for _ in range(n):
            raw = socket.create_connection(("127.0.0.1", port), timeout=30)
            s = ctx.wrap_socket(raw, server_hostname="OpenWrt")
            s.sendall(b"GET / HTTP/1.0\r\n")  # no blank line: the request stays open
            held.append(s)
        during = uhttpd_memory(vm)
    finally:
        for s in held:
            s.close()
    per = {k: round((during.get(k, 0) - before.get(k, 0)) / n, 1) for k in ("RssAnon", "VmData")}
    return {"open": len(held), "before_kB": before, "during_kB": during, "per_connection_kB": per}


def other_key_index(apk: Path, src: Path, dest: Path) -> None:
    """The same packages indexed and signed as OpenWrt's build does (apk mkndx --sign), with a
    P-256 key the image does not trust."""
    shutil.copytree(src, dest)
    key = dest.parent / "other-key.pem"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out",
                    str(key)], check=True, timeout=60)  # fmt: skip
    (dest / "packages.adb").unlink()
    names = sorted(p.name for p in dest.glob("*.apk"))
    subprocess.run([str(apk), "mkndx", "--allow-untrusted", "--sign", str(key), "--output",
                    "packages.adb", *names], cwd=dest, check=True, timeout=300)  # fmt: skip


def image_record(out: dict[str, Any], spec: qemu.VmSpec, a: argparse.Namespace) -> Record:
    """The figures as a perf-image record (ImageServer): what the comparison report reads."""
    held = out["uhttpd_held"]
    times = out["handshakes"].get("times_s", [])  # none when no handshake succeeded
    data = ImageServer(
        flavour=a.flavour,
        image=str(a.image),
        image_sha256=file_sha256(a.image),
        where=Where("vm", True, f"{qemu.binary(spec.kernel)} -M malta -m {spec.memory()}", "wall"),
        target="vm",
        emulated=True,
        tls_packages=out["tls_packages"],
        mbedtls_present=out["mbedtls_present"],
        negotiated={k: out["https_host"][k] for k in ("version", "cipher")},
        requests=a.requests,
        held=held["open"],
        handshake_s=times,
        uhttpd_kB={
            "idle": out["uhttpd_idle_kB"],
            "requests": out["uhttpd_after_requests_kB"],
            "held": held["during_kB"],
        },
        handshake_cpu=out["handshake_cpu"],
        soak=out.get("soak", {}),
        cpu_split=out.get("cpu_split", {}),
        host_load=out.get("host_load", []),
        root=out["root"],
        apk_exit={
            k.removeprefix("apk_update_"): v["exit"]
            for k, v in out.items()
            if k.startswith("apk_update_")
        },
        metrics={
            "rss_uhttpd_idle": metric(out["uhttpd_idle_kB"]["VmRSS"], "kB"),
            **{
                f"image_handshake_cpu_ms_{kex}": metric(c["cpu_ms_per_handshake"], "ms")
                for kex, c in out["handshake_cpu"].items()
                if c["cpu_ms_per_handshake"] is not None
            },
            "uhttpd_rss_per_session": metric(held["per_connection_kB"]["RssAnon"], "kB"),
            **(
                {"image_handshake_ms": metric(round(statistics.median(times) * 1000, 1), "ms")}
                if times
                else {}
            ),
        },
    )
    disk = "-disk" if out["root"] == "disk" else ""
    key = record_key(a.flavour, "vm", f"image-{data.image_sha256[:12]}{disk}")
    return Record(IMAGE, key, a.release, a.device, a.flavour, data.to_dict())


def heap_record(out: dict[str, Any], spec: qemu.VmSpec, a: argparse.Namespace) -> Record:
    """The image's heap figures as a perf-memory record (HeapUse), keyed by the image as the
    perf-image record is: the comparison shows them as their own rows (device malta-be)."""
    h = out["heap"]
    sha = file_sha256(a.image)
    where = Where("vm", True, f"{qemu.binary(spec.kernel)} -M malta -m {spec.memory()}", "wall")
    data = HeapUse(
        common=NetCommon(
            flavour=a.flavour, library="the image's: " + ", ".join(out["tls_packages"]),
            backend=f"libustream-{a.flavour} (the image's)", userland_key=f"image-{sha[:12]}",
            footprint_key="", client=f"python ssl, {ssl.OPENSSL_VERSION}; the image's "
            "uclient-fetch from openssl s_server", where=where, target="vm", emulated=True,
            quick=False, metrics=h["metrics"], seconds=h["seconds"],
        ),
        download_bytes=h["download_bytes"],
        download=HeapPhase(**h["download"]),
        server=[HeapPhase(**p) for p in h["server"]],
        reports=h["reports"],
    )  # fmt: skip
    disk = "-disk" if out["root"] == "disk" else ""
    key = record_key(a.flavour, "vm", f"image-{sha[:12]}{disk}")
    return Record(MEMORY, key, a.release, a.device, a.flavour, data.to_dict())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", required=True, type=Path)
    ap.add_argument("--packages", required=True, type=Path, help="bin/packages/<arch>")
    ap.add_argument("--flavour", required=True)
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--apk", type=Path, help="host apk-tools 3 (the tree's staging_dir/host/bin/apk)"
    )
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--held", type=int, default=10, help="TLS sessions held open at once")
    ap.add_argument("--cpu-handshakes", type=int, default=100,
                    help="handshakes per key exchange, uhttpd's CPU time")  # fmt: skip
    ap.add_argument("--rootfs", type=Path,
                    help="boot the kernel without initramfs with this rootfs image as its disk "
                    "(a copy of its own), as a router boots from flash")  # fmt: skip
    ap.add_argument("--soak", type=int, default=0,
                    help="soak: HTTPS requests four at a time (issue 35: 5000)")  # fmt: skip
    ap.add_argument("--soak-downloads", type=int, default=200)
    ap.add_argument("--soak-updates", type=int, default=5)
    ap.add_argument("--heap-toolchain", type=Path,
                    help="the OpenWrt toolchain that built the image (staging_dir/toolchain-*): "
                    "heaptrack built with it, preloaded into the image's uclient-fetch and "
                    "uhttpd (a perf-memory record)")  # fmt: skip
    ap.add_argument("--only", choices=("heap", "cpu"),
                    help="only one test after the boot: heap (needs --heap-toolchain) or cpu "
                    "(where uhttpd's CPU per connection goes: plain HTTP, handshake alone, "
                    "handshake and request; JSON only)")  # fmt: skip
    ap.add_argument("--store", type=Path, help="results store (default: $OPENWRT_WOLF_STORE)")
    ap.add_argument("--release", default="25.12.5")
    ap.add_argument("--device", default="malta-be")
    a = ap.parse_args()
    if a.only == "heap" and not a.heap_toolchain:
        ap.error("--only heap needs --heap-toolchain")
    out: dict[str, Any] = {"image": str(a.image), "flavour": a.flavour}
    https_port = qemu.free_port()
    with contextlib.ExitStack() as stack:
        disk = stack.enter_context(private_disk(a.rootfs)) if a.rootfs else None
        spec = spec_for(a.image, rootfs=disk)
        http_port = qemu.free_port()
        forwards = ((https_port, 443), (http_port, 80))
        spec = qemu.VmSpec(**{**spec.__dict__, "forwards": forwards})
        if disk:  # the first boot after flashing (overlay, uci-defaults) is not the one measured
            with VM(spec) as first:
                first.boot("network")
        return run(a, out, spec, https_port, http_port)


def checks(vm: VM, a: argparse.Namespace, out: dict[str, Any], https_port: int, http_port: int,
           port: int, cases: list[str]) -> None:  # fmt: skip
    """uhttpd's memory and handshakes, the image's own HTTPS client, apk's signature checks,
    the soak: the image's server and client as the bench has measured them since issue 22."""
    vm.run("sleep 5")
    out["uhttpd_idle_kB"] = uhttpd_memory(vm)
    out["https_host"] = https_from_host(https_port, time.monotonic() + 300)
    der = out["https_host"].pop("der", b"")
    out["https_host"]["certificate_key"] = certificate_key(der) if der else ""
    out["handshakes"] = handshakes(https_port, a.requests)
    out["host_load"] = [round(os.getloadavg()[0], 2)]
    out["handshake_cpu"] = {
        kex: handshake_cpu(vm, https_port, kex, a.cpu_handshakes) for kex in GROUPS
    }
    out["cpu_split"] = cpu_split(vm, https_port, http_port, a.cpu_handshakes)
    out["host_load"].append(round(os.getloadavg()[0], 2))
    out["uhttpd_after_requests_kB"] = uhttpd_memory(vm)
    out["uhttpd_held"] = held_connections(vm, https_port, a.held)
    r = vm.run("uclient-fetch -q -O - --no-check-certificate https://127.0.0.1/ "
               "| head -c 64", timeout=120)  # fmt: skip
    out["https_guest"] = {"exit": r.exit_status, "head": r.output.strip()[:64]}
    for name in cases:
        url = f"http://{lan_host(vm.spec.kernel)}:{port}/{name}/packages.adb"
        r = vm.run(f"apk --repositories-file /dev/null -X {url} update 2>&1",
                   timeout=300)  # fmt: skip
        out[f"apk_update_{name}"] = {"exit": r.exit_status,
                                     "output": r.output.strip()[-300:]}  # fmt: skip
    if a.soak:
        index = f"http://{lan_host(vm.spec.kernel)}:{port}/good/packages.adb"
        out["soak"] = soak(vm, https_port, a, index)
    mem = vm.run("grep -E '^(MemTotal|MemFree|MemAvailable):' /proc/meminfo")
    out["meminfo_after_checks"] = mem.output.split("\n")


def run(
    a: argparse.Namespace, out: dict[str, Any], spec: qemu.VmSpec, https_port: int, http_port: int
) -> int:
    out["root"] = "disk" if spec.rootfs else "initramfs"
    with tempfile.TemporaryDirectory(prefix="wolf-vm-repo-") as tmp:
        repo = Path(tmp)
        shutil.copytree(a.packages / "base", repo / "good")
        shutil.copytree(a.packages / "base", repo / "bad")
        bad = repo / "bad" / "packages.adb"
        data = bytearray(bad.read_bytes())
        data[-40] ^= 0x01  # inside the signature block at the end of the adb file
        bad.write_bytes(bytes(data))
        cases = ["good", "bad"]
        if a.apk:
            other_key_index(a.apk, a.packages / "base", repo / "otherkey")
            cases.append("otherkey")
        srv, port = serve(repo)
        # made before the boot: a certificate newer than the guest's clock is not valid yet
        pki = image_heap.download_pki(repo / "pki") if a.heap_toolchain else None
        try:
            with VM(spec) as vm:
                t0 = time.monotonic()
                vm.boot("network")
                out["boot_s"] = round(time.monotonic() - t0, 1)
                libs = vm.run(f"ls /usr/lib | grep -E '{TLS_FILES}'").output.split()
                installed = vm.run("apk info 2>/dev/null").output.split()
                out["tls_files"] = sorted(libs)
                out["tls_packages"] = sorted(
                    p for p in installed
                    if any(k in p for k in ("mbedtls", "wolfssl", "openssl", "ustream", "px5g"))
                )  # fmt: skip
                out["mbedtls_present"] = any("mbed" in x for x in libs + installed)
                out["tls_file_bytes"] = vm.run(
                    f"cd /usr/lib && ls -lL | grep -E ' {TLS_FILES[1:]}' | awk '{{print $9, $5}}'"
                ).output.split("\n")
                if not a.only:
                    checks(vm, a, out, https_port, http_port, port, cases)
                if a.only == "cpu":
                    vm.run("sleep 5")
                    out["cpu_split"] = cpu_split(vm, https_port, http_port, a.cpu_handshakes)
                if a.heap_toolchain and a.only != "cpu":
                    t = time.monotonic()
                    out["heap"] = heap_in_image(vm, a, repo, pki, https_port)
                    out["heap"]["seconds"] = round(time.monotonic() - t, 1)
        finally:
            srv.shutdown()
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        a.json.write_text(text + "\n")
    if a.store or "OPENWRT_WOLF_STORE" in os.environ:
        store = FileStore(a.store or paths.store_dir())
        if not a.only:
            print(f"record: {store.put(image_record(out, spec, a))}")
        if "heap" in out:
            print(f"record: {store.put(heap_record(out, spec, a))}")
    if a.flavour == "wolfssl" and out["mbedtls_present"]:
        return 1
    if a.only:
        return 0
    ok = bool(out["https_host"].get("ok")) and out["https_guest"]["exit"] == 0
    ok = ok and out["apk_update_good"]["exit"] == 0 and out["apk_update_bad"]["exit"] != 0
    ok = ok and out.get("apk_update_otherkey", {"exit": 1})["exit"] != 0
    if "soak" in out:
        k = out["soak"]
        ok = ok and k["request_failures"] == k["download_failures"] == k["update_failures"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
