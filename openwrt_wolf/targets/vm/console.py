"""The guest's serial console over QEMU's unix socket: a reader thread keeps everything the
console printed (text and lines, escape sequences removed), and ``expect`` waits for a pattern
with a deadline, failing early when the guest panics or QEMU exits."""

from __future__ import annotations

import codecs
import contextlib
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from ... import signals

_OVERLAP = 512  # longer than any pattern we wait for (they are single lines)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class ConsoleTimeout(Exception):
    pass


class ConsoleClosed(Exception):
    """QEMU closed the console: the guest powered off, rebooted (-no-reboot) or QEMU died."""


class GuestFatal(Exception):
    """A line from the fatal list (a kernel panic) appeared."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


class Console:
    def __init__(
        self,
        sock: socket.socket,
        *,
        logfile: TextIO | None = None,
        fatal: list[str] | None = None,
        echo: Callable[[bytes], None] | None = None,
    ) -> None:
        self._sock = sock
        self._log = logfile
        self._fatal = [re.compile(p) for p in fatal or []]
        self._echo = echo
        self._cond = threading.Condition()
        self.text = ""  # everything so far, ANSI sequences and \r removed
        self.first_byte_at: float | None = None
        self.closed = False
        self._partial = b""
        self._reader = threading.Thread(target=self._pump, name="vm-console", daemon=True)
        self._reader.start()

    @classmethod
    def connect(
        cls, path: Path, *, deadline: float, alive: Callable[[], bool], **kw: object
    ) -> Console:
        """Connect once QEMU has created the socket (it waits for us: no byte is lost)."""
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(path))
                return cls(s, **kw)  # type: ignore[arg-type]
            except (FileNotFoundError, ConnectionRefusedError):
                s.close()
                if not alive():
                    raise ConsoleClosed("QEMU exited before its console opened") from None
                if time.monotonic() > deadline:
                    raise ConsoleTimeout(f"no console socket {path}") from None
                time.sleep(0.02)

    def _pump(self) -> None:
        signals.keep_off_this_thread()  # a TERM must reach the main thread (signals.py)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while True:
            try:
                data = self._sock.recv(65536)
                if 0 < len(data) < 512:
                    # QEMU's UART sends a byte at a time: gather a few milliseconds' worth, so
                    # waiters wake per batch, not per byte (the CPU belongs to the guest).
                    time.sleep(0.005)
                    self._sock.setblocking(False)
                    with contextlib.suppress(BlockingIOError):
                        data += self._sock.recv(65536)
                    self._sock.setblocking(True)
            except OSError:
                data = b""
            if not data:
                with self._cond:
                    self.closed = True
                    self._cond.notify_all()
                return
            if self._echo:
                self._echo(data)
            text = _ANSI.sub("", decoder.decode(data)).replace("\r", "")
            with self._cond:
                if self.first_byte_at is None:
                    self.first_byte_at = time.monotonic()
                self.text += text
                self._cond.notify_all()
            if self._log:
                self._log.write(text)
                self._log.flush()

    def send(self, text: str) -> None:
        try:
            self._sock.sendall(text.encode())
        except OSError as e:
            raise ConsoleClosed(f"console closed while sending: {e}") from None

    def send_bytes(self, data: bytes) -> None:
        self._sock.sendall(data)

    @property
    def pos(self) -> int:
        with self._cond:
            return len(self.text)

    def lines(self) -> list[str]:
        with self._cond:
            return self.text.split("\n")

    def wait_first_byte(self, deadline: float) -> None:
        with self._cond:
            while self.first_byte_at is None:
                if self.closed:
                    raise ConsoleClosed("QEMU exited before the console printed anything")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConsoleTimeout("no console output")
                self._cond.wait(min(left, 0.5))

    def expect(
        self, pattern: str | re.Pattern[str], *, start: int, deadline: float
    ) -> re.Match[str]:
        """Wait until ``pattern`` matches the text after position ``start``."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        scanned = start
        with self._cond:
            while True:
                # Only new text (plus an overlap for a match cut in two) is searched again.
                m = rx.search(self.text, max(start, scanned - _OVERLAP))
                if m:
                    return m
                # Fatal lines are looked for in what arrived since the last look.
                for f in self._fatal:
                    fm = f.search(self.text, max(start, scanned - _OVERLAP))
                    if fm:
                        end = self.text.find("\n", fm.end())
                        raise GuestFatal(self.text[fm.start() : end if end >= 0 else None])
                scanned = len(self.text)
                if self.closed:
                    raise ConsoleClosed("QEMU closed the console")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConsoleTimeout(f"no match for {rx.pattern!r}")
                self._cond.wait(min(left, 0.5))

    def wait_closed(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.closed, timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._reader.join(timeout=2)
