"""Fixtures of the report tests: one store of real builds, shared by the module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import lab as lab_kit


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lab_kit.Lab]:
    base = tmp_path_factory.mktemp("reportlab")
    with pytest.MonkeyPatch.context() as mp:  # only while it is made: set for the session,
        mp.setenv("OPENWRT_WOLF_CACHE", str(base / "cache"))  # it led later modules' tests
        made = lab_kit.make(base)  # on this worker to a cache without OpenWrt's tools
    yield made


@pytest.fixture(autouse=True)
def _lab_cache(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test of the lab runs with the lab's cache, as the lab was made."""
    if "lab" in request.fixturenames:
        lab: lab_kit.Lab = request.getfixturevalue("lab")
        monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(lab.base / "cache"))


@pytest.fixture
def lab_env(lab: lab_kit.Lab, monkeypatch: pytest.MonkeyPatch) -> lab_kit.Lab:
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(lab.base / "cache"))
    monkeypatch.setenv("OPENWRT_WOLF_STORE", str(lab.store))
    return lab
