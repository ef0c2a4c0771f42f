"""Hostile-input family "HTTP mirror" for bench/bad_inputs.py (issue 53): every entry point
that reads over HTTP, against tests/hostile_http.py's server on 127.0.0.1 answering in one
hostile way each (an endless body, a 4 MiB gzip body inflating to 4 GiB, a Content-Length of
5,000 digits, of 10^400 and of 10^15, a body or the headers dribbled a piece a second, a
redirect loop, a redirect with an endless body, a chunk-size line without end):

- `build --mirror URL`: the release's sha256sums hostile, then (sha256sums plain) the
  ImageBuilder archive;
- `sources --fetch uhttpd --sources-url URL` (a pinned snapshot; the public URLs after the
  mirror go to a proxy nobody answers, ../shared is replaced by an empty directory);
- `sources --tree T --sources-url URL` on a stand-in tree (a top Makefile whose `download`
  asks for one file, tools/x/Makefile pinning it) with the file under its name, other bytes,
  in --sources and `--allow same-version`: the mirror is asked first, fails, and the local
  file is used (exit 0, the failure named on stderr).

Oracles besides the runner's (traceback, error line, hang at --timeout): every run goes
through this file's ``--measure`` wrapper (peak RSS, CPU and wall time of the child by
wait4): over 512 MiB is a "security" finding (memory a server can take), over 10 s of CPU
or 30 s of wall time a "wrong" one; the deadline is made 3 s ($OPENWRT_WOLF_DOWNLOAD_DEADLINE)
so the family takes a couple of minutes. A refusal must be one line naming the URL and the
reason expected of that answer, with exit 2 ("wrong" otherwise). The servers listen on
127.0.0.1 only and stop when the bench ends, or after an hour by themselves.

    .venv/bin/python bench/bad_inputs.py --family "HTTP mirror"
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hostile import Finding, Probe  # noqa: E402  (bench/hostile.py)

from tests.hostile_http import HOWS, serve  # noqa: E402

FAMILIES = ("HTTP mirror",)
DEADLINE = 3  # seconds, each download ($OPENWRT_WOLF_DOWNLOAD_DEADLINE)
MAX_RSS_KIB = 512 << 10
MAX_CPU = 10.0
MAX_WALL = 30.0
RATE = 32e6  # bytes a second of an endless archive: the deadline ends it, not the disk
IB = "openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64.tar.zst"
SUMS_PATH = "releases/25.12.5/targets/ath79/generic"
MEASURE = [sys.executable, str(Path(__file__).resolve()), "--measure", "--"]
_MEASURED = re.compile(r"^wolf-bench: peak RSS (\d+) KiB, CPU ([\d.]+) s, wall ([\d.]+) s$", re.M)
Check = Callable[[subprocess.CompletedProcess[str]], Finding | None]

# what each answer must be refused with (a part of the error line)
SAID = {
    "endless": ("more than", "not done in"),  # the size bound or the deadline, whichever first
    "gzip-bomb": ("its body is encoded (Content-Encoding 'gzip')",),
    "length-digits": ("… (5,000 characters) is not a byte count",),
    "length-e400": ("… (401 characters) is not a byte count",),
    "length-huge": ("more than",),
    "drip": (f"not done in {DEADLINE} s",),
    "header-drip": (f"not done in {DEADLINE} s",),
    "redirect-loop": ("more than 10 redirects",),
    "redirect-body": ("more than 10 redirects",),
    "chunk-line": ("ChunkedEncodingError",),
}


def measure(argv: list[str]) -> int:
    """Run argv (stdio inherited) and say its peak RSS, CPU and wall time on stderr."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv)
    _, status, usage = os.wait4(p.pid, 0)
    cpu, wall = usage.ru_utime + usage.ru_stime, time.monotonic() - t0
    print(f"wolf-bench: peak RSS {usage.ru_maxrss} KiB, CPU {cpu:.1f} s, wall {wall:.1f} s",
          file=sys.stderr)  # fmt: skip
    return os.waitstatus_to_exitcode(status)


def bounded(expect: Check) -> Check:
    def check(p: subprocess.CompletedProcess[str]) -> Finding | None:
        m = _MEASURED.search(p.stderr)
        if m is None:
            return None  # killed before it could say (the runner counts a hang)
        rss, cpu, wall = int(m.group(1)), float(m.group(2)), float(m.group(3))
        if rss > MAX_RSS_KIB:
            return "security", f"peak RSS {rss >> 10} MiB, more than {MAX_RSS_KIB >> 10} MiB"
        if cpu > MAX_CPU:
            return "wrong", f"{cpu:.1f} s of CPU, more than {MAX_CPU:.0f} s"
        if wall > MAX_WALL:
            return "wrong", f"ran {wall:.0f} s, more than {MAX_WALL:.0f} s"
        return expect(p)

    return check


