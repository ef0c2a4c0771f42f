"""The build matrix on a real Redis (tests/queue/redisd.py) with workers as separate processes,
against the stand-in ImageBuilder (tests/standin/).

The oracle for every queued record is a local build of the same request (`invoke build -j 2`,
the code path without the queue): the same request hashes, the same packages, fit and image
bytes; the files the records name are read back with hashlib. The password in the queue URL
is looked for in every output and every file the runs wrote."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from rq import Queue
from rq.job import Job
from rq.registry import StartedJobRegistry
from rq.serializers import JSONSerializer

from tests.conftest import need_tools
from tests.queue.redisd import Redis, free_port, redis_server
from tests.sshd_router import _tree

__all__ = ["redis_server"]

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("make", "mksquashfs", "unsquashfs", "mkimage", "zstd")
V1, V3, AR300 = "tplink_tl-wr902ac-v1", "tplink_tl-wr902ac-v3", "glinet_gl-ar300m16"
DEVICES = f"{V1},{AR300},{V3}"
EPOCH = {"SOURCE_DATE_EPOCH": "1700000000"}  # reproducible squashfs, as OpenWrt builds them
SAME = (
    "request",
    "key",
    "backend",
    "release",
    "release_commit",
    "device",
    "flavour",
    "builder",
    "builder_sha256",
    "packages_value",
    "library_versions",
    "manifest",
    "openwrt_warnings",
    "image_deleted",
    "notes",
    "sdk",
    "sdk_sha256",
    "config",
)


@pytest.fixture(scope="module")
def mirror(standin_mirror: Path) -> Path:
    """The run's stand-in mirror (tests/conftest.py): the workers only download from it."""
    need_tools(*TOOLS)
    return standin_mirror


def invoke(*args: str, env: dict[str, str], timeout: float = 600) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **EPOCH, **env},
    )


def error_line(p: Any) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    return lines[0]


