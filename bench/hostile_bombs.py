"""Hostile-input family "archive bombs" for bench/bad_inputs.py (issue 53): source archives that
are small on disk and endless to read (tests/tree_bombs.py: a sparse file or a pax `size` of
1 TiB in ~200 bytes, 2,500,000 empty members in 18 MB), each through every way it reaches the
tree digest — `sources --digest FILE`, named as the pinned openwrt-25.12.5 in `--sources DIR`,
in `$OPENWRT_WOLF_SHARED/openwrt` and behind `--sources-url` (a server on 127.0.0.1 in this
process) — and a sparse 1 TiB file named as the pin; the stamp beside an `--imagebuilder`
tree (a FIFO, a link to /dev/zero, a 20 GB sparse file, a link to a secret); path options
that ran apt-get before they were refused (`perf --toolchain /nonexistent`, ...), with PATH
holding only an apt-get that leaves a marker.

Oracles besides the runner's (traceback, error line, hang at --timeout): each run's peak RSS
and CPU time (bench/hostile_readers.py's --measure wrapper; over 512 MiB or 30 s of CPU is
"wrong"), exit 0 is "wrong", the secret in no output ("security"), the apt-get marker
("wrong": a command ran before the refusal), nothing left in the cache ("leftover").

    .venv/bin/python bench/bad_inputs.py --family "archive bombs" --timeout 60
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from hostile import Finding, Probe, fails
from hostile_readers import _MEASURED, MEASURE

from tests import tree_bombs
from tests.build import mini_ib
from tests.standin.server import serve

FAMILY = "archive bombs"
PIN = "openwrt-25.12.5"
MAX_RSS_KIB = 512 << 10
MAX_CPU = 30.0  # the 2.5M-member archive is read to its 200,000th header: ~10 s here
GONE = "/nonexistent/wolf-bench"
_servers = contextlib.ExitStack()
atexit.register(_servers.close)


def _bounded(p: subprocess.CompletedProcess[str]) -> Finding | None:
    m = _MEASURED.search(p.stderr)
    if m is None:
        return None  # killed before it could say (the runner counts a hang)
    rss, cpu = int(m.group(1)), float(m.group(2))
    if rss > MAX_RSS_KIB:
        return "wrong", f"peak RSS {rss >> 10} MiB, more than {MAX_RSS_KIB >> 10} MiB"
    if cpu > MAX_CPU:
        return "wrong", f"{cpu:.1f} s of CPU, more than {MAX_CPU:.0f} s"
    return fails(p)


def _probe(argv: list[str], **kw: object) -> Probe:
    return Probe(argv, check=_bounded, prefix=MEASURE, **kw)  # type: ignore[arg-type]


def _nothing_left(cache: Path) -> Callable[[], Finding | None]:
    def check() -> Finding | None:
        dl = cache / "upstream" / "dl"
        left = [p for p in dl.glob(f"{PIN}*") if p.suffix != ".lock"] if dl.is_dir() else []
        return ("leftover", f"{left[0]} kept") if left else None

    return check


def family(w: Path) -> list[Probe]:
    top = w / "bombs"
    top.mkdir()
    file = f"{PIN}.tar.gz"
    bombs: dict[str, Path] = {}
    for style in tree_bombs.STYLES:
        d = top / style / "openwrt"
        d.mkdir(parents=True)
        bombs[style] = tree_bombs.sparse_bomb(d / file, style)
    d = top / "2.5M members" / "openwrt"
    d.mkdir(parents=True)
    bombs["2.5M members"] = tree_bombs.many_members(d / file, 2_500_000)
    d = top / "sparse 1 TiB file" / "openwrt"
    d.mkdir(parents=True)
    with (d / file).open("wb") as fh:
        fh.truncate(tree_bombs.TIB)
    bombs["sparse 1 TiB file"] = d / file
    after = _nothing_left(w / "cache")
    (top / "no-shared").mkdir()
    # ../shared/openwrt holds the real pin: hidden, and no public URL is reached either
    offline = {"OPENWRT_WOLF_SHARED": str(top / "no-shared"), "HTTPS_PROXY": "http://127.0.0.1:9",
               "https_proxy": "http://127.0.0.1:9", "no_proxy": "127.0.0.1"}  # fmt: skip
    out: list[Probe] = []
    for name, bomb in bombs.items():
        mirror = bomb.parent
        fetch = ["sources", "--fetch", PIN]
        out += [
            _probe(["sources", "--digest", str(bomb)]),
            _probe([*fetch, "--sources", str(mirror)], env=offline, after=after),
            _probe(fetch, env={**offline, "OPENWRT_WOLF_SHARED": str(mirror.parent)}, after=after),
        ]
        if name != "sparse 1 TiB file":  # the test server reads a file whole
            base, _ = _servers.enter_context(serve(mirror))
            out.append(_probe([*fetch, "--sources-url", base], env=offline, after=after))
    return out + _stamps(w) + _before_apt(w)


def _stamps(w: Path) -> list[Probe]:
    """`build --imagebuilder IB` (-j 2, two flavours: a working copy is made) with
    IB/../.openwrt-wolf-extracted not ours; the stand-in's make image fails (exit 2)."""
    secret = "wolf-bench-stamp-secret-" + os.urandom(6).hex()
    (w / "stamp-secret").write_text(f"root:$6${secret}:19000:0:99999:7:::\n")
    out = []
    for kind in ("fifo", "dev-zero", "20 GB sparse", "link to a secret"):
        parent = w / "stamps" / kind
        parent.mkdir(parents=True)
        ib = mini_ib.make(parent / "ib")
        mark = parent / ".openwrt-wolf-extracted"
        if kind == "fifo":
            os.mkfifo(mark)
        elif kind == "dev-zero":
            mark.symlink_to("/dev/zero")
        elif kind == "20 GB sparse":
            with mark.open("wb") as fh:
                fh.truncate(20 << 30)
        else:
            mark.symlink_to(w / "stamp-secret")
        argv = ["build", "--no-report", "-f", "wolfssl,mbedtls", "--stock", "-d", "tl-wr902ac",
                "--imagebuilder", str(ib), "-j", "2"]  # fmt: skip
        out.append(_probe(argv, secrets=(secret,), after=_not_copied(w / "cache", secret)))
    return out


