"""`./wolf perf ...` as the lab tests run it: one run per test run, shared by the pytest-xdist
workers (pytest's base temp's parent is theirs in common): the first worker runs it, the
others wait on the lock and read its saved output."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.files.locks import locked

ROOT = Path(__file__).resolve().parents[2]
Run = tuple[subprocess.CompletedProcess[str], Path]


def wolf(*args: str, timeout: float = 5400, columns: int = 220) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)}  # the table as a user's pipe gets it
    return subprocess.run([str(ROOT / "wolf"), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


def once(
    factory: pytest.TempPathFactory, uid: str, name: str, *args: str, columns: int = 220
) -> Run:
    """`./wolf perf ARGS --store <shared>/store`, once per test run; (its result, the store)."""
    shared = factory.getbasetemp().parent / f"{name}-{uid}"
    shared.mkdir(exist_ok=True)
    st, saved = shared / "store", shared / "run.json"
    with locked(shared / "lock"):
        if not saved.exists():
            r = wolf("perf", *args, "--store", str(st), columns=columns)
            saved.write_text(json.dumps([r.args, r.returncode, r.stdout, r.stderr]))
    argv, rc, out, err = json.loads(saved.read_text())
    assert rc == 0, err[-3000:]
    return subprocess.CompletedProcess(argv, rc, out, err), st
