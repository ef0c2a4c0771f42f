"""term.progress: plain periodic lines when stderr is not a terminal (CI logs), a rich live
display on a terminal (a real pseudo-terminal here)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

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
