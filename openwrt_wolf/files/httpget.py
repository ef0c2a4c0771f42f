"""Every HTTP read of ours, bounded (issue 53): a mirror we do not trust can make a download
neither big, nor endless, nor slow for ever.

- Size: the body is streamed raw and counted against the caller's ``limit`` (BODY_MAX when
  it names none). Content-Length is an untrusted number: ASCII digits, at most 19 of them
  (5,000 digits were a ValueError traceback, 10^400 an OverflowError in the progress line);
  one above the limit is refused before a byte of the body is read.
- No decompression: we ask for ``Accept-Encoding: identity`` and refuse a body that comes
  encoded all the same. requests decoded gzip without a bound (a 4 MiB body inflating to
  4 GiB was a MemoryError); OpenWrt's servers send files as they are.
- Time: one deadline per download, headers and redirects included (requests' timeout is per
  read: a server sending a header line a second, or a body byte every 4 s, never ended).
  ``Deadline``: $OPENWRT_WOLF_DOWNLOAD_DEADLINE seconds when set (tests and benches make it
  small), else ALLOWANCE seconds plus one per MIN_RATE bytes received (a 200 MB ImageBuilder
  over a 16 KiB/s line still arrives), LONGEST at most. files/watchdog.py shuts the
  download's sockets when it passes.
- Redirects are followed here, at most MAX_REDIRECTS, to http and https only, without
  reading their bodies (requests reads a redirect's whole body into memory)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import time
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

if TYPE_CHECKING:
    import requests

    from .watchdog import Watch

CONNECT_TIMEOUT = 15.0
READ_TIMEOUT = 60.0
CHUNK = 1 << 16
BODY_MAX = 4 << 30  # a download whose caller names no bound (an ImageBuilder's ARCHIVE_MAX)
DEADLINE_ENV = "OPENWRT_WOLF_DOWNLOAD_DEADLINE"
ALLOWANCE = 120.0  # seconds before the minimum rate counts: connecting, a slow start
MIN_RATE = 16 << 10  # bytes a second on average after that
LONGEST = 6 * 3600.0
MAX_REDIRECTS = 10
_LENGTH = re.compile(r"[0-9]{1,19}")  # [0-9]: ASCII only (int() takes any script's digits)


class Refused(OSError):
    """What the server sent is not read: too big, too slow, encoded, not a byte count. An
    OSError with its reason as strerror, as fetch.reason words a failure."""


def too_big(limit: int) -> Refused:
    return Refused(errno.EFBIG, f"more than {limit:,} bytes")


def fixed_seconds() -> float | None:
    """$OPENWRT_WOLF_DOWNLOAD_DEADLINE: seconds one download may take; None when not set."""
    from ..cli import number

    value = os.environ.get(DEADLINE_ENV)
    if not value:
        return None
    return number(value, f"${DEADLINE_ENV}", default=ALLOWANCE, minimum=0.1, maximum=7 * 86_400.0)


class Deadline:
    """When one download must have ended: ``seconds`` after its start (None:
    $OPENWRT_WOLF_DOWNLOAD_DEADLINE, else the rate rule)."""

    def __init__(self, seconds: float | None = None) -> None:
        self.fixed = seconds if seconds is not None else fixed_seconds()
        self.started = time.monotonic()
        self.received = 0  # bytes so far (and a PUT's, sent): each moves the rate rule's on

    def seconds(self) -> float:
        if self.fixed is not None:
            return self.fixed
        return min(ALLOWANCE + self.received / MIN_RATE, LONGEST)

    def left(self) -> float:
        return self.seconds() - (time.monotonic() - self.started)

    def passed(self) -> Refused:
        if self.fixed is not None:
            why = f"not done in {self.fixed:g} s (${DEADLINE_ENV})"
        elif self.seconds() >= LONGEST:
            why = f"not done in {LONGEST / 3600:g} hours"
        else:
            why = f"slower than {MIN_RATE >> 10} KiB/s after its first {ALLOWANCE:g} s"
        return Refused(errno.ETIMEDOUT, why)


def _shown(value: str) -> str:
    """A header value in an error line: cut, never the whole of what a server sent."""
    return repr(value) if len(value) <= 24 else f"{value[:20]!r}… ({len(value):,} characters)"


class Answer:
    """A server's answer whose body has not been read: ``status_code``, ``headers``, the
    checked ``length``; ``iter_content`` reads it bounded. A context manager: its end
    closes the connection and stops the download's watchdog."""

    def __init__(
        self, r: requests.Response, limit: int, watch: Watch, stack: contextlib.ExitStack
    ) -> None:
        self._r, self.limit, self._watch, self._stack = r, limit, watch, stack
        self.status_code: int = r.status_code
        self.headers = r.headers
        self.url: str = r.url

    def __enter__(self) -> Answer:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._stack.close()

    @property
    def length(self) -> int | None:
        """Content-Length when the server sent one; Refused when it is not a byte count."""
        raw = self.headers.get("Content-Length")
        if raw is None:
            return None
        if not _LENGTH.fullmatch(raw.strip()):
            raise Refused(errno.EPROTO, f"Content-Length {_shown(raw)} is not a byte count")
        return int(raw)

    def iter_content(self, chunk_size: int = CHUNK) -> Iterator[bytes]:
        """The body as it arrives, raw: Refused past the limit (before a byte when the
        Content-Length says so), when encoded, or when the deadline passes; a broken
        transfer raises requests' exceptions, as requests' own iter_content does."""
        length = self.length
        if length is not None and length > self.limit:
            raise too_big(self.limit)
        coding = self.headers.get("Content-Encoding", "").strip().lower()
        if coding not in ("", "identity"):
            raise Refused(errno.EPROTO, f"its body is encoded (Content-Encoding {_shown(coding)})")
        stream = self._r.raw.stream(chunk_size, decode_content=False)
        got = 0
        while True:
            try:
                chunk = next(stream, b"")
            except Exception as e:
                self._check_deadline()
                raise _broken(e) from None
            self._check_deadline()  # an end the watchdog made is no end of the body
            if not chunk:
                return
            got += len(chunk)
            if got > self.limit:
                raise too_big(self.limit)
            self._watch.clock.received += len(chunk)
            yield chunk

    def body(self) -> bytes:
        return b"".join(self.iter_content())

    def _check_deadline(self) -> None:
        if self._watch.expired:
            raise self._watch.clock.passed()


