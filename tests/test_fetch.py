"""files/fetch.py, the one fetch-verify-cache, against a real HTTP server on 127.0.0.1 that
honours Range (tests/standin/server.py): a broken download resumed, bytes that fail
verification removed and named by origin, a second process waiting on the lock served from
the cache, a file accepted by its tree digest (upstream's case)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from openwrt_wolf.files import fetch as fetching
from openwrt_wolf.files.locks import locked
from openwrt_wolf.host.treedigest import tree_sha256
from tests.standin.server import serve
from tests.upstream_mirror import repack

ROOT = Path(__file__).resolve().parent.parent
DATA = os.urandom(1 << 20)  # one MiB: the server breaks off after 300,000 bytes
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def www(tmp_path: Path) -> Path:
    d = tmp_path / "www"
    d.mkdir()
    (d / "a.tar.zst").write_bytes(DATA)  # .zst: the file the server's break_after cuts
    return d


def test_a_broken_download_is_resumed_with_range(www: Path, tmp_path: Path) -> None:
    dest, lock = tmp_path / "cache" / "a.tar.zst", tmp_path / "locks" / "a.lock"
    with serve(www, break_after=300_000) as (url, srv):
        origin = fetching.Origin(f"{url}/a.tar.zst")
        with pytest.raises(fetching.NotFetched) as e:
            fetching.fetch(dest, [origin], fetching.sha256(SHA), lock=lock, resume=True)
        (f,) = e.value.failures
        assert f.broken and f.origin == origin and not dest.exists()
        kept = dest.with_name("a.tar.zst.part").stat().st_size
        assert 0 < kept <= 300_000
        got = fetching.fetch(dest, [origin], fetching.sha256(SHA), lock=lock, resume=True)
    assert got.path == dest and got.origin == origin and dest.read_bytes() == DATA
    assert srv.requests[-1] == ("/a.tar.zst", f"bytes={kept}-")
    assert not dest.with_name("a.tar.zst.part").exists()


def test_without_resume_a_broken_download_leaves_nothing(www: Path, tmp_path: Path) -> None:
    dest = tmp_path / "cache" / "a.tar.zst"
    with serve(www, break_after=300_000) as (url, _), pytest.raises(fetching.NotFetched):
        fetching.fetch(dest, [fetching.Origin(f"{url}/a.tar.zst")], fetching.sha256(SHA),
                       lock=None)  # fmt: skip
    assert sorted(p.name for p in dest.parent.iterdir()) == []


def test_wrong_bytes_are_removed_and_their_origin_named(www: Path, tmp_path: Path) -> None:
    dest = tmp_path / "cache" / "a.tar.zst"
    want = "0" * 64
    with serve(www) as (url, srv):
        bad = fetching.Origin(f"{url}/a.tar.zst", name="the mirror")
        later = fetching.Origin(f"{url}/never-asked")
        with pytest.raises(fetching.NotFetched) as e:
            fetching.fetch(dest, [bad, later], fetching.sha256(want), lock=None)
    (f,) = e.value.failures  # a mismatch ends the tries: the later origin is never asked
    assert f.mismatch and f.got == SHA and f.origin == bad
    assert "the mirror: sha256 " in str(e.value) and "\n" not in str(e.value)
    assert [p for p, _ in srv.requests] == ["/a.tar.zst"]
    assert list(dest.parent.iterdir()) == []  # the .part is gone, nothing published


def test_past_a_mismatch_the_next_origin_serves(www: Path, tmp_path: Path) -> None:
    """dl/'s way: other bytes from one origin, the pinned ones from the next; a missing local
    file and an HTTP 404 are failures of their own."""
    other = tmp_path / "other.tar.zst"
    other.write_bytes(b"other bytes")
    dest = tmp_path / "dl" / "a.tar.zst"
    with serve(www) as (url, _):
        wheres = [str(tmp_path / "nowhere"), str(other), f"{url}/missing", f"{url}/a.tar.zst"]
        origins = [fetching.Origin(w) for w in wheres]
        got = fetching.fetch(dest, origins, fetching.sha256(SHA), lock=None, past_mismatch=True)
    assert got.origin == origins[3] and dest.read_bytes() == DATA


def test_failures_per_origin(www: Path, tmp_path: Path) -> None:
    dest = tmp_path / "dl" / "a.tar.zst"
    with serve(www) as (url, _):
        wheres = [str(tmp_path / "nowhere"), f"{url}/missing", "http://127.0.0.1:9/a",
                  f"{url}/a.tar.zst"]  # fmt: skip
        origins = [fetching.Origin(w) for w in wheres]
        with pytest.raises(fetching.NotFetched) as e:
            fetching.fetch(dest, origins, fetching.sha256(SHA), lock=None, max_bytes=1000)
    missing, absent, closed, big = e.value.failures
    assert missing.missing and absent.status == 404 and absent.reason == "HTTP 404"
    assert closed.unreached and closed.reason == "ConnectionError"
    assert big.reason == "more than 1,000 bytes" and not big.mismatch
    assert list(dest.parent.iterdir()) == []


def test_the_cache_serves_and_a_damaged_entry_is_fetched_again(www: Path, tmp_path: Path) -> None:
    dest = tmp_path / "cache" / "a.tar.zst"
    dest.parent.mkdir()
    dest.write_bytes(b"damaged")
    with serve(www) as (url, srv):
        origin = fetching.Origin(f"{url}/a.tar.zst")
        assert fetching.fetch(dest, [origin], fetching.sha256(SHA), lock=None).origin == origin
        again = fetching.fetch(dest, [origin], fetching.sha256(SHA), lock=None)
    assert again.origin is None and len(srv.requests) == 1


_WAITER = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from openwrt_wolf.files import fetch as f
print("ready", flush=True)
got = f.fetch(Path(sys.argv[2]), [f.Origin(sys.argv[3])], f.sha256(sys.argv[4]),
              lock=Path(sys.argv[5]))
print("cache" if got.origin is None else "fetched", got.path)
"""


