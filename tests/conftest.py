"""Shared fixtures. Tests that need a host tool skip on a developer's machine without it, but
fail under CI=true: nothing real is silently skipped in CI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need_tools(*names: str) -> None:
    """Skip (or, in CI, fail) unless every named command or file is present."""
    absent = [n for n in names if not (os.path.exists(n) if n.startswith("/") else shutil.which(n))]
    if not absent:
        return
    unavailable(f"needs host tools: {', '.join(absent)} (./wolf hosttools --install)")


def unavailable(msg: str) -> None:
    """Something a test needs is not here: skip on a developer's machine, fail in CI."""
    if IN_CI:
        pytest.fail(f"CI=true and {msg}", pytrace=False)
    pytest.skip(msg)


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "results"