def _not_copied(cache: Path, secret: str) -> Callable[[], Finding | None]:
    """The working copies' stamp (made from the mark) holds no byte of the linked file."""

    def check() -> Finding | None:
        for stamp in cache.rglob(".openwrt-wolf-slot"):
            if secret in stamp.read_text(errors="replace"):
                return "security", f"the linked file's bytes in {stamp}"
        return None

    return check


def _before_apt(w: Path) -> list[Probe]:
    """A path option that is not there, with every host tool missing: refused before apt."""
    fake = w / "apt-bin"
    fake.mkdir()
    marker = w / "apt-get-ran"
    (fake / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {marker}\nexit 1\n')
    (fake / "apt-get").chmod(0o755)

    def no_apt() -> Finding | None:
        if marker.exists():
            ran = marker.read_text().splitlines()[0]
            marker.unlink()
            return "wrong", f"apt-get {ran} ran before the path was refused"
        return None

    kernel, rootfs = w / "apt-kernel.elf", w / "apt-rootfs.img"  # there: a real image's
    kernel.write_bytes(b"\x7fELF")
    rootfs.write_bytes(bytes(512))
    runs = [
        ["perf", "--target", "qemu", "--toolchain", GONE],
        ["perf", "--target", "vm", "--test", "memory", "-f", "wolfssl", "--image", str(kernel),
         "--rootfs", str(rootfs), "--toolchain", GONE],
        ["perf", "--target", "qemu", "--test", "crypto", "--toolchain", GONE],
        ["build", "--no-report", "-f", "mbedtls", "--stock", "-d", "tl-wr902ac",
         "--imagebuilder", GONE],
        ["build", "--no-report", "-f", "wolfssl", "-d", "tl-wr902ac", "--sdk", GONE],
        ["patch", "--tree", GONE],
        ["patch-defaults", "--tree", GONE],
        ["wolfssl-consumers", "--wolfssl", GONE],
    ]  # fmt: skip
    return [_probe(a, env={"PATH": str(fake)}, after=no_apt) for a in runs]
