"""files/httpget.py through files/fetch.py, the one fetcher, against the hostile mirror of
tests/hostile_http.py (a real HTTP server on 127.0.0.1): every answer ends in a failure that
names the origin and why, within its deadline, with nothing left in the cache.

A download runs in a thread that the test waits on for a bounded time (the hang detector:
the code before issue 53 never ended on a dribbling server); the deadline itself is made a few
seconds through $OPENWRT_WOLF_DOWNLOAD_DEADLINE, or through the rate rule's constants."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from openwrt_wolf.files import fetch as fetching
from tests.hostile_http import serve

T = TypeVar("T")
DEADLINE_ENV = "OPENWRT_WOLF_DOWNLOAD_DEADLINE"
WANT = "0" * 64  # no answer here verifies: each must fail, and say why
HANG = 30.0  # seconds the test waits for a download of a 2 s deadline


def within(seconds: float, fn: Callable[[], T]) -> T:
    """fn() in a thread: its result or exception, or a failure if it is still running after
    ``seconds`` (the thread is left to end with the server)."""
    out: list[T] = []
    err: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # handed to the test
            err.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"still downloading after {seconds:.0f} s: it hangs")
    if err:
        raise err[0]
    return out[0]


def failure(
    url: str, dest: Path, max_bytes: int | None = None, resume: bool = False
) -> fetching.Failure:
    """The one failure of fetching ``url`` into ``dest`` (which must not be there after)."""

    def go() -> fetching.Got:
        return fetching.fetch(dest, [fetching.Origin(url, name="the mirror")],
                              fetching.sha256(WANT), lock=None, max_bytes=max_bytes,
                              resume=resume)  # fmt: skip

    with pytest.raises(fetching.NotFetched) as e:
        within(HANG, go)
    (f,) = e.value.failures
    assert str(e.value) == f"{dest.name} not fetched (the mirror: {f.reason})"
    assert not f.mismatch and list(dest.parent.iterdir()) == []  # no .part kept, even to resume
    return f


@pytest.fixture
def deadline_2s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEADLINE_ENV, "2")


@pytest.mark.parametrize(("how", "chars"), [("length-digits", 5000), ("length-e400", 401)])
def test_a_content_length_that_is_no_byte_count(how: str, chars: int, tmp_path: Path) -> None:
    """5,000 digits were a ValueError traceback (int()'s digit limit), 10^400 an
    OverflowError in the progress line."""
    with serve() as (url, _):
        f = failure(f"{url}/{how}/a.tar.zst", tmp_path / "dl" / "a.tar.zst", resume=True)
    assert f.reason.startswith("Content-Length '")
    assert f.reason.endswith(f"… ({chars:,} characters) is not a byte count")


def test_a_content_length_past_the_bound_is_refused_before_reading(tmp_path: Path) -> None:
    """10^15 is a byte count, past the download's bound: refused from the header, not after
    reading up to the bound (the server sends a byte a second: 1,000 s)."""
    with serve() as (url, _):
        f = failure(f"{url}/length-huge/a.tar.zst", tmp_path / "dl" / "a.tar.zst",
                    max_bytes=1000)  # fmt: skip
    assert f.reason == "more than 1,000 bytes"


def test_an_endless_body_ends_at_the_bound(tmp_path: Path) -> None:
    with serve() as (url, _):
        f = failure(f"{url}/endless/a.tar.zst", tmp_path / "dl" / "a.tar.zst",
                    max_bytes=1 << 20)  # fmt: skip
    assert f.reason == "more than 1,048,576 bytes"


def test_an_encoded_body_is_refused(tmp_path: Path) -> None:
    """We ask for the file as it is (Accept-Encoding: identity); a body sent gzip-encoded all
    the same is not inflated (4 MiB to 4 GiB here)."""
    with serve() as (url, _):
        f = failure(f"{url}/gzip-bomb/a.tar.zst", tmp_path / "dl" / "a.tar.zst")
    assert f.reason == "its body is encoded (Content-Encoding 'gzip')"


@pytest.mark.parametrize("how", ["drip", "header-drip", "redirect-body", "endless"])
def test_the_deadline_cuts_a_slow_answer(how: str, tmp_path: Path, deadline_2s: None) -> None:
    """A byte a second, a header line a second, a redirect whose body never ends, an endless
    body at 1 MB/s: requests' timeout is per read, so none of them ended before."""
    with serve(rate=1e6) as (url, _):
        f = failure(f"{url}/{how}/a.tar.zst", tmp_path / "dl" / "a.tar.zst", resume=True)
    if how == "redirect-body":  # its body is never read: the redirects end it first
        assert f.reason == "more than 10 redirects"
    else:
        assert f.reason == f"not done in 2 s (${DEADLINE_ENV})"


def test_a_redirect_loop(tmp_path: Path) -> None:
    with serve() as (url, srv):
        f = failure(f"{url}/redirect-loop/a.tar.zst", tmp_path / "dl" / "a.tar.zst")
    assert f.reason == "more than 10 redirects" and len(srv.requests) == 11


def test_the_rate_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without $OPENWRT_WOLF_DOWNLOAD_DEADLINE: after its allowance (here 1 s) a download must
    average MIN_RATE (here 16 KiB/s). A file of 1 MiB at 256 KiB/s (4 s) arrives; a byte a
    second is cut after the allowance."""
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    monkeypatch.setattr("openwrt_wolf.files.httpget.ALLOWANCE", 1.0)
    data = os.urandom(1 << 20)
    with serve({"a.tar.zst": data}, rate=256 << 10) as (url, _):
        got = within(HANG, lambda: fetching.fetch(
            tmp_path / "ok" / "a.tar.zst", [fetching.Origin(f"{url}/slow/a.tar.zst")],
            fetching.sha256(hashlib.sha256(data).hexdigest()), lock=None))  # fmt: skip
        assert got.path.read_bytes() == data
        f = failure(f"{url}/drip/b.tar.zst", tmp_path / "dl" / "b.tar.zst")
    assert f.reason == "slower than 16 KiB/s after its first 1 s"


def test_no_descriptor_is_left_behind(tmp_path: Path, deadline_2s: None) -> None:
    """The watchdog's duplicates of the sockets are closed with each download."""
    before = len(os.listdir("/proc/self/fd"))
    with serve() as (url, _):
        for how in ("redirect-loop", "length-digits", "header-drip"):
            failure(f"{url}/{how}/a.tar.zst", tmp_path / how / "a.tar.zst")
    assert len(os.listdir("/proc/self/fd")) == before
