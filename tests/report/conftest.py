"""Fixtures of the report tests: one store of real builds, shared by the module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import lab as lab_kit


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lab_kit.Lab]:
    base = tmp_path_factory.mktemp("reportlab")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENWRT_WOLF_CACHE", str(base / "cache"))
        yield lab_kit.make(base)


@pytest.fixture
def lab_env(lab: lab_kit.Lab, monkeypatch: pytest.MonkeyPatch) -> lab_kit.Lab:
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(lab.base / "cache"))
    monkeypatch.setenv("OPENWRT_WOLF_STORE", str(lab.store))
    return lab
