"""Families of hostile inputs for bench/bad_inputs.py (issue 20): crafted packages through
`what-if` (every case of tests/hostile.py, aimed at a victim directory), special files where a
package or manifest belongs, --output targets of each special kind for size-report, history
and what-if, and termination signals during a report and a what-if run.

Besides what bad_inputs.py counts for every run, these runs count security escapes (a file of
the victim directory changed, appeared or went), data loss (an --output target that was a
device, FIFO or socket is something else afterwards; a file the run read was overwritten) and
leftovers (what-if run directories in the cache)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import hostile  # noqa: E402

V1 = "tplink_tl-wr902ac-v1"
REMOVED, ADDED = "libustream-mbedtls", "libustream-wolfssl"  # mbedtls -> wolfssl


@dataclass
class Run:
    """One invocation: ``setup`` before it, ``check`` after it returns problems, each
    starting "SECURITY", "DATA LOSS", "LEFTOVER" or "SIGNAL IGNORED". ``signal_after``:
    SIGTERM (or SIGKILL to the group) this many seconds in, or once a condition holds.
    ``reader``: a FIFO read while it runs."""

    argv: list[str]
    setup: Callable[[], None] = lambda: None
    check: Callable[[], list[str]] = lambda: []
    signal_after: tuple[float | Callable[[], bool], int] | None = None
    reader: Path | None = None


@dataclass
class Lab:
    """A stand-in ImageBuilder build of the TL-WR902AC v1 (Mbed TLS) and its packages."""

    bin_dir: Path
    packages: Path


def make_lab(top: Path) -> Lab:
    """As tests/firmware/test_whatif.py builds it (OpenWrt's tree and tools from ../shared)."""
    from openwrt_wolf.host import openwrt_tools, upstream
    from tests.standin import make_standin

    bin_dir = top / f"bin-{V1}-mbedtls"
    ib = top / "openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64"
    if not (top / ".done").is_file():
        top.mkdir(parents=True, exist_ok=True)
        print("preparing: a stand-in ImageBuilder build (1 to 3 min)", flush=True)
        ib = make_standin.make_tree(top, "ath79/generic", tree=upstream.openwrt_tree("25.12.5"),
                                    tools=openwrt_tools.ensure())  # fmt: skip
        subprocess.run(["make", "-C", str(ib), "image", f"PROFILE={V1}", f"BIN_DIR={bin_dir}"],
                       check=True, capture_output=True, timeout=900)  # fmt: skip
        (top / ".done").write_text("")
    return Lab(bin_dir, ib / "packages")


@dataclass
class Targets:
    """Output targets of each special kind, remade before each run that uses one."""

    w: Path
    kinds: dict[str, Callable[[Path], None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.kinds = {
            "char device": lambda p: os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3)),
            "block device": lambda p: os.mknod(p, stat.S_IFBLK | 0o666, os.makedev(240, 7)),
            "FIFO (no reader)": os.mkfifo,
            "FIFO (a reader)": os.mkfifo,
            "socket": lambda p: socket.socket(socket.AF_UNIX).bind(str(p)),
            "directory": lambda p: p.mkdir(),
        }

    def path(self, kind: str) -> Path:
        return self.w / "targets" / kind.split()[0].lower()

    def make(self, kind: str) -> Callable[[], None]:
        def setup() -> None:
            p = self.path(kind)
            p.parent.mkdir(exist_ok=True)
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                p.unlink()
            shutil.rmtree(p, ignore_errors=True)
            with contextlib.suppress(PermissionError):  # mknod without root: a plain file
                self.kinds[kind](p)

        return setup

    def kept(self, kind: str) -> Callable[[], list[str]]:
        want = {"char device": "c", "block device": "b", "FIFO (no reader)": "p",
                "FIFO (a reader)": "p", "socket": "s", "directory": "d"}[kind]  # fmt: skip

        def check() -> list[str]:
            p = self.path(kind)
            got = stat.filemode(p.lstat().st_mode)[0] if os.path.lexists(p) else "gone"
            return [] if got == want else [f"DATA LOSS: the {kind} --output became {got!r}"]

        return check


def _digest(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def _unchanged(paths: list[Path]) -> Callable[[], list[str]]:
    before = _digest(paths)

    def check() -> list[str]:
        now = _digest(paths)
        return [f"DATA LOSS: {k} was overwritten" for k in before if now.get(k) != before[k]]

    return check


def families(
    w: Path, lab: Lab, report_store: Path, victim: hostile.Victim
) -> list[tuple[str, list[Run]]]:
    cache = w / "cache"
    pk = w / "pk"
    shutil.copytree(lab.packages, pk)
    index = {p["name"]: p["file"] for p in json.loads((pk / "index.json").read_text())}
    originals = {n: (lab.packages / index[n]).read_bytes() for n in (REMOVED, ADDED)}
    out = w / "out.squashfs"
    whatif = ["what-if", "--from", str(lab.bin_dir), "--flavour", "wolfssl", "--packages", str(pk)]

    def restore() -> None:
        for name, data in originals.items():
            target = pk / index[name]
            if target.is_dir() and not target.is_symlink():
                target.rmdir()
            target.unlink(missing_ok=True)
            target.write_bytes(data)

    def with_case(role: str, case: hostile.Case) -> Callable[[], None]:
        def setup() -> None:
            restore()
            hostile.write(case, pk / index[role])
            out.unlink(missing_ok=True)

        return setup

    def no_run_dirs() -> list[str]:
        left = list((cache / "what-if").glob("run-*")) if (cache / "what-if").is_dir() else []
        return [f"LEFTOVER: {p}" for p in left]

    # 1. crafted packages: every case as the package that comes in; the cases that name
    # files (listing and removal) also as the one that goes
    cases = hostile.cases(victim.dir)
    listing = ("dotdot", "absolute", "hardlink", "bomb")
    archives = [
        Run([*whatif, "--output", str(out)], setup=with_case(role, c), check=no_run_dirs)
        for role in (ADDED, REMOVED)
        for c in cases
        if role == ADDED or c.family in listing
    ]

    # 2. special files where a package, the index or a manifest belongs
    def special(name: str, make: Callable[[Path], None]) -> Callable[[], None]:
        def setup() -> None:
            restore()
            target = pk / index[name]
            target.unlink()
            make(target)

        return setup

    fifo_manifest = w / "fifo-manifest"
    if not fifo_manifest.exists():
        shutil.copytree(lab.bin_dir, fifo_manifest)
        m = next(fifo_manifest.glob("*.manifest"))
        m.unlink()
        os.mkfifo(m)
    zero_manifest = w / "zero-manifest"
    if not zero_manifest.exists():
        shutil.copytree(lab.bin_dir, zero_manifest)
        m = next(zero_manifest.glob("*.manifest"))
        m.unlink()
        m.symlink_to("/dev/zero")
    specials = [
        Run(whatif, setup=special(role, make), check=no_run_dirs)
        for role in (ADDED, REMOVED)
        for make in (os.mkfifo, lambda p: p.symlink_to("/dev/zero"), lambda p: p.mkdir(),
                     lambda p: p.write_bytes(b""), lambda p: p.write_bytes(os.urandom(4096)))
    ]  # fmt: skip
    specials += [
        Run(["what-if", "--from", str(d), "--flavour", "wolfssl", "--packages", str(lab.packages)],
            setup=restore, check=no_run_dirs)
        for d in (fifo_manifest, zero_manifest)
    ]  # fmt: skip
    specials.append(Run(whatif, setup=special(ADDED, lambda p: p.symlink_to(p.name))))

    # 3. --output targets of each kind, for each task that writes one
    t = Targets(w)
    tasks = {
        "size-report": ["size-report", "--store", str(report_store), "--format", "html"],
        "history": ["history", "--store", str(report_store), "--device", "glinet_gl-ar300m16",
                    "--format", "csv"],
        "what-if": whatif,
    }  # fmt: skip

    def both(*steps: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            for step in steps:
                step()

        return run

    outputs = []
    for argv in tasks.values():
        for kind in t.kinds:
            reader = t.path(kind) if kind == "FIFO (a reader)" else None
            outputs.append(Run([*argv, "--output", str(t.path(kind))],
                               setup=both(restore, t.make(kind)), check=t.kept(kind),
                               reader=reader))  # fmt: skip
    store_copy = w / "store-copy"  # as for own-bin below: later families read the store
    shutil.copytree(report_store, store_copy)
    records = sorted(store_copy.rglob("*.json"))
    on_copy = {k: [str(store_copy) if a == str(report_store) else a for a in v]
               for k, v in tasks.items()}  # fmt: skip
    own_dir = w / "own-bin"  # a copy: the code under test may overwrite what it reads
    shutil.copytree(lab.bin_dir, own_dir)
    own = sorted(own_dir.iterdir())
    from_own = ["what-if", "--from", str(own_dir), *whatif[3:]]
    outputs += [
        Run([*on_copy["size-report"], "--output", str(records[0])], check=_unchanged(records)),
        Run([*on_copy["history"], "--output", str(records[-1])], check=_unchanged(records)),
        Run([*from_own, "--output", str(own[0])], setup=restore, check=_unchanged(own)),
        Run([*from_own, "--output", str(own[-1])], setup=restore, check=_unchanged(own)),
    ]

    # the temporary name the old what-if used, planted as a link to the victim
    def planted() -> None:
        restore()
        (w / "planted").mkdir(exist_ok=True)
        link = w / "planted" / ".root.squashfs.tmp"
        link.unlink(missing_ok=True)
        link.symlink_to(victim.dir / "f")

    outputs.append(Run([*whatif, "--output", str(w / "planted" / "root.squashfs")], setup=planted))

    # 4. signals: SIGTERM while an HTML report is made, at several points of it; SIGKILL of
    # what-if mid-run, then a run that must clear its directory
    html = w / "signals" / "report.html"

    def fresh_html() -> None:
        shutil.rmtree(html.parent, ignore_errors=True)
        html.parent.mkdir()

    def no_partial() -> list[str]:
        left = [p.name for p in html.parent.iterdir() if p.name != "report.html"]
        return [f"LEFTOVER: {n}" for n in left]

    def writing() -> bool:  # the report's temporary file is there
        return any(html.parent.glob(".report.html*"))

    seen: set[Path] = set()

    def working() -> bool:  # what-if has unpacked the image into a run directory of its own
        new = set((cache / "what-if").glob("run-*/root/etc")) - seen
        seen.update(new)
        return bool(new)

    sigs = [
        Run([*tasks["size-report"], "--output", str(html)], setup=fresh_html, check=no_partial,
            signal_after=(when, signal.SIGTERM))
        for when in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, writing)
    ]  # fmt: skip
    sigs += [Run(whatif, setup=restore, signal_after=(working, signal.SIGKILL))] * 2
    sigs.append(Run(whatif, setup=restore, check=no_run_dirs))
    return [
        ("what-if packages", archives),
        ("special inputs", specials),
        ("--output targets", outputs),
        ("signals", sigs),
    ]


def run_one(run: Run, env: dict[str, str], timeout: float) -> tuple[str, str, int | None]:
    """stderr, a note ("HUNG" or "SIGNAL IGNORED") and the exit status of one run."""
    run.setup()
    got: list[bytes] = []
    reader = None
    if run.reader is not None:
        fifo = run.reader
        reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
        reader.start()
    p = subprocess.Popen([sys.executable, "-m", "invoke", *run.argv], cwd=ROOT, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    note = ""
    sent = False
    try:
        if run.signal_after:
            when, sig = run.signal_after
            if callable(when):
                deadline = time.monotonic() + timeout
                while p.poll() is None and not when() and time.monotonic() < deadline:
                    time.sleep(0.02)
            else:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(when)
            if p.poll() is None:
                if sig == signal.SIGKILL:
                    os.killpg(p.pid, sig)
                else:
                    p.send_signal(sig)
                sent = True
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        return err, "HUNG", None
    finally:
        if reader is not None and run.reader is not None:  # unblock a reader nobody wrote to
            with contextlib.suppress(OSError):
                os.close(os.open(run.reader, os.O_WRONLY | os.O_NONBLOCK))
    if sent and run.signal_after and run.signal_after[1] == signal.SIGTERM and p.returncode == 0:
        note = "SIGNAL IGNORED"
    return err, note, p.returncode


def prepare_report_store(w: Path) -> Path:
    """tests/report/lab.py's store: builds of two releases, footprint, memory, perf records."""
    from tests.report import lab as report_lab

    base = w / "report-lab"
    base.mkdir()
    return report_lab.make(base).store
