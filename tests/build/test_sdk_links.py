"""An SDK and an ImageBuilder working copy are trees we unpacked (issue 53, links): what we
write in them (feeds.conf, .config, bin/packages' marks, the packages put into an
ImageBuilder's packages/) and the packages kept in the cache replace a link planted at the
name and refuse a linked folder on the way; before, each was written through. The oracle is
a victim folder outside: its bytes before and after."""

from __future__ import annotations

from pathlib import Path

import pytest

from openwrt_wolf.build import sdk
from openwrt_wolf.files.outputs import LinkRefused
from tests import victims


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    return victims.make(tmp_path)


_unchanged = victims.unchanged


def _pkg(tmp_path: Path) -> Path:
    f = tmp_path / "built" / "luci-ssl_1.0_all.ipk"
    f.parent.mkdir(exist_ok=True)
    f.write_bytes(b"a package")
    return f


def test_kept_packages_in_the_cache(
    tmp_path: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(cache))
    f = _pkg(tmp_path)
    into = cache / "sdk-packages" / "key"
    into.mkdir(parents=True)
    (into / f.name).symlink_to(victim / "secret")
    (into / sdk.KEPT).symlink_to(victim / "secret")
    out = sdk.keep_packages(into, [f], ("openwrt-sdk", None))
    _unchanged(victim)
    assert out == [into / f.name] and out[0].read_bytes() == b"a package"
    assert sdk.kept_packages(into) is not None


def test_kept_packages_linked_folder(
    tmp_path: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(cache))
    cache.mkdir()
    (cache / "sdk-packages").symlink_to(victim)
    with pytest.raises(LinkRefused):
        sdk.keep_packages(cache / "sdk-packages" / "key", [_pkg(tmp_path)], ("sdk", None))
    _unchanged(victim)


def test_sdk_marks_and_ib_packages(tmp_path: Path, victim: Path) -> None:
    top = tmp_path / "sdk"
    (top / "scripts").mkdir(parents=True)
    (top / "scripts" / "feeds").write_text("")
    (top / "Makefile").write_text("")
    (top / "bin" / "packages").mkdir(parents=True)
    mark = top / "bin" / "packages" / sdk.BUILT_MARK
    mark.symlink_to(victim / "secret")
    s = sdk.SDK(top)
    s._mark([top / "bin" / "packages" / "x" / "base" / "a.ipk"])
    _unchanged(victim)
    assert mark.read_text() == "x/base/a.ipk\n"

    ib = tmp_path / "ib"
    (ib / "packages").mkdir(parents=True)
    f = _pkg(tmp_path)
    (ib / "packages" / f.name).symlink_to(victim / "secret")
    (ib / "packages" / sdk.LOCAL_MARK).symlink_to("../../outside/secret")
    sdk.put_local_packages(ib, [f])
    _unchanged(victim)
    assert (ib / "packages" / f.name).read_bytes() == b"a package"