def test_a_second_process_waits_on_the_lock_and_takes_the_cached_file(
    www: Path, tmp_path: Path
) -> None:
    """Both processes start while the test holds the lock; when it is let go, one downloads
    and the other, waiting on it, finds the file in the cache: one request in all."""
    dest, lock = tmp_path / "cache" / "a.tar.zst", tmp_path / "locks" / "a.lock"
    with serve(www) as (url, srv):
        with locked(lock):
            argv = [sys.executable, "-c", _WAITER, str(ROOT), str(dest), f"{url}/a.tar.zst",
                    SHA, str(lock)]  # fmt: skip
            procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(2)]
            for p in procs:
                assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            time.sleep(0.5)  # both are at the lock now
            assert not dest.exists()
        outs = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert outs == [f"cache {dest}", f"fetched {dest}"]
    assert len(srv.requests) == 1 and dest.read_bytes() == DATA


def _tree_verifier(sha256: str, tree: str) -> fetching.Verifier:
    """host/upstream.py's rule: the pinned bytes, or the pinned tree in another packing."""

    def check(path: Path, known: str | None) -> fetching.Verdict:
        got = known or hashlib.sha256(path.read_bytes()).hexdigest()
        if got == sha256:
            return fetching.Verdict(True, got, "sha256")
        digest = tree_sha256(path)
        return fetching.Verdict(digest == tree, digest, "tree")

    return check


def test_another_packing_is_accepted_by_its_tree_digest(tmp_path: Path) -> None:
    src = tmp_path / "src" / "proj-1"
    src.mkdir(parents=True)
    (src / "main.c").write_text("int main(void) { return 0; }\n")
    pinned = tmp_path / "proj-1.tar.gz"
    with tarfile.open(pinned, "w:gz") as t:
        t.add(src, arcname="proj-1")
    sha, tree = hashlib.sha256(pinned.read_bytes()).hexdigest(), tree_sha256(pinned)
    other = tmp_path / "mirror" / "proj-1.tar.gz"
    other.parent.mkdir()
    repack(pinned, other, "proj-abcdef")  # GitHub's way: another top folder, other bytes
    assert hashlib.sha256(other.read_bytes()).hexdigest() != sha
    dest = tmp_path / "cache" / "proj-1.tar.gz"
    got = fetching.fetch(dest, [fetching.Origin(str(other))], _tree_verifier(sha, tree),
                         lock=None)  # fmt: skip
    assert got.how == "tree" and dest.read_bytes() == other.read_bytes()

    def change(m: tarfile.TarInfo, data: bytes | None) -> tuple[tarfile.TarInfo, bytes | None]:
        return m, data.replace(b"0", b"1") if data is not None else None

    tampered = tmp_path / "tampered.tar.gz"
    repack(pinned, tampered, "proj-abcdef", change=change)
    dest.unlink()
    with pytest.raises(fetching.NotFetched) as e:
        fetching.fetch(dest, [fetching.Origin(str(tampered))], _tree_verifier(sha, tree),
                       lock=None)  # fmt: skip
    assert e.value.failures[0].got not in (None, tree) and list(dest.parent.iterdir()) == []


