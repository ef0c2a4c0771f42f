"""term.progress: plain periodic lines when stderr is not a terminal (CI logs), a rich live
display on a terminal (a real pseudo-terminal here)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = """
import threading, time
from openwrt_wolf import term
with term.progress("download openwrt-imagebuilder.tar.zst", total=4096, unit="B") as p:
    for _ in range(8):
        time.sleep(0.1)
        p.advance(512)
with term.progress("boot 1/3") as a, term.progress("boot 2/3") as b:
    a.advance(); b.advance()
"""


def test_plain_lines_when_not_a_terminal() -> None:
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OPENWRT_WOLF_PROGRESS_EVERY": "0.15"},
    )
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    name = "download openwrt-imagebuilder.tar.zst"
    assert lines[0] == f"{name}: started"
    periodic = [ln for ln in lines if ln.startswith(f"{name}: ") and "%" in ln and "done" not in ln]
    assert periodic, lines  # at least one line while it ran (every 0.15 s over 0.8 s)
    assert any(
        ln.startswith(f"{name}: done in") and "4.0 KiB/4.0 KiB (100 %)" in ln for ln in lines
    )
    assert "boot 1/3: started" in lines and "boot 2/3: started" in lines
    assert "\r" not in p.stderr and "\x1b[" not in p.stderr  # readable in a CI log


def test_rich_display_on_a_terminal() -> None:
    main, sub = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        stdin=sub,
        stdout=sub,
        stderr=sub,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "120"},
    )
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert p.wait(60) == 0
    os.close(main)
    text = out.decode(errors="replace")
    assert "\x1b[" in text  # rich drew (and cleared) a live display
    assert "download openwrt-imagebuilder.tar.zst: started" not in text
    assert "download openwrt-imagebuilder.tar.zst: done in" in text


# Sizes a server or a file declares reach the progress line: a Content-Length of 10^400 was an
# OverflowError, in the progress thread (a traceback amid the output) or, on a terminal, in
# the task's own thread (exit 1 and no error line).
HUGE = 10**400


def test_the_size_formatter_takes_any_number() -> None:
    from openwrt_wolf import term

    assert term._size(HUGE) == "more than 2^63 B"
    assert term._size(-HUGE) == "less than -2^63 B"
    assert term._size(-5) == "-5 B" and term._size(-3 << 30) == "-3.0 GiB"
    assert term._size(float("nan")) == "? B" and term._size(float("inf")) == "more than 2^63 B"
    assert term._size(1536) == "1.5 KiB" and term._size(5 << 40) == "5.0 TiB"


BIG_SCRIPT = """
import sys, time
from openwrt_wolf import term
total = int(sys.argv[1])
with term.progress("download huge.tar.zst", total=total, unit="B") as p:
    for _ in range(6):
        time.sleep(0.1)
        p.advance(512)
    p.update(completed=-total)
with term.progress("steps", total=total) as q:
    q.advance(total)
    time.sleep(0.3)
print("finished")
"""


@pytest.mark.parametrize("total", [HUGE, -HUGE, -7], ids=["10^400", "-10^400", "-7"])
def test_progress_of_a_size_beyond_any_number(total: int) -> None:
    """The plain lines' thread and the end line with a total of 10^400 or negative: no
    traceback, the task goes on."""
    p = subprocess.run(
        [sys.executable, "-c", BIG_SCRIPT, str(total)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OPENWRT_WOLF_PROGRESS_EVERY": "0.05"},
    )
    assert p.returncode == 0 and p.stdout.strip() == "finished", p.stderr
    assert "Traceback" not in p.stderr and "Error" not in p.stderr
    lines = p.stderr.splitlines()
    assert any(ln.startswith("download huge.tar.zst: ") and "s" in ln for ln in lines[1:]), lines
    assert any(ln.startswith("download huge.tar.zst: done in") for ln in lines), lines


def test_progress_of_a_size_beyond_any_number_on_a_terminal() -> None:
    """rich's live display, fed from the task's own thread."""
    main, sub = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-c", BIG_SCRIPT, str(HUGE)],
        cwd=ROOT,
        stdin=sub,
        stdout=sub,
        stderr=sub,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "120"},
    )
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    code = p.wait(60)
    os.close(main)
    text = out.decode(errors="replace")
    assert code == 0 and "finished" in text and "Traceback" not in text, text[-2000:]
