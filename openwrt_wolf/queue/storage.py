"""Image files to shared storage: ``--artifacts DIR`` (a directory every machine mounts) or
``--artifacts URL`` (an HTTP server that takes PUT, e.g. nginx with dav_methods PUT).

Files go to <DIR|URL>/<request key>/<name>; the record's artifact paths and log then name
that place, and their sha256 stays what the worker measured."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from ..errors import WolfError
from ..files import outputs
from ..files.hashing import file_sha256
from ..results.build import BuildRecord
from .url import redact


def is_url(dest: str) -> bool:
    return dest.startswith(("http://", "https://"))


def publish(rec: BuildRecord, dest: str) -> BuildRecord:
    files = [Path(a.path) for a in rec.artifacts] + [Path(rec.log)]
    names = [a.name for a in rec.artifacts] + ["build.log"]
    if is_url(dest):
        where = _put_all(files, names, dest.rstrip("/") + "/" + rec.key)
    else:
        where = _copy_all(files, names, Path(dest).expanduser().resolve() / rec.key)
    arts = [dataclasses.replace(a, path=f"{where}/{a.name}") for a in rec.artifacts]
    out = rec.output
    rootfs = out.rootfs and dataclasses.replace(
        out.rootfs, source=f"{where}/{Path(out.rootfs.source).name}"
    )
    return dataclasses.replace(
        rec,
        artifacts=arts,
        output=dataclasses.replace(out, source=where, rootfs=rootfs),
        log=f"{where}/build.log",
    )


def _copy_all(files: list[Path], names: list[str], into: Path) -> str:
    """Copy into a temporary directory beside INTO, then rename: readers see all or nothing."""
    tmp = into.with_name(f".{into.name}.{os.getpid()}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with outputs.work(tmp):
            for f, n in zip(files, names, strict=True):
                (tmp / n).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, tmp / n)
                if n != "build.log" and file_sha256(tmp / n) != file_sha256(f):
                    raise WolfError(f"--artifacts: {tmp / n} differs from {f} after copying")
            shutil.rmtree(into, ignore_errors=True)
            outputs.publish(tmp, into)
    except OSError as e:
        raise WolfError(
            f"--artifacts {into.parent}: {e.strerror or e}",
            hint="is the shared directory writable?",
        ) from None
    return str(into)


def _put_all(files: list[Path], names: list[str], base: str) -> str:
    import requests  # here: a worker that keeps its images does not load it

    from ..files import httpget

    shown = redact(base)
    for f, n in zip(files, names, strict=True):
        # the answer's body is never read (requests.put read it whole: a server's endless
        # answer filled the worker's memory), and the upload has a deadline (httpget.py)
        deadline = httpget.Deadline()
        deadline.received = f.stat().st_size  # the rate rule's time for the bytes sent
        try:
            with f.open("rb") as fh:
                put = httpget.get(f"{base}/{n}", method="PUT", data=fh, read_timeout=300,
                                  deadline=deadline)  # fmt: skip
                with put:
                    status = put.status_code
        except (requests.RequestException, httpget.Refused) as e:
            why = e.strerror if isinstance(e, httpget.Refused) else type(e).__name__
            raise WolfError(f"--artifacts {shown}/{n}: {why}") from None
        if status not in (200, 201, 204):
            raise WolfError(f"--artifacts {shown}/{n}: HTTP {status}")
    return shown


def shown(dest: str | None) -> str:
    if not dest:
        return "stay on this worker"
    return redact(dest) if is_url(dest) else str(Path(dest).expanduser().resolve())
