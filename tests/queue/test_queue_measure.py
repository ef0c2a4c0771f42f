"""Measurements on a router's named queue: `invoke measure-memory --host --queue URL#NAME`
against the fake router (tests/sshd_router.py, a real sshd on 127.0.0.1 whose `reboot` drops
every connection for a while). The router is this machine: /proc/meminfo read here is the
oracle, and the fake router's own event log shows whether two reboots ever overlapped."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import redis
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from openwrt_wolf.results.store import FileStore, Record
from tests import sshd_router
from tests.queue.redisd import Redis, redis_server
from tests.queue.test_queue import ROOT, Worker, error_line
from tests.sshd_router import WOLFSSL_PACKAGES, FakeRouter, make_image

__all__ = ["redis_server", "router", "router_dropbear", "router_sftp"]
router_sftp = sshd_router.router_sftp
router_dropbear = sshd_router.router_dropbear
router = sshd_router.router


def measure(url: str, router: FakeRouter, store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "invoke",
            "measure-memory",
            "--host",
            router.host,
            "--port",
            str(router.port),
            "--user",
            router.user,
            "--boots",
            "1",
            "--idle",
            "0.5",
            "--wait-up",
            "30",
            "--queue",
            url,
            "--store",
            str(store),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_measurements_on_one_router_queue_run_one_at_a_time(
    redis_server: Redis, router: FakeRouter, tmp_path: Path
) -> None:
    router.set_state(downtime=2.0)
    url = redis_server.url(3, "router-lab-1")
    lab = ("--key", str(router.userkey), "--known-hosts", str(router.known_hosts))
    ws = [Worker(tmp_path / n, url, n, *lab) for n in ("lab-a", "lab-b")]
    try:
        runs = [measure(url, router, tmp_path / f"store-{i}") for i in range(2)]
        outs: list[Any] = [p.communicate(timeout=300) for p in runs]
    finally:
        for w in ws:
            w.stop()
    for p, (out, err) in zip(runs, outs, strict=True):
        assert p.returncode == 0, out + err
        assert redis_server.password not in out + err
    # each reboot went down and came back before the next began: the lock held the router
    seq = [e.split()[0] for e in router.events if e.startswith(("request", "back"))]
    assert seq == ["request", "back", "request", "back"], router.events
    before = int(Path("/proc/meminfo").read_text().split()[1])  # MemTotal, kB
    for i in range(2):
        (path,) = (tmp_path / f"store-{i}" / "memory").glob("*.json")
        rec = json.loads(path.read_text())
        assert rec["kind"] == "memory" and rec["device"] == "tplink_tl-wr902ac-v1"
        assert rec["data"]["memtotal_kb"] == before
        assert rec["data"]["host"] == f"[{router.host}]:{router.port}"
    for w in ws:
        assert redis_server.password not in w.text()


def test_measure_queue_refuses_local_files(tmp_path: Path) -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "measure-memory",
            "--host",
            "127.0.0.1",
            "--key",
            str(tmp_path / "k"),
            "--queue",
            "redis://127.0.0.1:1/0#router-lab-1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )
    assert error_line(p).startswith("error: measure-memory --queue: --key name files")


def test_flash_on_the_router_queue_from_shared_storage(
    redis_server: Redis, router_dropbear: FakeRouter, tmp_path: Path
) -> None:
    """`invoke flash --flavour wolfssl --queue URL#NAME`: the newest build record's image,
    on the shared storage, flashed by the router's worker; the fake router's sysupgrade
    stand-in saw it, and the flash record came back into the local store. Dropbear, as the
    CLI's flash test: the router's real paths (/etc/openwrt_release, /tmp) in a namespace."""
    router = router_dropbear
    router.reset()
    router.trust_hostkey()
    shared = tmp_path / "shared"
    shared.mkdir()
    img = make_image(
        shared / f"q-{os.getpid()}-{tmp_path.name}-sysupgrade.bin", packages=WOLFSSL_PACKAGES
    )
    st = FileStore(tmp_path / "results")
    art = {
        "type": "sysupgrade",
        "path": str(img),
        "size": img.stat().st_size,
        "sha256": hashlib.sha256(img.read_bytes()).hexdigest(),
    }
    st.put(
        Record(
            "build", "b-wolfssl", "25.12.5", "tplink_tl-wr902ac-v1", "wolfssl", {"artifacts": [art]}
        )
    )
    url = redis_server.url(5, "router-lab-2")
    w = Worker(
        tmp_path / "lab",
        url,
        "lab",
        "--key",
        str(router.userkey),
        "--known-hosts",
        str(router.known_hosts),
        "--artifacts",
        str(shared),
    )
    try:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "invoke",
                "flash",
                "--device",
                "tl-wr902ac",
                "--host",
                router.host,
                "--port",
                str(router.port),
                "--user",
                router.user,
                "--flavour",
                "wolfssl",
                "--stock",
                "--wait-up",
                "60",
                "--trust-new-key-after-wipe",  # the stand-in router gets a new key, as after -n
                "--queue",
                url,
                "--store",
                str(st.root),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        w.stop()
    assert p.returncode == 0, p.stderr[-3000:] + w.text()[-3000:]
    assert router.state()["last_sysupgrade"][-1] == f"/tmp/{img.name}"
    (rec,) = (st.root / "flash").glob("*.json")
    data = json.loads(rec.read_text())["data"]
    assert data["ok"] and data["image_sha256"] == art["sha256"]
    assert redis_server.password not in p.stdout + p.stderr + w.text()


def test_flash_job_outside_the_shared_storage_is_refused(
    redis_server: Redis, tmp_path: Path
) -> None:
    """A flash job naming a file outside the worker's --artifacts never reaches a router."""
    shared = tmp_path / "shared"
    shared.mkdir()
    url = redis_server.url(6, "router-lab-3")
    conn = redis.Redis.from_url(url.split("#")[0])
    q = Queue("router-lab-3", connection=conn, serializer=JSONSerializer)
    opts = {
        "device": "tplink_tl-wr902ac-v1",
        "host": "127.0.0.1",
        "port": 1,
        "user": "root",
        "flavour": None,
        "release": None,
        "keep_settings": False,
        "accept_new": False,
        "trust_new_key_after_wipe": False,
        "wait_up": 5,
        "stock": False,
        "image": "/etc/passwd",
        "image_sha256": hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest(),
    }
    job = q.enqueue_call(
        "openwrt_wolf.queue.measurements.run", args=({"task": "flash", "options": opts},)
    )
    w = Worker(tmp_path / "lab", url, "lab3", "--artifacts", str(shared), "--burst")
    assert w.proc.wait(timeout=120) == 0, w.text()
    res = Job.fetch(job.id, connection=conn, serializer=JSONSerializer).latest_result()
    assert res is not None and "is not an image under this worker's --artifacts" in (
        res.exc_string or ""
    )
