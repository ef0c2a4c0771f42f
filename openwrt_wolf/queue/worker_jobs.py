"""The job functions a worker may run, and the checks on their arguments.

A job's arguments are one JSON object. Every field is checked against the catalogue (devices,
flavours, releases) or a pattern before anything runs; a build must hash to the request key the
coordinator computed, so a worker with another version of the patch set, catalogue or record
schema refuses instead of storing a record under the wrong request."""

from __future__ import annotations

import dataclasses
import re
import socket
from dataclasses import dataclass
from typing import Any

from ..build import driver
from ..build.jobs import Job, Options, plan
from ..catalogue import devices, flavours, names, releases
from ..errors import WolfError
from ..results.build import BuildRecord
from . import storage

QUEUE_BACKENDS = ("imagebuilder", "sdk")  # buildroot needs a tree: not a queue job
_KEY = re.compile(r"^[0-9a-f]{32}$")
BUILD_FIELDS = {
    "release": str,
    "device": str,
    "flavour": str,
    "backend": str,
    "luci_https": bool,
    "packages": list,
    "force": bool,
    "stock": bool,  # a flavour the patch set makes, from OpenWrt's own packages (--stock)
    "key": str,
}


@dataclass(frozen=True)
class Settings:
    """What the worker was started with; jobs never choose these."""

    name: str
    store: str | None = None
    mirror: str | None = None  # where this worker downloads ImageBuilders from
    artifacts: str | None = None  # shared DIR or URL the images are copied to
    key: str | None = None  # SSH key for the routers of a measurement queue
    known_hosts: str | None = None


_settings = Settings(name=socket.gethostname())


def configure(s: Settings) -> None:
    global _settings
    _settings = s


def current() -> Settings:
    return _settings


def _fields(args: Any, spec: dict[str, type]) -> dict[str, Any]:
    if not isinstance(args, dict) or set(args) != set(spec):
        got = sorted(args) if isinstance(args, dict) else type(args).__name__
        raise WolfError(f"job arguments {got}: expected exactly {sorted(spec)}")
    for k, t in spec.items():
        if type(args[k]) is not t:
            raise WolfError(f"job argument {k}: expected {t.__name__}")
    return args


def build_options(args: Any, s: Settings) -> Options:
    """A build job's arguments as the driver's Options, every field checked."""
    a = _fields(args, BUILD_FIELDS)
    rel = releases.get(a["release"]).name
    dev = devices.resolve(a["device"], rel)
    fl = flavours.get(a["flavour"]).name
    if "," in a["device"] or "," in a["flavour"] or a["device"] != dev.profile:
        raise WolfError(f"job device {a['device']!r}: one catalogue profile per job")
    if a["backend"] not in QUEUE_BACKENDS:
        raise WolfError(f"job backend {a['backend']!r}: one of {', '.join(QUEUE_BACKENDS)}")
    pk = names.packages(a["packages"], "job packages")
    if not _KEY.match(a["key"]):
        raise WolfError("job key: not a request hash")
    return Options(
        flavour=fl,
        device=dev.profile,
        release=rel,
        backend=a["backend"],
        mirror=s.mirror,
        jobs=1,
        force=a["force"],
        store=s.store,
        luci_https=a["luci_https"],
        packages=pk,
        stock=a["stock"],
    )


def build(args: dict[str, Any]) -> dict[str, Any]:
    """Build one (device, flavour, release) with this worker's ImageBuilder cache; return the
    record as the local build stored it (artifacts moved to shared storage if configured)."""
    s = _settings
    opts = build_options(args, s)
    (job,) = plan(opts)
    if job.key != args["key"]:
        raise WolfError(
            f"request {job.label} hashes to {job.key} here, {args['key']} on the coordinator",
            hint="run the same openwrt-wolf version (patch set, catalogue) on both",
        )
    (out,) = driver.build(opts)
    rec: BuildRecord = out.record
    if s.artifacts:
        rec = storage.publish(rec, s.artifacts)
    rec = dataclasses.replace(rec, worker=s.name)
    return {"record": rec.to_dict(), "cached": out.cached}


def build_args(job: Job, opts: Options) -> dict[str, Any]:
    """The coordinator's side of build_options."""
    return {
        "release": job.request.release,
        "device": job.device.profile,
        "flavour": job.flavour,
        "backend": job.request.backend,
        "luci_https": opts.luci_https,
        "packages": list(opts.packages),
        "force": opts.force,
        "stock": opts.stock,
        "key": job.key,
    }
