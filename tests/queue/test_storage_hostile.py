"""`worker --artifacts URL` (queue/storage.py) against the hostile server of
tests/hostile_http.py on 127.0.0.1 (issue 53): requests.put read the server's answer whole,
so an answer that never ends held the worker for ever and filled its memory; an answer whose
headers dribble in is cut by the upload's deadline. The hang detector is a thread the test
waits on for a bounded time."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.queue import storage
from tests.hostile_http import serve


def put(files: list[Path], base: str) -> str | BaseException:
    """_put_all's result or error, or a failure when it is still running after 30 s."""
    out: list[str | BaseException] = []

    def run() -> None:
        try:
            out.append(storage._put_all(files, [f.name for f in files], base))
        except BaseException as e:  # handed to the test
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():
        pytest.fail("still uploading after 30 s: it hangs")
    return out[0]


def test_an_endless_answer_to_an_upload_is_not_read(tmp_path: Path) -> None:
    image = tmp_path / "sysupgrade.bin"
    image.write_bytes(b"image" * 1000)
    with serve(rate=1e6) as (url, srv):
        got = put([image], f"{url}/endless/key")
    assert got == f"{url}/endless/key" and srv.requests == ["/endless/key/sysupgrade.bin"]


def test_an_answer_dribbling_its_headers_is_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENWRT_WOLF_DOWNLOAD_DEADLINE", "2")
    image = tmp_path / "sysupgrade.bin"
    image.write_bytes(b"image")
    with serve() as (url, _):
        got = put([image], f"{url}/header-drip/key")
    assert isinstance(got, WolfError)
    assert got.message == (f"--artifacts {url}/header-drip/key/sysupgrade.bin: not done in 2 s "
                           "($OPENWRT_WOLF_DOWNLOAD_DEADLINE)")  # fmt: skip
