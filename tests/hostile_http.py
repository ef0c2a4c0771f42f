"""A hostile HTTP mirror for the tests and bench/hostile_http.py (issue 53): a server on
127.0.0.1 that answers every file but the plain ones it was given in one hostile way, chosen
by the first part of the path (``<base>/<how>/...``):

  endless        200, no Content-Length, bytes for ever (``rate`` bytes a second at most)
  gzip-bomb      200, Content-Encoding gzip: 4 MiB that inflate to 4 GiB (concatenated gzip
                 members of 64 MiB of zeros; made once, ~0.3 s)
  length-digits  Content-Length of 5,000 digits, then a few bytes
  length-e400    Content-Length 10^400
  length-huge    Content-Length 10^15 (a byte count, beyond any bound), a byte a second
  drip           Content-Length 1,000, one byte every ``pace`` seconds
  header-drip    the status line, then one header line every ``pace`` seconds, for ever
  redirect-loop  302 to itself, for ever
  redirect-body  302 whose body never ends (requests read a redirect's body whole)
  chunk-line     chunked, and a chunk-size line that never ends

A HEAD is answered as a GET, a PUT (an upload) read and then answered the same way. Nothing
here imports the code under test. The server listens on 127.0.0.1 only, and every answer ends
when the ``serve`` block does."""

from __future__ import annotations

import contextlib
import threading
import zlib
from collections.abc import Iterator
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOWS = ("endless", "gzip-bomb", "length-digits", "length-e400", "length-huge", "drip",
        "header-drip", "redirect-loop", "redirect-body", "chunk-line")  # fmt: skip
BOMB_MEMBER = 64 << 20  # zeros per gzip member
BOMB_MEMBERS = 64  # 4 GiB inflated


@cache
def bomb_member() -> bytes:
    """One gzip member of 64 MiB of zeros (about 64 KiB); streamed 64 times it is a body of
    4 MiB that inflates to 4 GiB, and the server never holds more than the one member."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    return b"".join(z.compress(block) for _ in range(BOMB_MEMBER >> 20)) + z.flush()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        how, _, rest = self.path.lstrip("/").partition("/")
        name = rest.rsplit("/", 1)[-1]
        with contextlib.suppress(OSError):  # the client gave up: that is the point
            if name in self.server.plain:
                self._send(200, self.server.plain[name])
            elif how in HOWS:
                getattr(self, "_" + how.replace("-", "_"))()
            else:
                self._send(404, b"")

    def do_HEAD(self) -> None:  # answered as a GET: a client must not read the body
        self.do_GET()

    def do_PUT(self) -> None:
        """An upload (queue/storage.py's): the body is read, then answered as a GET is."""
        with contextlib.suppress(OSError, ValueError):
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.do_GET()

    def _send(self, status: int, body: bytes, **headers: str) -> None:
        """A whole answer; its body ``rate`` bytes a second at most (a slow, honest server)."""
        self.send_response(status)
        for k, v in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        step = 16 << 10 if self.server.rate else max(len(body), 1)
        for i in range(0, len(body), step):
            self.wfile.write(body[i : i + step])
            if self.server.rate and self._stopped(step / self.server.rate):
                return

    def _stopped(self, seconds: float) -> bool:
        return self.server.stop.wait(seconds)

    def _forever(self, piece: bytes) -> None:
        """``piece`` again and again, ``rate`` bytes a second at most, until the block ends."""
        pause = len(piece) / self.server.rate if self.server.rate else 0.0
        while not self.server.stop.is_set():
            self.wfile.write(piece)
            if pause:
                self._stopped(pause)

    def _head(self, status: int, **headers: str) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()

    def _endless(self) -> None:
        self._head(200, Connection="close")
        self._forever(b"0123456789abcdef" * 4096)

    def _gzip_bomb(self) -> None:
        member = bomb_member()
        self._head(200, Content_Encoding="gzip", Content_Length=str(len(member) * BOMB_MEMBERS))
        for _ in range(BOMB_MEMBERS):
            if self.server.stop.is_set():
                return
            self.wfile.write(member)

    def _length_digits(self) -> None:
        self._head(200, Content_Length="9" * 5000)
        self.wfile.write(b"x" * 100)

    def _length_e400(self) -> None:
        self._head(200, Content_Length="1" + "0" * 400)
        self.wfile.write(b"x" * 100)

    def _length_huge(self) -> None:
        self._head(200, Content_Length=str(10**15))
        while not self._stopped(1.0):
            self.wfile.write(b"x")
            self.wfile.flush()

    def _drip(self) -> None:
        self._head(200, Content_Length="1000")
        for _ in range(1000):
            self.wfile.write(b"x")
            self.wfile.flush()
            if self._stopped(self.server.pace):
                return

    def _header_drip(self) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        n = 0
        while not self._stopped(self.server.pace):
            n += 1
            self.wfile.write(f"X-Drip-{n}: {n}\r\n".encode())
            self.wfile.flush()

    def _redirect_loop(self) -> None:
        self._send(302, b"", Location=self.path)

    def _redirect_body(self) -> None:
        self._head(302, Location=self.path, Connection="close")
        self._forever(b"moved " * 10_000)

    def _chunk_line(self) -> None:
        self._head(200, Transfer_Encoding="chunked", Connection="close")
        self._forever(b"f" * 65536)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[str]
    plain: dict[str, bytes]
    rate: float
    pace: float
    stop: threading.Event

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up on a hostile answer is what the tests want


@contextlib.contextmanager
def serve(
    plain: dict[str, bytes] | None = None, *, rate: float = 0.0, pace: float = 1.0
) -> Iterator[tuple[str, _Server]]:
    """The server on 127.0.0.1; yields (base URL, server). ``plain``: files (by name) served
    as they are, under every <how>; ``rate``: bytes a second of the endless answers and the
    plain files (0: as fast as they go); ``pace``: seconds between the drips. Every answer
    stops with the block."""
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.requests, srv.plain, srv.rate, srv.pace = [], dict(plain or {}), rate, pace
    srv.stop = threading.Event()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", srv
    finally:
        srv.stop.set()
        srv.shutdown()
        srv.server_close()
        t.join(timeout=10)
