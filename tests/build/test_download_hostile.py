"""`invoke build --mirror URL` against the hostile mirror of tests/hostile_http.py (a real
HTTP server on 127.0.0.1), issue 53: the release's sha256sums and the ImageBuilder archive
each answered in one hostile way. Oracles: one `error:` line naming the URL and exit 2, no
traceback; the run's peak RSS as the kernel counts it (tests/peak.py), under an address-space
limit of 3 GiB so that the code before issue 53 fails with a MemoryError instead of taking
the machine's memory; its end within 120 s (a hang fails), with a download deadline of 2 s
($OPENWRT_WOLF_DOWNLOAD_DEADLINE); nothing left in the cache but the lock."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests import peak
from tests.conftest import need_tools
from tests.hostile_http import serve

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("make", "mksquashfs", "unsquashfs", "mkimage", "zstd")
NAME = "openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64.tar.zst"
SUMS = f"{'0' * 64} *{NAME}\n".encode()  # what the archive cases' sha256sums lists
MAX_RSS_KIB = 256 << 10  # a run that reads nothing big peaks near 100 MiB
LIMITED = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
           "os.execv(sys.executable, [sys.executable, '-m', 'invoke', *sys.argv[1:]])")  # fmt: skip


def build(tmp: Path, mirror: str) -> tuple[int, str, int]:
    """Exit status, stderr and peak RSS (KiB) of the build against ``mirror``."""
    env = {**os.environ, "OPENWRT_WOLF_CACHE": str(tmp / "cache"),
           "OPENWRT_WOLF_STORE": str(tmp / "store"),
           "OPENWRT_WOLF_DOWNLOAD_DEADLINE": "2"}  # fmt: skip
    args = ["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--mirror", mirror]
    code, _, err, kib = peak.run([sys.executable, "-c", LIMITED, *args], tmp, 120.0, cwd=ROOT,
                                 env=env)  # fmt: skip
    return code, err, kib


def error_line(err: str) -> str:
    assert "Traceback" not in err, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


def left_in_cache(tmp: Path) -> list[str]:
    return sorted(p.name for p in (tmp / "cache").rglob("*") if p.is_file()
                  and not p.name.endswith(".lock"))  # fmt: skip


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("endless", "more than 16,777,216 bytes"),
        ("gzip-bomb", "its body is encoded (Content-Encoding 'gzip')"),
        ("header-drip", "not done in 2 s ($OPENWRT_WOLF_DOWNLOAD_DEADLINE)"),
    ],
)
def test_a_hostile_sha256sums(how: str, said: str, tmp_path: Path) -> None:
    """sha256sums was read by requests.get whole: an endless body or a 4 MiB gzip body that
    inflates to 4 GiB was a MemoryError; headers dribbled a line a second never ended."""
    need_tools(*TOOLS)
    with serve() as (url, _):
        code, err, kib = build(tmp_path, f"{url}/{how}")
    sums = f"{url}/{how}/releases/25.12.5/targets/ath79/generic/sha256sums"
    assert error_line(err) == f"error: {sums}: {said} (use another --mirror)"
    assert code == 2 and kib < MAX_RSS_KIB, (code, kib)
    assert left_in_cache(tmp_path) == []


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("length-digits", "Content-Length '99999999999999999999'… (5,000 characters) is not a "
         "byte count"),
        ("length-e400", "Content-Length '10000000000000000000'… (401 characters) is not a byte "
         "count"),
        ("drip", "not done in 2 s ($OPENWRT_WOLF_DOWNLOAD_DEADLINE)"),
    ],
)  # fmt: skip
def test_a_hostile_archive(how: str, said: str, tmp_path: Path) -> None:
    """A Content-Length of 5,000 digits was a ValueError traceback and exit 1 with no error
    line, 10^400 an OverflowError in the progress line; an archive at a byte a second never
    ended (the 60 s timeout is per read). The .part is not kept to be resumed."""
    need_tools(*TOOLS)
    with serve({"sha256sums": SUMS}) as (url, _):
        code, err, kib = build(tmp_path, f"{url}/{how}")
    archive = f"{url}/{how}/releases/25.12.5/targets/ath79/generic/{NAME}"
    assert error_line(err) == f"error: cannot fetch {archive}: {said} (use another --mirror)"
    assert code == 2 and kib < MAX_RSS_KIB, (code, kib)
    assert left_in_cache(tmp_path) == []


@pytest.mark.parametrize(
    ("how", "said"),
    [("header-drip", "not done in 2 s ($OPENWRT_WOLF_DOWNLOAD_DEADLINE)"),
     ("redirect-body", "more than 10 redirects")],
)  # fmt: skip
def test_debians_pool_asked_with_head(
    how: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sources --tree` asks Debian's pool whether it serves a file (HEAD): within the same
    deadline, redirects followed by httpget.py. Before: a header line a second held it for
    100 s and more (requests' timeout is per read). The hang detector is a thread."""
    import threading

    from openwrt_wolf.build.sources.from_debian import Archive, Orig
    from openwrt_wolf.errors import WolfError

    monkeypatch.setenv("OPENWRT_WOLF_DOWNLOAD_DEADLINE", "2")
    got: list[BaseException | bool] = []
    with serve() as (url, _):
        o = Orig("x", "1.0-1", "1.0", "x_1.0.orig.tar.gz", "0" * 64, 1, f"{url}/{how}/x.tar.gz")

        def ask() -> None:
            try:
                got.append(Archive(tmp_path / "apt").exists(o))
            except WolfError as e:
                got.append(e)

        t = threading.Thread(target=ask, daemon=True)
        t.start()
        t.join(30)
        assert not t.is_alive(), "still asking after 30 s: it hangs"
    (e,) = got
    assert isinstance(e, WolfError) and e.message == f"cannot reach {o.url}: {said}"
