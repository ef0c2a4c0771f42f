"""The watchdog of one download (files/httpget.py): every connection requests opens for it
is registered, and once the download's deadline has passed its sockets are shut down, which
ends a read that is waiting, TLS handshakes included. requests' timeout is per read, so
nothing else cut a server that sends a header line a second. Imported only when something is
downloaded.

What is kept is a duplicate of each socket's descriptor, taken as it is connected: a
shutdown is the socket's, whichever descriptor names it, so the dup reaches it after
http.client has let go of its own reference (an answer with ``Connection: close``) and after
TLS has wrapped it, and the dup, ours until the download ends, can never name another file."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .. import signals

if TYPE_CHECKING:
    from .httpget import Deadline

_current = threading.local()  # the watch of the download this thread runs


class Watch:
    def __init__(self, clock: Deadline) -> None:
        self.clock = clock
        self.expired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="download-deadline", daemon=True)

    def __enter__(self) -> Watch:
        _current.watch = self
        self._thread.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        _current.watch = None
        self._thread.join()
        for s in self._socks:
            s.close()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.append(sock.dup())

    def _pause(self) -> float:
        # the rate rule moves the deadline on as bytes arrive: look again at least each second;
        # once passed, shut again what a redirect may have opened since
        return 0.2 if self.expired else min(max(self.clock.left(), 0.0), 1.0)

    def _run(self) -> None:
        signals.keep_off_this_thread()  # a TERM must reach the main thread (signals.py)
        while not self._done.wait(self._pause()):
            if self.clock.left() > 0:
                continue
            self.expired = True  # before the shutdown: the reader's error is then the deadline's
            with self._lock:
                socks = list(self._socks)
            for s in socks:
                with contextlib.suppress(OSError):  # not connected (any more)
                    s.shutdown(socket.SHUT_RDWR)


def _register(sock: socket.socket) -> socket.socket:
    watch = getattr(_current, "watch", None)
    if watch is not None:
        watch.add(sock)
    return sock


class _Conn(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        return _register(super()._new_conn())


class _TLSConn(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _register(super()._new_conn())


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Conn


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _TLSConn


_POOLS = {"http": _Pool, "https": _TLSPool}


class _Adapter(HTTPAdapter):
    """requests' adapter whose connections (direct or through an HTTP proxy) are watched."""

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any
    ) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # a SOCKS manager keeps its own pools
            manager.pool_classes_by_scheme = _POOLS
        return manager


class _Session(requests.Session):
    """Redirects are httpget.py's to follow: requests' own way reads each redirect's whole
    body into memory, even with allow_redirects=False (for Response.next)."""

    def resolve_redirects(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        return iter(())


def session() -> requests.Session:
    s = _Session()
    adapter = _Adapter()
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    return s