def refused(url: str, how: str) -> Check:
    """Exit 2 and one error line naming ``url`` and what ``how`` is refused with."""

    def check(p: subprocess.CompletedProcess[str]) -> Finding | None:
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error: ")]
        if p.returncode != 2 or len(lines) != 1:
            return "wrong", f"exit {p.returncode} with {len(lines)} error lines"
        if url not in lines[0] or not any(s in lines[0] for s in SAID[how]):
            return "wrong", f"the error line does not say why: {lines[0][:200]!r}"
        return None

    return check


def used_near(url: str, how: str, tree: Path, near: bytes) -> Check:
    """`sources --tree`: exit 0, the mirror's failure named, the local file in dl/."""

    def check(p: subprocess.CompletedProcess[str]) -> Finding | None:
        said = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.startswith(f"sources: {url}")]
        if p.returncode != 0 or len(said) != 1:
            return "wrong", f"exit {p.returncode}, {len(said)} lines about the mirror"
        if not any(s in said[0] for s in SAID[how]):
            return "wrong", f"the mirror's failure does not say why: {said[0][:200]!r}"
        placed = tree / "dl" / "x-1.0.tar.gz"
        if not placed.is_file() or placed.read_bytes() != near:
            return "wrong", "the local file was not placed in dl/"
        return None

    return check


def _stand_in_tree(t: Path, pinned: str) -> None:
    """What `sources --tree` lists a tree's files with (make download with the recorder,
    the compile closures, `make -C <dir> var.X`): one file, x-1.0.tar.gz, asked by tools/x."""
    shutil.rmtree(t, ignore_errors=True)
    for d in ("include", "config", "scripts", "tools/x", "tmp"):
        (t / d).mkdir(parents=True)
    for f in ("include/target.mk", "config/Config-build.in", ".config", "tools/Makefile",
              "rules.mk", "tmp/.packagedeps"):  # fmt: skip
        (t / f).write_text("")
    (t / "Makefile").write_text(
        'download:\n\tcd tools/x && $(SCRIPT_DIR)/download.pl "$(DL_DIR)" x-1.0.tar.gz '
        f'{pinned} "" https://example.invalid/x-1.0.tar.gz\n'
    )
    (t / "tools/x/Makefile").write_text(
        f"PKG_NAME:=x\nPKG_VERSION:=1.0\nPKG_SOURCE:=x-1.0.tar.gz\nPKG_HASH:={pinned}\n\n"
        "var.%:\n\t@echo \"$*='$($*)'\"\n"
    )


_servers = contextlib.ExitStack()
atexit.register(_servers.close)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def family(w: Path) -> list[Probe]:
    """The runs; the servers start here (a thread each) and stop with the bench."""
    sums_base, _ = _servers.enter_context(serve())
    ib_base, _ = _servers.enter_context(serve({"sha256sums": f"{'0' * 64} *{IB}\n".encode()},
                                              rate=RATE))  # fmt: skip
    files_base, _ = _servers.enter_context(serve(rate=RATE))
    timer = threading.Timer(3600, _servers.close)  # an hour at most, whatever the bench does
    timer.daemon = True
    timer.start()
    dead = f"http://127.0.0.1:{_closed_port()}"
    (w / "http-shared").mkdir(exist_ok=True)
    env = {"OPENWRT_WOLF_DOWNLOAD_DEADLINE": str(DEADLINE), "HTTP_PROXY": dead,
           "HTTPS_PROXY": dead, "http_proxy": dead, "https_proxy": dead,
           "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1",
           "OPENWRT_WOLF_SHARED": str(w / "http-shared")}  # fmt: skip
    near, pinned = b"other bytes\n", hashlib.sha256(b"the pinned bytes\n").hexdigest()
    local = w / "http-local"
    local.mkdir(exist_ok=True)
    (local / "x-1.0.tar.gz").write_bytes(near)

    def probe(argv: list[str], expect: Check, setup: Callable[[], None] | None = None) -> Probe:
        return Probe(argv, check=bounded(expect), prefix=MEASURE, env=env, setup=setup)

    b = ["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--mirror"]
    out = []
    for how in HOWS:
        out.append(probe([*b, f"{sums_base}/{how}"],
                         refused(f"{sums_base}/{how}/{SUMS_PATH}/sha256sums", how)))  # fmt: skip
        if how != "chunk-line":  # a transfer that breaks keeps its .part to be resumed
            out.append(probe([*b, f"{ib_base}/{how}"],
                             refused(f"{ib_base}/{how}/{SUMS_PATH}/{IB}", how)))  # fmt: skip
        out.append(probe(["sources", "--fetch", "uhttpd", "--sources-url", f"{files_base}/{how}"],
                         refused(f"{files_base}/{how}/uhttpd-", how)))  # fmt: skip
        tree = w / "http-trees" / how
        out.append(probe(
            ["sources", "--tree", str(tree), "--sources", str(local), "--sources-url",
             f"{files_base}/{how}", "--no-debian", "--allow", "same-version"],
            used_near(f"{files_base}/{how}/x-1.0.tar.gz", how, tree, near),
            setup=lambda t=tree: _stand_in_tree(t, pinned),
        ))  # fmt: skip
    return out


if __name__ == "__main__" and sys.argv[1:2] == ["--measure"]:
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(measure(sys.argv[3:]))