class Worker:
    """`invoke worker` in its own session, with its own cache and store (another machine)."""

    def __init__(self, base: Path, url: str, name: str, *args: str) -> None:
        self.base, self.name = base, name
        base.mkdir(parents=True)
        self.log = base / "worker.log"
        env = {
            **os.environ,
            **EPOCH,
            "OPENWRT_WOLF_CACHE": str(base / "cache"),
            "OPENWRT_WOLF_STORE": str(base / "store"),
        }
        with self.log.open("w") as fh:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "invoke",
                    "worker",
                    "--queue",
                    url,
                    "--name",
                    name,
                    "--heartbeat",
                    "1",
                    *args,
                ],
                cwd=ROOT,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def kill9(self) -> None:
        """The machine dies: every process of the worker at once (the work horse RQ forked
        and make run in process groups of their own)."""
        pids = _tree(self.proc.pid)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for p in pids:
                with contextlib.suppress(ProcessLookupError):  # a make that just ended
                    os.kill(p, sig)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            for p in _tree(self.proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def workers() -> Any:
    started: list[Worker] = []

    def start(*a: Any) -> Worker:
        started.append(Worker(*a))
        return started[-1]

    yield start
    for w in started:
        w.stop()


def rq_conn(url: str) -> redis.Redis:
    return redis.Redis.from_url(url.split("#")[0])


def wait_for(what: str, fn: Any, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def records(store: Path, kind: str = "build") -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((store / kind).glob("*.json"))}


def files_under(*dirs: Path) -> list[Path]:
    return [p for d in dirs if d.exists() for p in d.rglob("*") if p.is_file()]


def test_matrix_two_workers_one_killed_coordinator_interrupted(
    redis_server: Redis, mirror: Path, tmp_path: Path, workers: Any
) -> None:
    url = redis_server.url(0)
    shared = tmp_path / "shared"
    shared.mkdir()
    w1 = workers(tmp_path / "w1", url, "w1", "--mirror", str(mirror))
    w2 = workers(tmp_path / "w2", url, "w2", "--mirror", str(mirror), "--artifacts", str(shared))
    st = tmp_path / "store"
    coord_env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "coord-cache"), "OPENWRT_WOLF_STORE": str(st)}
    argv = [
        sys.executable,
        "-m",
        "invoke",
        "build",
        "--flavour",
        "all",
        "--stock",  # the patch set's wolfSSL needs sources a worker reaches (docs/build-farm.md)
        "--device",
        DEVICES,
        "--queue",
        url,
        "--no-report",
    ]
    first = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **EPOCH, **coord_env},
    )
    conn = rq_conn(url)
    q = Queue("builds", connection=conn, serializer=JSONSerializer)

    def started_on_w1() -> str | None:
        for jid in StartedJobRegistry(queue=q).get_job_ids(cleanup=False):
            j = Job.fetch(jid, connection=conn, serializer=JSONSerializer)
            if j.get_status() == "started" and j.worker_name == "w1":
                return jid
        return None

    killed = wait_for("a job running on w1", started_on_w1)
    w1.kill9()
    wait_for("two records", lambda: len(records(st)) >= 2)
    first.send_signal(signal.SIGINT)
    out1, err1 = first.communicate(timeout=60)
    assert first.returncode == 130, err1[-3000:]
    assert "the same command collects them" in err1 and err1.rstrip().endswith("error: interrupted")

    second = invoke(*argv[3:], env=coord_env)
    assert second.returncode == 0, second.stderr[-3000:]
    # every request was on the queue already: nothing enqueued twice
    m = re.search(r": 0 enqueued, (\d+) already there, (\d+) in the store", second.stderr)
    assert m and int(m[1]) + int(m[2]) == 9, second.stderr

    # the oracle: the same matrix built locally, without the queue
    local_st = tmp_path / "local-store"
    local = invoke(
        "build",
        "--flavour",
        "all",
        "--stock",  # the patch set's wolfSSL needs sources a worker reaches (docs/build-farm.md)
        "--device",
        DEVICES,
        "--mirror",
        str(mirror),
        "-j",
        "2",
        "--no-report",
        env={
            "OPENWRT_WOLF_CACHE": str(tmp_path / "local-cache"),
            "OPENWRT_WOLF_STORE": str(local_st),
        },
    )
    assert local.returncode == 0, local.stderr[-3000:]
    want, got = records(local_st), records(st)
    assert len(want) == 9 and sorted(got) == sorted(want)  # one record per request, same hashes
    for key, w in want.items():
        g = got[key]
        assert {k: g[k] for k in ("kind", "key", "release", "device", "flavour")} == {
            k: w[k] for k in ("kind", "key", "release", "device", "flavour")
        }
        for f in SAME:
            assert g["data"][f] == w["data"][f], (key, f)
        # the output measured on the worker: the same fit (its paths are the worker's)
        assert g["data"]["output"]["fit"] == w["data"]["output"]["fit"], key
        strip = [
            {k: a[k] for k in ("name", "sha256", "size", "type")} for a in w["data"]["artifacts"]
        ]
        assert [
            {k: a[k] for k in ("name", "sha256", "size", "type")} for a in g["data"]["artifacts"]
        ] == strip
        assert g["data"]["worker"] in ("w1", "w2") and w["data"]["worker"] == ""
        # the files are where the record says: on w2's shared storage, or w1's own disk
        where = shared / key if g["data"]["worker"] == "w2" else tmp_path / "w1" / "cache"
        for a in g["data"]["artifacts"]:
            p = Path(a["path"])
            assert p.is_relative_to(where), p
            assert hashlib_sha256(p) == a["sha256"] and p.stat().st_size == a["size"]

    # the killed job ran again on w2, once (RQ counted the retry)
    key = killed.removeprefix("build-")
    assert got[key]["data"]["worker"] == "w2"
    assert Job.fetch(killed, connection=conn, serializer=JSONSerializer).retries_left == 1

    # the password is nowhere: outputs, worker logs, records, shared files
    texts = [out1, err1, second.stdout, second.stderr, w1.text(), w2.text()]
    texts += [p.read_text(errors="replace") for p in files_under(st, shared)]
    assert not [t for t in texts if redis_server.password in t]
    assert "redis://:***@127.0.0.1" in second.stderr

    # a third run finds everything in the store and enqueues nothing
    third = invoke(*argv[3:], env=coord_env)
    assert third.returncode == 0, third.stderr[-3000:]
    assert third.stderr.count("cached  ") == 9


def hashlib_sha256(p: Path) -> str:
    import hashlib

    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_a_job_that_keeps_failing_ends_with_its_error(
    redis_server: Redis, tmp_path: Path, workers: Any
) -> None:
    """The worker's mirror lacks the ImageBuilder: two attempts, then a build-failure record
    whose error is the line a local build with that mirror prints."""
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    url = redis_server.url(1)
    workers(tmp_path / "w3", url, "w3", "--mirror", str(empty))
    env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "OPENWRT_WOLF_STORE": str(tmp_path / "s")}
    p = invoke(
        "build",
        "--flavour",
        "mbedtls",
        "--device",
        V1,
        "--queue",
        url,
        "--retries",
        "1",
        "--no-report",
        env=env,
    )
    line = error_line(p)
    local = invoke(
        "build",
        "--flavour",
        "mbedtls",
        "--device",
        V1,
        "--mirror",
        str(empty),
        "--no-report",
        env={**env, "OPENWRT_WOLF_STORE": str(tmp_path / "local")},
    )
    local_error = error_line(local).removeprefix("error: ")
    assert line.startswith("error: 1 queued build(s) failed; first: tplink_tl-wr902ac-v1 mbedtls: ")
    assert local_error in line
    assert not records(tmp_path / "s")
    (fail,) = records(tmp_path / "s", "build-failure").values()
    assert fail["data"]["error"] == local_error and fail["data"]["attempts"] == 2
    assert f"FAILED  {V1} mbedtls: {local_error}" in p.stderr
    assert redis_server.password not in p.stdout + p.stderr


