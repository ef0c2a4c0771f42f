"""Task glue for the queue: `invoke build --queue`, `invoke worker`, and measurements sent to a
router's or VM host's named queue (`invoke measure-memory --queue redis://...#router-lab-1`)."""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path
from typing import Any

from rq.job import JobStatus

from .. import paths, term
from ..build.jobs import Options, Outcome
from ..cli import integer
from ..errors import WolfError
from ..results import store
from . import coordinator, engine, measurements, storage, worker_jobs
from .url import BUILDS, QueueURL


def build(
    opts: Options, queue: str, *, retries: str | None = None, worker_timeout: str | None = None
) -> list[Outcome]:
    """The matrix on the queue: the table as a local build prints it; failed requests make
    one error line after it (their errors are in the store, kind build-failure)."""
    from ..build.table import show

    if opts.sources or opts.sources_urls:
        raise WolfError(
            "--sources/--sources-url are not queued yet: build them locally",
            hint="a worker fills the base feed's dl/ from OpenWrt's mirrors",
        )
    q = QueueURL.parse(queue)
    s = coordinator.Settings(
        retries=integer(retries, "--retries", default=2, minimum=0, maximum=100),
        timeout=integer(
            worker_timeout, "--worker-timeout", default=4 * 3600, minimum=1, maximum=7 * 86400
        ),
    )
    run = coordinator.build(opts, q, s)
    outs = [run.outcomes[j.key] for j in run.planned if j.key in run.outcomes]
    if outs:
        show(outs)
    if run.failures:
        first = next(iter(run.failures.values()))
        raise WolfError(
            f"{len(run.failures)} queued build(s) failed; first: {first.request.profile} "
            f"{first.request.flavour}: {first.error}",
            hint="their errors are in the store (kind build-failure); the same command retries",
        )
    return outs


WORKER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$")


def worker(
    *,
    queue: str | None,
    artifacts_to: str | None,
    mirror: str | None,
    store_dir: str | None,
    name: str | None,
    burst: bool,
    heartbeat: int | str,
    key: str | None,
    known_hosts: str | None,
) -> None:
    """Serve one queue until stopped (Ctrl-C finishes the job in hand first)."""
    q = QueueURL.parse(queue)
    beat = integer(heartbeat, "--heartbeat", default=engine.HEARTBEAT, minimum=1, maximum=3600)
    if artifacts_to and not storage.is_url(artifacts_to):
        d = Path(artifacts_to).expanduser()
        if not d.is_dir() or not os.access(d, os.W_OK):
            raise WolfError(
                f"--artifacts {d}: not a writable directory",
                hint="a directory every machine mounts, or an http(s) URL taking PUT",
            )
    for opt, p in (("--key", key), ("--known-hosts", known_hosts)):
        if p and not Path(p).expanduser().is_file():
            raise WolfError(f"{opt} {p}: no such file")
    wname = name or f"{socket.gethostname()}-{os.getpid()}"
    if not WORKER_NAME.match(wname):  # it is printed, logged by rq and stored in Redis
        raise WolfError(
            f"--name {wname[:64]!r}: not a worker name",
            hint="letters, digits, '.', '_', ':', '@' and '-', e.g. --name lab-pc-1",
        )
    conn = q.connect()
    worker_jobs.configure(
        worker_jobs.Settings(
            name=wname,
            store=store_dir,
            mirror=mirror,
            artifacts=artifacts_to,
            key=str(Path(key).expanduser()) if key else None,
            known_hosts=str(Path(known_hosts).expanduser()) if known_hosts else None,
        )
    )
    con = term.console(stderr=True)
    con.print(
        f"worker {wname} serving {q.shown()}: store {paths.store_dir(store_dir)}, "
        f"cache {paths.cache_dir()}, artifacts {storage.shown(artifacts_to)}",
        markup=False,
        soft_wrap=True,
    )
    w = engine.worker(conn, wname, q.name, beat)
    w.work(burst=burst, with_scheduler=False, logging_level="INFO")


