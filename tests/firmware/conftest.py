"""The what-if lab (tests/firmware/test_whatif.py's stand-in ImageBuilder builds), one fixture
for the modules that run what-if on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from openwrt_wolf.host.openwrt_tools import OpenWrtTools
from tests.firmware.test_whatif import Built, make_lab
from tests.standin.kit import Kit


@pytest.fixture(scope="module")
def lab(
    tmp_path_factory: pytest.TempPathFactory,
    openwrt_tree_25125: Path,
    openwrt_tools: OpenWrtTools,
    standin_kit: Kit,
) -> dict[tuple[str, str], Built]:
    return make_lab(tmp_path_factory, openwrt_tree_25125, openwrt_tools, standin_kit)
