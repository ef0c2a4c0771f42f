"""A long fixture says what it prepares on the terminal, also under pytest-xdist (where the
workers' output is captured): the oracle is what a pytest -n 2 run prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONFTEST = "from tests.conftest import preparing, pytest_configure  # noqa: F401\n"
TESTS = """
import pytest
from tests.conftest import preparing

@pytest.fixture(scope="session")
def slow():
    with preparing("cross-building a thing for mips_24kc (about 3 min on 2 cores)"):
        return 1

def test_one(slow):
    assert slow

def test_two(slow):
    assert slow
"""


def test_preparing_is_shown_with_xdist(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_slow.py").write_text(TESTS)
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**{k: v for k, v in os.environ.items() if k != "WOLF_SUITE_CLOCK"},
             "PYTHONPATH": str(ROOT)},  # not bench/suite_times.py's clock
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    said = p.stdout + p.stderr
    assert "preparing: cross-building a thing for mips_24kc (about 3 min on 2 cores)" in said
    assert "ready: cross-building a thing for mips_24kc" in said