def measure_on_queue(
    task: str, options: dict[str, Any], queue: str, store_dir: str | None, timeout: int = 6 * 3600
) -> list[Path]:
    """Send one measurement to a named queue (a router's or VM host's worker), wait for it,
    and put the records it wrote into the local store."""
    q = QueueURL.parse(queue)
    if q.name == BUILDS:
        raise WolfError(
            f"{task} --queue {q.shown()}: name the hardware's queue",
            hint="e.g. --queue redis://HOST:6379/0#router-lab-1",
        )
    args = {"task": task, "options": options}
    measurements.check(args)  # the worker checks again; this catches mistakes before enqueueing
    conn = q.connect()
    rq_q = engine.rq_queue(conn, q.name)
    job = rq_q.enqueue_call(
        measurements.FUNC,
        args=(args,),
        timeout=timeout,
        result_ttl=coordinator.KEEP,
        failure_ttl=coordinator.KEEP,
        description=f"{task} on {q.name}",
    )
    con = term.console(stderr=True)
    con.print(f"{task}: job {job.id} on {q.shown()}", markup=False, soft_wrap=True)
    st = store.FileStore(paths.store_dir(store_dir))
    with con.status(f"{task} waiting for the worker of {q.name}…"):
        while True:
            status = job.get_status()
            if status == JobStatus.FINISHED:
                break
            if status not in coordinator.WAITING:
                res = job.latest_result()
                text = (res.exc_string if res is not None else None) or f"job {status}"
                raise WolfError(f"{task} on {q.name} failed: {coordinator.error_line(text)}")
            time.sleep(0.5)
    result = job.return_value()
    if not isinstance(result, dict) or not isinstance(result.get("records"), list):
        raise WolfError(f"{task} on {q.name}: the worker returned no records")
    out = []
    for d in result["records"]:
        out.append(st.put(store.Record.from_dict(d, where=f"job {job.id}")))
        con.print(
            f"{task} on {q.name} ({job.worker_name}): record {out[-1]}",
            markup=False,
            soft_wrap=True,
        )
    return out


def measure_memory(
    *,
    queue: str,
    host: str | None,
    device: str | None,
    flavour: str | None,
    release: str | None,
    boots: int,
    idle: float,
    wait_up: float,
    port: int | None,
    user: str | None,
    accept_new: bool,
    local: dict[str, Any],
    store_dir: str | None,
) -> list[Path]:
    """`invoke measure-memory --host ADDR --queue URL#NAME`: the router's worker measures."""
    given = [f"--{k.replace('_', '-')}" for k, v in local.items() if v]
    if given:
        raise WolfError(
            f"measure-memory --queue: {', '.join(given)} name files or prompts on this machine",
            hint="the router's worker has its own: `invoke worker --key --known-hosts`",
        )
    if not host:
        raise WolfError(
            "measure-memory --queue measures a router: give --host ADDR",
            hint="the QEMU VM needs the image on the worker; run it there",
        )
    options = {
        "host": host,
        "device": device,
        "flavour": flavour,
        "release": release,
        "boots": boots,
        "idle": idle,
        "wait_up": wait_up,
        "port": port,
        "user": user,
        "accept_new": accept_new,
    }
    return measure_on_queue("measure-memory", options, queue, store_dir)


def flash(
    *,
    queue: str,
    device: str,
    host: str,
    port: int,
    user: str,
    image: str | None,
    flavour: str | None,
    keep_settings: bool,
    accept_new: bool,
    release: str | None,
    wait_up: float,
    local: dict[str, Any],
    store_dir: str | None,
    trust_new_key_after_wipe: bool = False,
    stock: bool = False,
) -> list[Path]:
    """`invoke flash --queue URL#NAME`: the router's worker flashes an image from the shared
    storage (--image PATH there, or the newest build record of --flavour)."""
    from ..catalogue import devices, flavours
    from ..targets.router import sysupgrade

    given = [f"--{k.replace('_', '-')}" for k, v in local.items() if v]
    if given:
        raise WolfError(
            f"flash --queue: {', '.join(given)} name files or prompts on this machine",
            hint="the router's worker has its own: `invoke worker --key --known-hosts`",
        )
    dev = devices.resolve(device, release)
    root = paths.store_dir(store_dir)
    fl = flavours.get(flavour).name if flavour else None
    want = None if not fl else "stock" if stock or not flavours.get(fl).patched else "patch-set"
    if image:
        img = sysupgrade.inspect(Path(image), dev, flavour=fl)
    elif fl:
        img = sysupgrade.from_store(store.FileStore(root), root, dev, fl, want)
    else:
        raise WolfError("nothing to flash", hint="give --image PATH or --flavour NAME")
    options = {
        "device": dev.profile,
        "host": host,
        "port": port,
        "user": user,
        "flavour": fl or img.flavour,
        "release": release,
        "keep_settings": keep_settings,
        "accept_new": accept_new,
        "trust_new_key_after_wipe": trust_new_key_after_wipe,
        "wait_up": wait_up,
        "stock": stock or img.variant == "stock",
        "image": str(img.path.resolve()),
        "image_sha256": img.sha256,
    }
    return measure_on_queue("flash", options, queue, store_dir)
