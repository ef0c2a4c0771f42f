"""Files of ours in the cache written by path (issue 53, links): the rootfs and xz
measurement caches, footprint entries, Debian's apt root and its memo, the upstream digest
memos, a build's kept record. A link planted at the file's name (absolute, relative) is
replaced, never written through; a folder on the way that is a link is one line
(``links inside the cache are not followed``); the cache's own root may be a link (the
user's choice). Before, each was written through (outputs.write follows a link, as --output
does). The oracle is a victim folder outside the cache: its bytes before and after."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from openwrt_wolf import paths, proc
from openwrt_wolf.files.outputs import LinkRefused
from tests import victims


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    c = tmp_path / "cache"
    c.mkdir()
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(c))
    return c


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    return victims.make(tmp_path)


_unchanged = victims.unchanged


def _plant_at(path: Path, victim: Path, how: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    target = victim / "secret"
    path.symlink_to(target if how == "absolute" else os.path.relpath(target, path.parent))


@pytest.mark.parametrize("how", ["absolute", "relative"])
def test_a_link_at_a_cache_file_is_replaced(cache: Path, victim: Path, how: str) -> None:
    f = cache / "size-report" / "rootfs" / "x.json"
    _plant_at(f, victim, how)
    paths.cache_write_text(f, "ours\n")
    _unchanged(victim)
    assert not f.is_symlink() and f.read_text() == "ours\n"


def test_a_linked_folder_in_the_cache_is_refused(cache: Path, victim: Path) -> None:
    (cache / "size-report").symlink_to(victim)
    with pytest.raises(LinkRefused, match="links inside the cache are not followed"):
        paths.cache_write_text(cache / "size-report" / "secret", "ours\n")
    _unchanged(victim)


def test_the_cache_root_may_be_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real-cache"
    real.mkdir()
    (tmp_path / "cache").symlink_to(real)
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    paths.cache_write_text(paths.cache_dir() / "a" / "b", "ours\n")
    assert (real / "a" / "b").read_text() == "ours\n"


def test_xz_measurement_cache(cache: Path, victim: Path) -> None:
    from openwrt_wolf.firmware import rootfs

    data = b"some library bytes" * 100
    digest = hashlib.sha256(data).hexdigest()
    _plant_at(cache / "size-report" / "xz9e" / digest[:2] / digest, victim, "absolute")
    (victim / "secret").write_text("the victim's bytes\n")
    n = rootfs.xz_size(data)
    _unchanged(victim)
    assert (cache / "size-report" / "xz9e" / digest[:2] / digest).read_text() == str(n)


def test_xz_measurement_cache_linked_folder(cache: Path, victim: Path) -> None:
    from openwrt_wolf.firmware import rootfs

    (cache / "size-report").mkdir()
    (cache / "size-report" / "xz9e").symlink_to(victim)
    with pytest.raises(LinkRefused):
        rootfs.xz_size(b"other bytes")
    _unchanged(victim)


def test_upstream_digest_memo(cache: Path, victim: Path, tmp_path: Path) -> None:
    from openwrt_wolf.host import upstream

    f = tmp_path / "pkg-1.0.tar.gz"
    f.write_bytes(b"an upstream tarball")
    _plant_at(cache / "upstream" / f"{f.name}.sha256", victim, "relative")
    got = upstream._sha256(f)
    assert got == hashlib.sha256(b"an upstream tarball").hexdigest()
    _unchanged(victim)
    assert (cache / "upstream" / f"{f.name}.sha256").read_text().split()[1] == got


def test_debian_memo_and_apt_root(
    cache: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openwrt_wolf.host import debian

    class Done:
        output = "an answer\n"

    monkeypatch.setattr(proc, "run", lambda *a, **k: Done())
    apt = debian.AptRoot("mips")
    memo = apt.base / "state" / "apt-cache-answers.json"
    _plant_at(memo, victim, "absolute")
    assert apt.cache_query("policy", "x") == "an answer\n"
    _unchanged(victim)
    assert json.loads(memo.read_text())["answers"] == {"policy x": "an answer\n"}
    for name in ("apt.conf", "sources.list"):
        _plant_at(apt.base / name, victim, "absolute")
    if Path(debian.data()["keyring"]).exists():
        apt._setup()
        _unchanged(victim)
        assert not (apt.base / "apt.conf").is_symlink()


def test_footprint_entry(cache: Path, victim: Path) -> None:
    from openwrt_wolf.footprint import lab

    class Fp:
        def to_dict(self) -> dict[str, str]:
            return {"library": "x"}

    entry = lab.build_root() / "key"
    _plant_at(entry / lab.RESULT, victim, "absolute")
    lab._save(entry, Fp())  # type: ignore[arg-type]
    _unchanged(victim)
    assert json.loads((entry / lab.RESULT).read_text()) == {"library": "x"}


def test_a_download_into_a_linked_cache_folder_is_refused_before_the_lock(
    cache: Path, victim: Path, tmp_path: Path
) -> None:
    """upstream/ a link to the victim: before, the lock file was made there and the victim's
    file at the download's name was checked and replaced by the fetched bytes."""
    from openwrt_wolf.files import fetch

    (victim / "dl").mkdir()
    (victim / "dl" / "pin.tar.gz").write_bytes(b"the victim's other file\n")
    (cache / "upstream").symlink_to(victim)
    src = tmp_path / "src.tar.gz"
    src.write_bytes(b"new bytes\n")
    want = hashlib.sha256(b"new bytes\n").hexdigest()
    dest = cache / "upstream" / "dl" / "pin.tar.gz"
    with pytest.raises(LinkRefused, match="links inside the cache are not followed"):
        fetch.fetch(dest, [fetch.Origin(str(src))], fetch.sha256(want),
                    lock=cache / "upstream" / "dl" / ".lock")  # fmt: skip
    assert sorted(p.name for p in victim.iterdir()) == ["dl", "secret"]
    assert sorted(p.name for p in (victim / "dl").iterdir()) == ["pin.tar.gz"]
    assert (victim / "dl" / "pin.tar.gz").read_bytes() == b"the victim's other file\n"
