"""Benchmark: the 3 flavours x 3 devices matrix on the stand-in ImageBuilder, three ways in one
run: local `invoke build -j 2`, the queue with 1 worker, the queue with 2 workers (a real
redis-server on 127.0.0.1, workers as separate processes, each with its own cache as on its own
machine). Every configuration starts from the same warm ImageBuilder cache and an empty store;
workers are started before the clock runs (they are long-lived). On one 2-core machine the
point is the queue's overhead: target queue (2 workers) / local -j 2 <= 1.15.

    .venv/bin/python bench/queue_matrix.py
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openwrt_wolf.host import openwrt_tools, upstream  # noqa: E402
from tests.queue.redisd import running  # noqa: E402
from tests.standin import kit, make_standin  # noqa: E402

DEVICES = "tplink_tl-wr902ac-v1,glinet_gl-ar300m16,tplink_tl-wr902ac-v3"
BUILD = ["build", "--flavour", "all", "--device", DEVICES, "--no-report"]


def invoke(args: list[str], env: dict[str, str]) -> float:
    t = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=1800,
        env={**os.environ, **env},
    )
    return time.monotonic() - t


def cache_copy(warm: Path, into: Path) -> Path:
    shutil.copytree(warm, into, symlinks=True, ignore=shutil.ignore_patterns("builds"))
    return into


def queued(base: Path, warm: Path, url: str, mirror: Path, n: int) -> float:
    procs = []
    for i in range(n):
        d = base / f"w{i}"
        env = {
            **os.environ,
            "OPENWRT_WOLF_CACHE": str(cache_copy(warm, d / "cache")),
            "OPENWRT_WOLF_STORE": str(d / "store"),
        }
        log = (base / f"w{i}.log").open("w")
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "invoke",
                    "worker",
                    "--queue",
                    url,
                    "--mirror",
                    str(mirror),
                    "--name",
                    f"bench-{n}-{i}",
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    time.sleep(3)  # the workers are up and listening before the clock starts
    try:
        return invoke(
            [*BUILD, "--queue", url],
            {"OPENWRT_WOLF_CACHE": str(base / "coord"), "OPENWRT_WOLF_STORE": str(base / "store")},
        )
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=120)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="wolf-bench-queue-") as tmp:
        base = Path(tmp)
        mirror = make_standin.make_server(
            base / "mirror",
            ("ath79/generic", "ramips/mt76x8"),
            tree=upstream.openwrt_tree("25.12.5"),
            tools=openwrt_tools.ensure(),
            kit=kit.make_kit(base / "kit"),
        )
        warm = base / "warm"
        invoke(
            [*BUILD, "--mirror", str(mirror), "-j", "2"],
            {"OPENWRT_WOLF_CACHE": str(warm), "OPENWRT_WOLF_STORE": str(base / "warm-store")},
        )
        local = invoke(
            [*BUILD, "--mirror", str(mirror), "-j", "2"],
            {
                "OPENWRT_WOLF_CACHE": str(cache_copy(warm, base / "local" / "cache")),
                "OPENWRT_WOLF_STORE": str(base / "local" / "store"),
            },
        )
        (base / "redis").mkdir()
        with running(base / "redis") as r:
            one = queued(base / "q1", warm, r.url(0), mirror, 1)
            two = queued(base / "q2", warm, r.url(1), mirror, 2)
    print(f"{'configuration':<26} {'wall s':>8} {'/ local -j 2':>13}")
    for name, t in (("local -j 2", local), ("queue, 1 worker", one), ("queue, 2 workers", two)):
        print(f"{name:<26} {t:>8.1f} {t / local:>13.2f}")
    print(f"2 workers / 1 worker: {two / one:.2f}")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
