"""`invoke build --queue`: one RQ job per (device, flavour, release) request, followed until
each has a record.

A request whose record is in the store is not enqueued (unless --force). The job id is the
request hash, so a second coordinator (or this one, re-run after Ctrl-C) finds the jobs already
queued, running or finished and follows them instead of enqueueing twice; results stay in Redis
for a week. Each finished job's record is checked (same request, same key) and written to the
store exactly as the local build wrote it on the worker."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import redis
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rq.job import Job as RQJob
from rq.job import JobStatus, Retry
from rq.registry import StartedJobRegistry

from .. import paths, term
from ..build.jobs import Job, Options, Outcome, plan
from ..errors import WolfError
from ..results import store
from ..results.build import KIND, BuildRecord
from ..results.build_failure import KIND as FAILED_KIND
from ..results.build_failure import QueueFailure
from . import engine, worker_jobs
from .url import QueueURL

KEEP = 7 * 24 * 3600  # seconds Redis keeps results and failures for a coordinator to collect
BUILD_FUNC = f"{worker_jobs.__name__}.build"
WAITING = (JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED)


@dataclass(frozen=True)
class Settings:
    retries: int = 2  # a job is tried at most 1 + retries times
    timeout: int = 4 * 3600  # seconds one build may take on a worker
    poll: float = 0.5


@dataclass
class Run:
    planned: list[Job] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    failures: dict[str, QueueFailure] = field(default_factory=dict)
    enqueued: int = 0
    resumed: int = 0


def job_id(key: str) -> str:
    return f"build-{key}"


def check_options(opts: Options) -> None:
    """Options that name files on this machine mean nothing on a worker."""
    local = {
        "--imagebuilder": opts.imagebuilder,
        "--sdk": opts.sdk,
        "--tree": opts.tree,
        "--files": opts.files,
        "--feed": opts.feed,
        "--patches": opts.patches,
        "--mirror": opts.mirror,
    }
    given = [k for k, v in local.items() if v]
    if given:
        raise WolfError(
            f"{', '.join(given)} with --queue: workers build with their own files",
            hint="start the workers with `invoke worker --mirror ...`; drop these options",
        )
    if opts.jobs != 1:
        raise WolfError(f"-j {opts.jobs} with --queue", hint="start more workers instead")
    if opts.backend == "buildroot":
        raise WolfError("--backend buildroot with --queue: a worker builds with ImageBuilders")


def build(opts: Options, q: QueueURL, s: Settings = Settings()) -> Run:
    check_options(opts)
    opts = dataclasses.replace(opts, identify=False)  # each worker has its own mirror
    planned = plan(opts)
    st = store.FileStore(paths.store_dir(opts.store))
    con = term.console(stderr=True)
    conn = q.connect()
    rq_q = engine.rq_queue(conn, q.name)
    run = Run(planned)
    todo: dict[str, Job] = {}
    for job in planned:
        rec = None if opts.force else st.get(KIND, job.key)
        cached = None
        if rec is not None:
            try:
                cached = BuildRecord.from_dict(rec.data, f"build record {rec.path}")
            except WolfError as e:  # built again: the new record replaces it
                con.print(f"rebuild {job.label}: {e}", markup=False, soft_wrap=True)
        if cached is not None:
            path = st.root / KIND / f"{job.key}.json"
            run.outcomes[job.key] = Outcome(job, cached, True, path)
            con.print(f"cached  {job.label}: {path}", markup=False, soft_wrap=True)
        else:
            todo.setdefault(job.key, job)
    try:
        for job in todo.values():
            _submit(rq_q, job, opts, s, run)
        con.print(
            f"queue {q.shown()}: {run.enqueued} enqueued, {run.resumed} already there, "
            f"{len(run.outcomes)} in the store",
            markup=False,
            soft_wrap=True,
        )
        _follow(conn, rq_q, todo, opts, s, st, run, con)
    except redis.RedisError as e:
        raise WolfError(
            f"lost the queue at {q.shown()}: {type(e).__name__}",
            hint="the jobs stay queued; run the same command again",
        ) from None
    except KeyboardInterrupt:
        left = len(todo) - len(run.outcomes.keys() & todo.keys()) - len(run.failures)
        con.print(
            f"interrupted: {left} builds stay on {q.shown()}; the same command collects them",
            markup=False,
            soft_wrap=True,
        )
        raise
    return run


def _submit(rq_q: Any, job: Job, opts: Options, s: Settings, run: Run) -> None:
    old = engine.WolfJob.fetch_many([job_id(job.key)], rq_q.connection, engine.SERIALIZER)[0]
    if old is not None:
        status = old.get_status(refresh=False)
        if status in WAITING or (status == JobStatus.FINISHED and not opts.force):
            run.resumed += 1
            return
        old.delete()
    rq_q.enqueue_call(
        BUILD_FUNC,
        args=(worker_jobs.build_args(job, opts),),
        job_id=job_id(job.key),
        timeout=s.timeout,
        result_ttl=KEEP,
        failure_ttl=KEEP,
        retry=Retry(max=s.retries) if s.retries else None,
        description=f"build {job.request.release} {job.label}",
        meta={"attempts": 1 + s.retries},
    )
    run.enqueued += 1


def _follow(
    conn: redis.Redis,
    rq_q: Any,
    todo: dict[str, Job],
    opts: Options,
    s: Settings,
    st: store.FileStore,
    run: Run,
    con: Any,
) -> None:
    left = dict(todo)
    total = len(todo)
    started = StartedJobRegistry(queue=rq_q)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=con,
        transient=True,
    ) as bar:
        task = bar.add_task("queued builds", total=total)
        while left:
            started.cleanup()  # requeues (or fails) the jobs of workers that died
            keys = list(left)
            found = engine.WolfJob.fetch_many([job_id(k) for k in keys], conn, engine.SERIALIZER)
            running = 0
            for key, rq_job in zip(keys, found, strict=True):
                job = left[key]
                if rq_job is None:  # expired or deleted behind our back: ask again
                    _submit(rq_q, job, opts, s, run)
                    continue
                status = rq_job.get_status(refresh=False)
                if status == JobStatus.FINISHED:
                    _finished(job, rq_job, st, run, con, bar)
                elif status in WAITING:
                    running += status == JobStatus.STARTED
                    continue
                else:
                    _failed(job, rq_job, st, run, bar)
                del left[key]
                bar.update(task, completed=total - len(left))
            bar.update(
                task, description=f"queued builds ({running} running, {len(run.failures)} failed)"
            )
            if left:
                time.sleep(s.poll)


def _finished(job: Job, rq_job: RQJob, st: store.FileStore, run: Run, con: Any, bar: Any) -> None:
    result = rq_job.return_value()
    try:
        rec = BuildRecord.from_dict(result["record"])  # type: ignore[index]
    except (TypeError, KeyError, WolfError) as e:
        _fail(job, rq_job, st, run, f"the worker returned no build record: {e}")
        return
    # the worker names the archives it used (its mirror's); the coordinator planned without
    planned = dataclasses.replace(rec.request, imagebuilder="", sdk="")
    if rec.key != job.key or planned != job.request or rec.request.key() != job.key:
        _fail(job, rq_job, st, run, f"the worker returned the record of {rec.key}, not {job.key}")
        return
    path = st.put(
        store.Record(
            kind=KIND,
            key=job.key,
            release=rec.release,
            device=rec.device,
            flavour=rec.flavour,
            data=rec.to_dict(),
        )
    )
    run.outcomes[job.key] = Outcome(job, rec, False, path)
    fr = rec.fit
    bar.console.print(
        f"[{len(run.outcomes)}] {job.label}: {fr.verdict} (headroom {fr.rootfs_room} B) "
        f"on {rec.worker} {path}",
        markup=False,
        soft_wrap=True,
    )


def _failed(job: Job, rq_job: RQJob, st: store.FileStore, run: Run, bar: Any) -> None:
    res = rq_job.latest_result()
    text = (res.exc_string if res is not None else None) or f"job {rq_job.get_status()}"
    _fail(job, rq_job, st, run, error_line(text))
    bar.console.print(
        f"FAILED  {job.label}: {run.failures[job.key].error}", markup=False, soft_wrap=True
    )


def _fail(job: Job, rq_job: RQJob, st: store.FileStore, run: Run, error: str) -> None:
    left = rq_job.retries_left or 0
    f = QueueFailure(
        request=job.request,
        key=job.key,
        error=error,
        attempts=int(rq_job.meta.get("attempts", 1)) - left,
        worker=rq_job.worker_name or "",
        job_id=rq_job.id,
    )
    st.put(
        store.Record(
            kind=FAILED_KIND,
            key=job.key,
            release=job.request.release,
            device=job.device.profile,
            flavour=job.flavour,
            data=f.to_dict(),
        )
    )
    run.failures[job.key] = f


def error_line(exc_string: str) -> str:
    """The last line of a worker's traceback, without the exception's module path."""
    lines = [ln.strip() for ln in exc_string.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else "unknown error"
    if "AbandonedJobError" in last:
        return "the worker died during the build on every attempt (RQ AbandonedJobError)"
    head, sep, rest = last.partition(": ")
    return rest if sep and "." in head and " " not in head else last
