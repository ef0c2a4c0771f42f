"""RQ, held so that a worker runs nothing but openwrt-wolf's own job functions.

Jobs are JSON (RQ's JSONSerializer), never pickles, so reading a job from Redis cannot run
code. The function a job names is looked up in ``ALLOWED``, never imported by name; a job
naming anything else, or carrying an RQ callback, fails with ``Refused`` and is not retried.

A worker that dies mid-job (kill -9, power cut) stops refreshing its job's entry in RQ's
StartedJobRegistry; once the entry is older than ``3 × heartbeat + 2`` seconds, RQ's registry
clean-up (run by every worker's maintenance and by the coordinator's polling) puts the job back
on the queue while it has retries left, else marks it failed (AbandonedJobError)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis
from rq import Queue, Worker
from rq.job import Job
from rq.serializers import JSONSerializer

from . import measurements, worker_jobs

SERIALIZER = JSONSerializer
HEARTBEAT = 20  # seconds between a busy worker's heartbeats
# The only functions a worker runs, by the name a job gives.
ALLOWED: dict[str, Callable[..., Any]] = {
    f"{worker_jobs.__name__}.build": worker_jobs.build,
    measurements.FUNC: measurements.run,
}


class Refused(Exception):
    """A job that names no openwrt-wolf job function."""


def refusal(job: Job) -> str | None:
    """Why the job must not run, or None."""
    names = (job._success_callback_name, job._failure_callback_name, job._stopped_callback_name)
    if job.func_name not in ALLOWED:
        return f"job {job.id} names {job.func_name!r}, not an openwrt-wolf job function"
    if job.instance is not None or any(names):
        return f"job {job.id} carries an instance or callbacks; openwrt-wolf jobs have none"
    return None


class WolfJob(Job):
    @property
    def func(self) -> Any:
        why = refusal(self)
        if why:
            raise Refused(why)
        return ALLOWED[self.func_name]  # type: ignore[index]

    # Callbacks are names RQ would import and call: never.
    @property
    def success_callback(self) -> None:
        return None

    @property
    def failure_callback(self) -> None:
        return None

    @property
    def stopped_callback(self) -> None:
        return None


class WolfWorker(Worker):
    def get_heartbeat_ttl(self, job: Job, working_time: float = 0.0) -> int:
        # RQ adds a fixed 60 s; a dead worker's job is retried after three missed heartbeats
        return int(3 * self.job_monitoring_interval + 2)

    def perform_job(self, job: Job, queue: Queue, execution: Any) -> bool:
        if refusal(job):
            job.retries_left = 0  # refusing again elsewhere would change nothing
        return bool(super().perform_job(job, queue, execution))


def rq_queue(conn: redis.Redis, name: str) -> Queue:
    return Queue(name, connection=conn, job_class=WolfJob, serializer=SERIALIZER)


def worker(conn: redis.Redis, name: str, queue: str, heartbeat: int) -> WolfWorker:
    return WolfWorker(
        [rq_queue(conn, queue)],
        connection=conn,
        name=name,
        job_class=WolfJob,
        serializer=SERIALIZER,
        job_monitoring_interval=heartbeat,
        maintenance_interval=max(3 * heartbeat, 5),
    )
