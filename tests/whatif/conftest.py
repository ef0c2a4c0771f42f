"""The what-if lab (tests/whatif/test_whatif.py's stand-in ImageBuilder builds), one fixture
for the modules that run what-if on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.whatif.test_whatif import Built, make_lab


@pytest.fixture(scope="module")
def lab(
    tmp_path_factory: pytest.TempPathFactory, standin_mirror: Path
) -> dict[tuple[str, str], Built]:
    return make_lab(tmp_path_factory, standin_mirror)