def test_an_archive_from_a_mirror_is_bounded(
    www: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sha256sums names no size: an ImageBuilder mirror that sends more than an archive can be
    (here the bound made 100,000 bytes, the file a MiB) ends in one line, nothing kept."""
    from openwrt_wolf.build import download
    from openwrt_wolf.errors import WolfError

    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(download, "ARCHIVE_MAX", 100_000)
    with serve(www) as (url, _):
        a = download.Archive("imagebuilder", "25.12.5", "ath79/generic", "a.tar.zst", SHA,
                             f"{url}/a.tar.zst", False)  # fmt: skip
        with pytest.raises(WolfError) as e:
            download.fetch(a)
    assert "more than 100,000 bytes" in e.value.message and "\n" not in e.value.message
    assert [p.name for p in download.cache_path(a).parent.iterdir()] == []


def test_a_library_source_from_a_mirror_is_bounded(
    www: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openwrt_wolf.footprint import sources
    from openwrt_wolf.footprint.spec import Source
    from openwrt_wolf.host.upstream import Unavailable

    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(sources.SOURCES_ENV, raising=False)
    monkeypatch.setattr(sources, "SOURCE_MAX", 100_000)
    src = Source("wolfssl", "0", "a.tar.zst", SHA, ())
    with serve(www) as (url, _), pytest.raises(Unavailable) as e:
        sources.fetch(src, mirrors=[url])
    assert "mirror: more than 100,000 bytes" in e.value.message
    assert [p.name for p in sources.download_dir().iterdir()] == ["a.tar.zst.lock"]


@pytest.mark.parametrize("kind", ["fifo", "device", "missing"])
def test_a_mirror_directorys_archive_that_is_no_file_is_not_read(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO would block a read for ever, /dev/zero never end: neither is opened."""
    from openwrt_wolf.build import download
    from openwrt_wolf.errors import WolfError

    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    where = tmp_path / "mirror" / "a.tar.zst"
    where.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(where)
    elif kind == "device":
        where.symlink_to("/dev/zero")
    a = download.Archive("imagebuilder", "25.12.5", "ath79/generic", "a.tar.zst", SHA,
                         str(where), False)  # fmt: skip
    with pytest.raises(WolfError) as e:
        download.fetch(a)
    there = "does not exist" if kind == "missing" else "is not a regular file"
    assert e.value.message == f"{where} {there} in the mirror directory"


# --- links planted at a .part (issue 53): never written through -----------------------------


def _victim(tmp_path: Path) -> Path:
    """A file outside every directory we own, with bytes of its own."""
    v = tmp_path / "outside" / "victim"
    v.parent.mkdir()
    v.write_bytes(b"the victim's own bytes\n")
    return v


def _refused_and_intact(e: pytest.ExceptionInfo[Exception], part: Path, victim: Path) -> None:
    from openwrt_wolf.errors import WolfError

    assert victim.read_bytes() == b"the victim's own bytes\n"
    assert sorted(os.listdir(victim.parent)) == ["victim"]
    assert isinstance(e.value, WolfError), e.value
    assert f"{part} is a symbolic link" in e.value.message and "\n" not in str(e.value)


@pytest.mark.parametrize("how", ["absolute", "relative"])
def test_a_resumed_archive_never_appends_to_a_link_at_its_part(
    how: str, www: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """<cache>/downloads/…/<archive>.part a link: the resume stat'ed the link's target and
    appended the mirror's bytes to it (open "ab"). Now one line; the victim keeps its bytes."""
    from openwrt_wolf.build import download

    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    victim = _victim(tmp_path)
    with serve(www) as (url, _):
        a = download.Archive("imagebuilder", "25.12.5", "ath79/generic", "a.tar.zst", SHA,
                             f"{url}/a.tar.zst", False)  # fmt: skip
        part = download.cache_path(a).with_name("a.tar.zst.part")
        part.parent.mkdir(parents=True)
        part.symlink_to(victim if how == "absolute" else os.path.relpath(victim, part.parent))
        with pytest.raises(Exception) as e:
            download.fetch(a)
    _refused_and_intact(e, part, victim)
    assert not download.cache_path(a).exists()


def test_an_upstream_pins_part_that_is_a_link_is_not_overwritten(
    www: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """<cache>/upstream/dl/<pin>.part a link: the download truncated the link's target and
    wrote the archive into it, then the link itself was renamed into the cache."""
    from openwrt_wolf.host import upstream

    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENWRT_WOLF_SHARED", str(tmp_path / "no-shared"))
    monkeypatch.delenv(upstream.SOURCES_ENV, raising=False)
    monkeypatch.delenv(upstream.SOURCES_URL_ENV, raising=False)
    victim = _victim(tmp_path)
    with serve(www) as (url, _):
        pin = upstream.Pin("toy", "o/toy", "0" * 40, "1", (f"{url}/a.tar.zst",), "a.tar.zst",
                           SHA, "0" * 64)  # fmt: skip
        monkeypatch.setattr(upstream, "pins", lambda: {"toy": pin})
        part = upstream.download_dir() / "a.tar.zst.part"
        part.parent.mkdir(parents=True)
        part.symlink_to(victim)
        with pytest.raises(Exception) as e:
            upstream.tarball("toy")
    _refused_and_intact(e, part, victim)
    assert not (upstream.download_dir() / "a.tar.zst").exists()
