"""The soak: `soak_requests` HTTPS requests to uhttpd, `soak_jobs` at a time, then
`soak_downloads` uclient-fetch downloads from the host's server; every failure counted (by
the client: the probe's own count, uclient-fetch's exit status and the file's size), and
uhttpd's held heap (heaptrack marks) before and after."""

from __future__ import annotations

import time
from pathlib import Path

from ..results.perf import Soak, metric
from . import net
from .netlab import NetLab, mark

KEEP_ERRORS = 10
PROGRESS_EVERY = 10  # progress lines per phase


def measure(lab: NetLab) -> Soak:
    start = time.monotonic()
    n, jobs, downloads = (int(lab.conf[k]) for k in ("soak_requests", "soak_jobs",
                                                     "soak_downloads"))  # fmt: skip
    settle = float(lab.conf["settle"])
    scratch = Path(lab.place.scratch(f"{lab.flavour}-soak"))  # a file here (netlab.py)
    heap_out = str(scratch / "heap-uhttpd.txt")
    Path(heap_out).unlink(missing_ok=True)
    errors: list[str] = []
    done = [0]
    step = max(1, n // PROGRESS_EVERY)

    def progress(line: str) -> None:
        if line.startswith("conn "):
            done[0] += 1
            if done[0] % step == 0:
                lab.say(f"perf: {lab.flavour}: soak: {done[0]}/{n} requests")

    with lab.uhttpd(heap_out) as (served, port):
        lab.probe_run(port, count=jobs, jobs=jobs)  # warm-up
        before = mark(served, heap_out, lab.place, settle)
        run = lab.probe_run(port, count=n, jobs=jobs, on_line=progress,
                            timeout=net.TIMEOUT + 10.0 * n)  # fmt: skip
        after = mark(served, heap_out, lab.place, settle)
    errors += run.errors[:KEEP_ERRORS]
    size = (lab.pki.www / "download").stat().st_size
    ok = 0
    exits: dict[str, int] = {}
    with net.download_server(lab.pki) as dport:
        for i in range(downloads):
            out = scratch / "download"
            out.unlink(missing_ok=True)
            rc, text = lab.fetch(f"https://localhost:{dport}/{net.DOWNLOAD}", str(out))
            exits[str(rc)] = exits.get(str(rc), 0) + 1
            if rc == 0 and out.exists() and out.stat().st_size == size:
                ok += 1
            elif len(errors) < 2 * KEEP_ERRORS:
                errors.append(f"download {i}: exit {rc}: {text.strip()[-200:]}")
            if (i + 1) % max(1, downloads // PROGRESS_EVERY) == 0:
                lab.say(f"perf: {lab.flavour}: soak: {i + 1}/{downloads} downloads")
    failed = run.failed + (n - run.ok - run.failed) + (downloads - ok)
    metrics = {
        "soak_failed": metric(failed, "requests"),
        "soak_heap_held_before": metric(before.live, "B"),
        "soak_heap_held_after": metric(after.live, "B"),
    }
    lab.say(f"perf: {lab.flavour}: soak: {run.ok}/{n} requests and {ok}/{downloads} downloads "
            f"ok; uhttpd live heap {before.live:,} B before, {after.live:,} B after")  # fmt: skip
    return Soak(common=lab.common(metrics, time.monotonic() - start), requests=n, jobs=jobs,
                requests_ok=run.ok, requests_failed=n - run.ok, downloads=downloads,
                downloads_ok=ok, downloads_failed=downloads - ok, held_before=before.live,
                held_after=after.live, errors=errors, client_summary=run.summary,
                download_exits=exits)  # fmt: skip