def test_worker_refuses_foreign_jobs(redis_server: Redis, tmp_path: Path, workers: Any) -> None:
    """Jobs put on the queue with rq directly: functions that are not openwrt-wolf's, a
    pickled job, and our build function with arguments outside the catalogue."""
    url = redis_server.url(2)
    conn = rq_conn(url)
    marks = [tmp_path / f"ran-{i}" for i in range(4)]
    q = Queue("builds", connection=conn, serializer=JSONSerializer)
    jobs = [
        q.enqueue_call("subprocess.check_call", args=(["touch", str(marks[0])],)),
        q.enqueue_call("os.system", args=(f"touch {marks[1]}",)),
        q.enqueue_call(
            "openwrt_wolf.queue.worker_jobs.build",
            args=(
                {
                    "release": "25.12.5",
                    "device": f"{V1};touch {marks[2]}",
                    "flavour": "mbedtls",
                    "backend": "imagebuilder",
                    "luci_https": False,
                    "packages": [],
                    "force": False,
                    "stock": False,
                    "key": "0" * 32,
                },
            ),
        ),
        Queue("builds", connection=conn).enqueue_call(  # RQ's default: a pickle
            "subprocess.check_call", args=(["touch", str(marks[3])],)
        ),
    ]
    w = workers(tmp_path / "w4", url, "w4", "--burst")
    assert w.proc.wait(timeout=120) == 0, w.text()
    for j in jobs:
        j = Job.fetch(j.id, connection=conn, serializer=JSONSerializer)
        assert j.get_status() == "failed", (j.id, w.text())
    exc = [
        (
            Job.fetch(j.id, connection=conn, serializer=JSONSerializer).latest_result()
            or pytest.fail("no result")
        ).exc_string
        or ""
        for j in jobs[:3]
    ]
    assert "names 'subprocess.check_call', not an openwrt-wolf job function" in exc[0]
    assert "names 'os.system', not an openwrt-wolf job function" in exc[1]
    assert "WolfError" in exc[2] and "device" in exc[2]
    assert not [m for m in marks if m.exists()]


def test_queue_unreachable_is_one_line_without_the_password(tmp_path: Path) -> None:
    url = f"redis://:hunter2-secret@127.0.0.1:{free_port()}/0"
    env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "OPENWRT_WOLF_STORE": str(tmp_path / "s")}
    for argv in (
        ("build", "--flavour", "mbedtls", "--device", V1, "--queue", url),
        ("worker", "--queue", url),
    ):
        p = invoke(*argv, env=env, timeout=120)
        line = error_line(p)
        assert line.startswith("error: cannot reach the queue at redis://:***@127.0.0.1:")
        assert "hunter2-secret" not in p.stdout + p.stderr


def test_queue_options_that_name_local_files(tmp_path: Path) -> None:
    p = invoke(
        "build",
        "--flavour",
        "mbedtls",
        "--device",
        V1,
        "--queue",
        "redis://127.0.0.1/0",
        "--imagebuilder",
        str(tmp_path),
        env={},
    )
    assert error_line(p).startswith("error: --imagebuilder with --queue: workers build with")
    p = invoke("build", "--flavour", "mbedtls", "--device", V1, "--queue", "http://x/0", env={})
    assert error_line(p).startswith("error: --queue http://x/0: not a redis:// URL")


class _PutHandler(http.server.BaseHTTPRequestHandler):
    root: Path

    def do_PUT(self) -> None:
        dest = self.root / self.path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_artifacts_put_to_a_url(
    redis_server: Redis, mirror: Path, tmp_path: Path, workers: Any
) -> None:
    """`invoke worker --artifacts URL`: the images are PUT to the URL and the record names
    them there; the server's copies hash to the record's sha256."""
    handler = type("H", (_PutHandler,), {"root": tmp_path / "srv"})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}/images"
    url = redis_server.url(4)
    try:
        workers(tmp_path / "w5", url, "w5", "--mirror", str(mirror), "--artifacts", base)
        env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "OPENWRT_WOLF_STORE": str(tmp_path / "s")}
        p = invoke(
            "build",
            "--flavour",
            "wolfssl",
            "--stock",
            "--device",
            AR300,
            "--queue",
            url,
            "--no-report",
            env=env,
        )
        assert p.returncode == 0, p.stderr[-3000:]
    finally:
        srv.shutdown()
    ((key, rec),) = records(tmp_path / "s").items()
    arts = rec["data"]["artifacts"]
    assert {a["type"] for a in arts} >= {"sysupgrade", "kernel", "rootfs"}
    for a in arts:
        assert a["path"] == f"{base}/{key}/{a['name']}"
        served = tmp_path / "srv" / "images" / key / a["name"]
        assert hashlib_sha256(served) == a["sha256"] and served.stat().st_size == a["size"]
    assert rec["data"]["log"] == f"{base}/{key}/build.log"
    assert "Building images..." in (tmp_path / "srv" / "images" / key / "build.log").read_text()
