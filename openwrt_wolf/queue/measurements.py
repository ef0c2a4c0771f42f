"""Measurements through a named queue: the worker next to a router (or a VM host) serves the
queue named after it (`invoke worker --queue redis://...#router-lab-1`) and runs the task there,
one job at a time per queue: a Redis lock named after the queue is held for the whole task, so
even two workers on one router's queue never reboot or flash it at the same time.

The task runs with a fresh store on the worker; the records it wrote travel back in the job's
result and the coordinator puts them into its own store unchanged. SSH keys and known_hosts
are the worker's (`invoke worker --key --known-hosts`): a job names a router, never a file."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rq import get_current_job

from ..errors import WolfError
from ..files.hashing import file_sha256
from ..results import store
from . import storage, worker_jobs

FUNC = f"{__name__}.run"
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,252}$")
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _host(v: Any) -> bool:
    return isinstance(v, str) and bool(_HOST.match(v))


def _name(v: Any) -> bool:
    return v is None or (isinstance(v, str) and bool(_NAME.match(v)))


def _count(lo: float, hi: float, kinds: tuple[type, ...] = (int,)) -> Callable[[Any], bool]:
    return lambda v: type(v) in kinds and lo <= v <= hi


# option -> check; a job must give exactly these
SPECS: dict[str, dict[str, Callable[[Any], bool]]] = {
    "measure-memory": {
        "host": _host,
        "device": _name,
        "flavour": _name,
        "release": _name,
        "boots": _count(1, 100),
        "idle": _count(0, 3600, (int, float)),
        "wait_up": _count(1, 3600, (int, float)),
        "port": lambda v: v is None or _count(1, 65535)(v),
        "user": lambda v: v is None or (isinstance(v, str) and bool(_USER.match(v))),
        "accept_new": lambda v: type(v) is bool,
    },
    "flash": {
        "device": lambda v: v is not None and _name(v),
        "host": _host,
        "port": _count(1, 65535),
        "user": lambda v: isinstance(v, str) and bool(_USER.match(v)),
        "flavour": _name,
        "release": _name,
        "keep_settings": lambda v: type(v) is bool,
        "accept_new": lambda v: type(v) is bool,
        "trust_new_key_after_wipe": lambda v: type(v) is bool,
        "wait_up": _count(1, 3600, (int, float)),
        "stock": lambda v: type(v) is bool,  # a stock image of a flavour the patch set makes
        # a file on the shared storage (the worker's --artifacts DIR) and its sha256
        "image": lambda v: isinstance(v, str) and v.startswith("/") and len(v) < 4096,
        "image_sha256": lambda v: isinstance(v, str) and bool(_SHA256.match(v)),
    },
}


def check(args: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(args, dict) or set(args) != {"task", "options"}:
        raise WolfError("measurement job: expected {task, options}")
    task, opts = args["task"], args["options"]
    spec = SPECS.get(task) if isinstance(task, str) else None
    if spec is None:
        raise WolfError(f"measurement job: unknown task {task!r}", hint=f"one of {sorted(SPECS)}")
    if not isinstance(opts, dict) or set(opts) != set(spec):
        raise WolfError(f"{task} job: options must be exactly {sorted(spec)}")
    bad = [k for k, ok in spec.items() if not ok(opts[k])]
    if bad:
        raise WolfError(f"{task} job: bad value for {', '.join(bad)}")
    return task, opts


def _measure_memory(o: dict[str, Any], into: Path, s: worker_jobs.Settings) -> None:
    from .. import term
    from ..measure import router

    ssh = {"port": o["port"], "user": o["user"], "key": s.key, "known_hosts": s.known_hosts,
           "accept_new": o["accept_new"]}  # fmt: skip
    router.measure(
        term.console(),
        store.FileStore(into),
        o["host"],
        {k: v for k, v in ssh.items() if v not in (None, False)},
        device=o["device"],
        flavour=o["flavour"],
        release=o["release"],
        boots=o["boots"],
        idle=float(o["idle"]),
        wait_up=float(o["wait_up"]),
    )


def _flash(o: dict[str, Any], into: Path, s: worker_jobs.Settings) -> None:
    """Flash an image from the shared storage: only a file under this worker's --artifacts
    directory, and only with the sha256 its build record gave."""
    from ..targets.router import upgrade

    if not s.artifacts or storage.is_url(s.artifacts):
        raise WolfError(
            "flash on a queue: this worker has no --artifacts DIR",
            hint="start it with --artifacts pointing at the shared images",
        )
    root = Path(s.artifacts).expanduser().resolve()
    img = Path(o["image"]).resolve()
    if not img.is_relative_to(root) or not img.is_file():
        raise WolfError(f"flash job: {img} is not an image under this worker's --artifacts {root}")
    if file_sha256(img) != o["image_sha256"]:
        raise WolfError(f"flash job: {img} is not the image of the build record (sha256 differs)")
    upgrade.flash(
        device=o["device"],
        host=o["host"],
        port=o["port"],
        user=o["user"],
        key=s.key,
        password=False,
        image=str(img),
        flavour=o["flavour"],
        keep_settings=o["keep_settings"],
        accept_new=o["accept_new"],
        release=o["release"],
        known_hosts=s.known_hosts,
        trust_new_key_after_wipe=o["trust_new_key_after_wipe"],
        wait_up=float(o["wait_up"]),
        store=str(into),
        stock=o["stock"],
    )


RUNNERS: dict[str, Callable[[dict[str, Any], Path, worker_jobs.Settings], None]] = {
    "measure-memory": _measure_memory,
    "flash": _flash,
}


def run(args: dict[str, Any]) -> dict[str, Any]:
    task, opts = check(args)
    job = get_current_job()
    assert job is not None
    limit = int(job.timeout) if job.timeout and job.timeout > 0 else 6 * 3600
    lock = job.connection.lock(
        f"openwrt-wolf:hardware:{job.origin}", timeout=limit + 60, blocking_timeout=limit
    )
    if not lock.acquire():
        raise WolfError(f"{job.origin}: another job held the hardware for {limit} s")
    try:
        with tempfile.TemporaryDirectory(prefix="openwrt-wolf-measure-") as tmp:
            RUNNERS[task](opts, Path(tmp), worker_jobs.current())
            return {"records": [r.to_dict() for r in store.FileStore(Path(tmp)).query()]}
    finally:
        lock.release()
