"""The Memory table: heaptrack (LD_PRELOAD) in the target's programs.

- uclient-fetch: one HTTPS download from the host's server; its exit report gives the peak of
  the whole process and its allocations.
- uhttpd: after one warm-up request, SIGUSR2 marks window the phases: `requests` sequential
  requests (peak; held heap = live after minus live before; allocations per request), the
  same again twice over (2x: the allocations must grow linearly), and `concurrent` connections
  open at the same moment (the client's barrier) each making one request (peak)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..errors import WolfError
from ..results.perf import HeapPhase, HeapUse, metric
from . import heap, net
from .netlab import NetLab, mark


def phase(name: str, requests: int, r: heap.HeapReport, prev: heap.HeapReport) -> HeapPhase:
    """One window between two SIGUSR2 marks: its peak, and live/allocs/frees as differences."""
    return HeapPhase(name=name, requests=requests, live=r.live - prev.live, peak=r.peak,
                     allocs=r.allocs - prev.allocs, frees=r.frees - prev.frees)  # fmt: skip


def _download(lab: NetLab) -> tuple[HeapPhase, str]:
    scratch = lab.place.scratch(f"{lab.flavour}-download")
    heap_out, out = f"{scratch}/heap-uclient-fetch.txt", f"{scratch}/download"
    with net.download_server(lab.pki) as port:
        url = f"https://localhost:{port}/{net.DOWNLOAD}"
        rc, text = lab.fetch(url, out, heap_out)
    size = (lab.pki.www / "download").stat().st_size
    got = Path(out).stat().st_size if Path(out).exists() else -1  # a file here (netlab.py)
    if rc != 0 or got != size:
        raise WolfError(f"uclient-fetch ({lab.flavour}) download failed: exit {rc}, "
                        f"{got} of {size} bytes: {text[-300:]}")  # fmt: skip
    raw = lab.place.read(heap_out)
    ends = [r for r in heap.parse(raw) if r.event == "exit"]
    if not ends:
        raise WolfError(f"uclient-fetch wrote no heap report to {heap_out}")
    e = ends[-1]
    return HeapPhase("download", 1, e.live, e.peak, e.allocs, e.frees), raw


def _requests(lab: NetLab, port: int, count: int, **kw: object) -> None:
    run = lab.probe_run(port, count=count, timeout=net.TIMEOUT + 30 * count, **kw)
    if run.failed or run.ok != count:
        raise WolfError(f"uhttpd ({lab.flavour}): {run.failed} of {count} requests failed: "
                        f"{(run.errors or [run.output[-300:]])[0]}")  # fmt: skip


def memory_metrics(download: HeapPhase, server: list[HeapPhase]) -> dict[str, dict[str, Any]]:
    """The Memory table's six rows from the download's exit report and uhttpd's phases
    (before, requests, double, concurrent): the lab's and bench/openwrt_vm.py's on an image."""
    req, conc = server[1], server[3]
    return {
        "download_heap_peak": metric(download.peak, "B"),
        "download_allocs": metric(download.allocs, "allocations"),
        "uhttpd_heap_peak": metric(req.peak, "B"),
        "uhttpd_heap_peak_concurrent": metric(conc.peak, "B"),
        "uhttpd_heap_held": metric(req.live, "B"),
        "uhttpd_allocs_per_request": metric(round(req.allocs / req.requests, 1), "allocations"),
    }


def measure(lab: NetLab) -> HeapUse:
    start = time.monotonic()
    n, conc, settle = int(lab.conf["requests"]), int(lab.conf["concurrent"]), lab.conf["settle"]
    lab.say(f"perf: {lab.flavour}: memory: uclient-fetch download")
    download, fetch_raw = _download(lab)
    heap_out = f"{lab.place.scratch(f'{lab.flavour}-uhttpd')}/heap-uhttpd.txt"
    Path(heap_out).unlink(missing_ok=True)
    phases = []
    lab.say(f"perf: {lab.flavour}: memory: uhttpd, {n}, {2 * n} and {conc} concurrent requests")
    with lab.uhttpd(heap_out) as (served, port):
        _requests(lab, port, 1)  # warm-up: first-use allocations are not per request
        m0 = mark(served, heap_out, lab.place, settle)
        phases.append(HeapPhase("before", 0, m0.live, m0.peak, m0.allocs, m0.frees))
        _requests(lab, port, n)
        m1 = mark(served, heap_out, lab.place, settle)
        phases.append(phase("requests", n, m1, m0))
        _requests(lab, port, 2 * n)
        m2 = mark(served, heap_out, lab.place, settle)
        phases.append(phase("double", 2 * n, m2, m1))
        _requests(lab, port, conc, jobs=conc, barrier=True)
        m3 = mark(served, heap_out, lab.place, settle)
        phases.append(phase("concurrent", conc, m3, m2))
    raw = lab.place.read(heap_out)
    metrics = memory_metrics(download, phases)
    for name, m in metrics.items():
        lab.say(f"perf: {lab.flavour}: {name} = {m['value']:,} {m['unit']}")
    return HeapUse(common=lab.common(metrics, time.monotonic() - start),
                   download_bytes=(lab.pki.www / "download").stat().st_size, download=download,
                   server=phases, reports={"uclient-fetch": fetch_raw, "uhttpd": raw})  # fmt: skip
