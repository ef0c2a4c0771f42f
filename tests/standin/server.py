"""A download server for the tests: serves a directory on 127.0.0.1 from a thread, with HTTP
Range (206) like OpenWrt's mirrors, and a switch to break the first transfer off midway."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _Handler(SimpleHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        path = Path(self.translate_path(self.path))
        self.server.requests.append((self.path, self.headers.get("Range")))
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        cut = self.server.break_after
        if cut is not None and path.suffix == ".zst":
            self.server.break_after = None  # only the first transfer breaks
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[tuple[str, str | None]]
    break_after: int | None


@contextlib.contextmanager
def serve(root: Path, *, break_after: int | None = None) -> Iterator[tuple[str, _Server]]:
    """Serve ``root``; yields (base URL, server). The thread stops when the block ends."""
    srv = _Server(("127.0.0.1", 0), partial(_Handler, directory=str(root)))
    srv.requests = []
    srv.break_after = break_after
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", srv
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(timeout=10)