def _broken(e: Exception) -> Exception:
    """urllib3's error of a transfer that broke off, as requests' iter_content raises it."""
    import requests
    from urllib3 import exceptions as u3

    if isinstance(e, u3.ProtocolError):
        return requests.exceptions.ChunkedEncodingError(e)
    if isinstance(e, u3.SSLError):
        return requests.exceptions.SSLError(e)
    if isinstance(e, (u3.HTTPError, OSError)):
        return requests.ConnectionError(e)
    return e


def get(
    url: str,
    *,
    limit: int = BODY_MAX,
    headers: Mapping[str, str] | None = None,
    method: str = "GET",
    data: IO[bytes] | None = None,
    read_timeout: float = READ_TIMEOUT,
    deadline: Deadline | None = None,
) -> Answer:
    """The answer to ``method url`` once its headers are in, under one deadline; redirects
    are followed unless ``data`` is sent (a PUT's answer is its own). Raises requests'
    exceptions when the server cannot be reached, Refused for a deadline passed or a
    redirect we do not follow."""
    import requests

    from . import watchdog

    watch = watchdog.Watch(deadline or Deadline())
    stack = contextlib.ExitStack()
    stack.enter_context(watch)
    try:
        session = stack.enter_context(watchdog.session())
        sent = {**(headers or {}), "Accept-Encoding": "identity"}
        r = _follow(session, method, url, sent, watch, data, read_timeout)
        stack.callback(r.close)
        return Answer(r, limit, watch, stack)
    except (requests.RequestException, Refused) as e:
        stack.close()
        if watch.expired:
            raise watch.clock.passed() from None
        raise e from None
    except BaseException:
        stack.close()
        raise


def _follow(
    session: requests.Session,
    method: str,
    url: str,
    headers: dict[str, str],
    watch: Watch,
    data: IO[bytes] | None,
    read_timeout: float,
) -> requests.Response:
    """The first answer that is not a redirect, each redirect's body left unread."""
    from requests.utils import get_auth_from_url, requote_uri

    auth: Any = get_auth_from_url(url)
    for _ in range(MAX_REDIRECTS + 1):
        if watch.expired:
            raise watch.clock.passed()
        r = session.request(method, url, headers=headers, stream=True, allow_redirects=False,
                            auth=auth if any(auth) else None, data=data,
                            timeout=(CONNECT_TIMEOUT, read_timeout))  # fmt: skip
        if watch.expired:  # http.client takes the end the watchdog made for the headers' end
            r.close()
            raise watch.clock.passed()
        target = session.get_redirect_target(r)
        if target is None or data is not None:
            return r
        r.close()
        nxt = urljoin(r.url, requote_uri(target))
        scheme = urlsplit(nxt).scheme.lower()
        if scheme not in ("http", "https"):
            raise Refused(errno.EPROTO, f"redirected to a {_shown(scheme)} URL")
        if session.should_strip_auth(url, nxt):  # type: ignore[no-untyped-call]  # requests' rule
            auth = ("", "")
        url = nxt
    raise Refused(errno.ELOOP, f"more than {MAX_REDIRECTS} redirects")
