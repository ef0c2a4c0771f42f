"""A real redis-server on 127.0.0.1 for the queue tests and bench/queue_matrix.py: a free port,
its own config file and directory, a password (so the tests can check it is never printed),
killed at the end."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.conftest import free_port, need_tools


@dataclass(frozen=True)
class Redis:
    port: int
    password: str
    dir: Path

    def url(self, db: int = 0, name: str = "") -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/{db}" + (f"#{name}" if name else "")


@contextlib.contextmanager
def running(d: Path) -> Iterator[Redis]:
    r = Redis(free_port(), "pw-" + secrets.token_hex(12), d)
    conf = d / "redis.conf"
    conf.write_text(
        f'bind 127.0.0.1\nport {r.port}\ndir {d}\nrequirepass {r.password}\nsave ""\n'
        f"appendonly no\ndaemonize no\ndatabases 16\nlogfile {d / 'redis.log'}\n"
    )
    proc = subprocess.Popen(
        ["redis-server", str(conf)], stdin=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(redis.RedisError):
                if redis.Redis(
                    host="127.0.0.1", port=r.port, password=r.password, socket_timeout=2
                ).ping():
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (d / "redis.log").read_text() if (d / "redis.log").exists() else ""
                raise RuntimeError(f"redis-server did not start: {log[-2000:]}")
            time.sleep(0.1)
        yield r
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Redis]:
    need_tools("redis-server")
    with running(tmp_path_factory.mktemp("redis")) as r:
        yield r
