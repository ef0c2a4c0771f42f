"""A pytest plugin (`-p bench.suite_clock`) that writes, per test, its wall time and the CPU
time (user + system) of the worker and of its waited-for children (getrusage) spent in its
setup, call and teardown, as JSON lines into $WOLF_SUITE_CLOCK (one file per xdist worker).

A session or module fixture's cost lands on the first test that asks for it: summed by module
this is what each module costs the run (bench/suite_times.py reads the files)."""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator
from pathlib import Path

import pytest


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    out = os.environ.get("WOLF_SUITE_CLOCK")
    if not out:
        yield
        return
    wall, (me, kids) = time.monotonic(), _cpu()
    yield
    wall, (me2, kids2) = time.monotonic() - wall, _cpu()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    row = {"test": item.nodeid, "wall": wall, "self": me2 - me, "children": kids2 - kids,
           "worker": worker}  # fmt: skip
    with (Path(out) / f"{worker}.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
