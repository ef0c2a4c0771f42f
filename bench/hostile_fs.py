"""Hostile-input families for bench/bad_inputs.py whose oracle is the file system (issue 20):
crafted packages through `what-if` (every case of tests/hostile_archives.py, aimed at a victim
directory), special files where a package or manifest belongs, --output targets of each
special kind for size-report, history and what-if, and termination signals during a report
and a what-if run.

Besides what bad_inputs.py checks for every run, each probe's ``after`` finds: "security" (a
file of the victim directory changed, appeared or went), "data loss" (an --output target that
was a device, FIFO or socket is something else afterwards; a file the run read was
overwritten) and "leftover" (a what-if run directory in the cache, a temporary file)."""

from __future__ import annotations

import contextlib
import hashlib
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hostile import Finding, Probe  # noqa: E402  (bench/hostile.py)

from tests import hostile_archives as cases_kit  # noqa: E402

V1 = "tplink_tl-wr902ac-v1"
REMOVED, ADDED = "libustream-mbedtls", "libustream-wolfssl"  # mbedtls -> wolfssl


FAMILIES = ("what-if packages", "special inputs", "--output targets", "signals")
After = Callable[[], Finding | None]


@dataclass
class Lab:
    """A stand-in ImageBuilder build of the TL-WR902AC v1 (Mbed TLS) and its packages."""

    bin_dir: Path
    packages: Path


def make_lab(top: Path) -> Lab:
    """As tests/whatif/test_whatif.py builds it: the 25.12 stand-in ImageBuilder (OpenWrt's
    Makefile, apk, the kit's MIPS payloads; tree and tools from ../shared) and one image."""
    from openwrt_wolf.host import openwrt_tools, upstream
    from tests.standin import kit, make_standin

    bin_dir = top / f"bin-{V1}-mbedtls"
    ib = top / "openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64"
    if not (top / ".done").is_file():
        top.mkdir(parents=True, exist_ok=True)
        print("preparing: a stand-in ImageBuilder build (3 to 7 min; the kit cold 10-25)",
              flush=True)  # fmt: skip
        (top / "kit").mkdir(exist_ok=True)
        ib = make_standin.make_tree(top, "ath79/generic", tree=upstream.openwrt_tree("25.12.5"),
                                    tools=openwrt_tools.ensure(),
                                    kit=kit.make_kit(top / "kit"))  # fmt: skip
        subprocess.run(["make", "-C", str(ib), "image", f"PROFILE={V1}", f"BIN_DIR={bin_dir}"],
                       check=True, capture_output=True, timeout=1800)  # fmt: skip
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

    def kept(self, kind: str) -> After:
        want = {"char device": "c", "block device": "b", "FIFO (no reader)": "p",
                "FIFO (a reader)": "p", "socket": "s", "directory": "d"}[kind]  # fmt: skip

        def check() -> Finding | None:
            p = self.path(kind)
            got = stat.filemode(p.lstat().st_mode)[0] if os.path.lexists(p) else "gone"
            return None if got == want else ("data loss", f"the {kind} --output became {got!r}")

        return check


def _package(packages: Path, name: str) -> Path:
    """The file of a package, found by its plain name (its ABI name provides it)."""
    from openwrt_wolf.whatif import pkgsource

    pkg = pkgsource.load(packages).get(name)
    assert pkg is not None, name
    return pkg.file


def _digest(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def _unchanged(paths: list[Path]) -> After:
    before = _digest(paths)

    def check() -> Finding | None:
        now = _digest(paths)
        lost = [k for k in before if now.get(k) != before[k]]
        return ("data loss", f"{', '.join(lost)} overwritten") if lost else None

    return check


def _victim_and(victim: cases_kit.Victim, check: After | None) -> After:
    """The victim directory unchanged (restored for the next run when it is not), then
    ``check``."""

    def after() -> Finding | None:
        changed = victim.changes()
        if changed:
            victim.plant()
            return "security", f"victim files {', '.join(changed)} changed"
        return check() if check else None

    return after


def families(w: Path, lab_dir: Path) -> list[tuple[str, list[Probe]]]:
    """The families, on a stand-in ImageBuilder build in lab_dir (made when missing) and
    tests/report/lab.py's store; OpenWrt's tools are shared with the user's cache."""
    from openwrt_wolf import paths

    cache = w / "cache"
    cache.mkdir(exist_ok=True)
    for shared in ("openwrt-tools", "upstream"):  # built once, not per bench run
        if not (cache / shared).exists():
            (cache / shared).symlink_to(paths.cache_dir() / shared)
    lab = make_lab(lab_dir)
    report_store = prepare_report_store(w)
    victim = cases_kit.Victim(w / "v")
    victim.plant()
    # the build's packages as index.json + tar.gz (the format a crafted archive replaces) and,
    # for the special files, in the ImageBuilder's own (APK v3, read by apk)
    pk = cases_kit.tar_index(lab.packages, w / "pk")
    adb = w / "adb-pk"
    shutil.copytree(lab.packages, adb)
    index = {n: str(_package(pk, n).relative_to(pk)) for n in (REMOVED, ADDED)}
    adb_index = {n: str(_package(adb, n).relative_to(adb)) for n in (REMOVED, ADDED)}
    originals = {n: (pk / index[n]).read_bytes() for n in (REMOVED, ADDED)}
    adb_originals = {n: (adb / adb_index[n]).read_bytes() for n in (REMOVED, ADDED)}
    out = w / "out.squashfs"
    whatif = ["what-if", "--from", str(lab.bin_dir), "--flavour", "wolfssl", "--packages", str(pk)]

    def restore() -> None:
        for top, names, datas in ((pk, index, originals), (adb, adb_index, adb_originals)):
            for name, data in datas.items():
                target = top / names[name]
                if target.is_dir() and not target.is_symlink():
                    target.rmdir()
                target.unlink(missing_ok=True)
                target.write_bytes(data)

    def with_case(role: str, case: cases_kit.Case) -> Callable[[], None]:
        def setup() -> None:
            restore()
            cases_kit.write(case, pk / index[role])
            out.unlink(missing_ok=True)

        return setup

    def no_run_dirs() -> Finding | None:
        left = list((cache / "what-if").glob("run-*")) if (cache / "what-if").is_dir() else []
        return ("leftover", ", ".join(map(str, left))) if left else None

    def probe(argv: list[str], check: After | None = None, **kw: Any) -> Probe:
        return Probe(argv, after=_victim_and(victim, check), **kw)

    # 1. crafted packages: every case as the package that comes in; the cases that name
    # files (listing and removal) also as the one that goes
    cases = cases_kit.cases(victim.dir)
    listing = ("dotdot", "absolute", "hardlink", "bomb")
    archives = [
        probe([*whatif, "--output", str(out)], no_run_dirs, setup=with_case(role, c))
        for role in (ADDED, REMOVED)
        for c in cases
        if role == ADDED or c.family in listing
    ]

    # 2. special files where a package, the index or a manifest belongs
    def special(name: str, make: Callable[[Path], None], top: Path = pk) -> Callable[[], None]:
        def setup() -> None:
            restore()
            target = top / (index if top == pk else adb_index)[name]
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
    on_adb = ["what-if", "--from", str(lab.bin_dir), "--flavour", "wolfssl", "--packages", str(adb)]
    specials = [
        probe(argv, no_run_dirs, setup=special(role, make, top))
        for argv, top in ((whatif, pk), (on_adb, adb))
        for role in (ADDED, REMOVED)
        for make in (os.mkfifo, lambda p: p.symlink_to("/dev/zero"), lambda p: p.mkdir(),
                     lambda p: p.write_bytes(b""), lambda p: p.write_bytes(os.urandom(4096)))
    ]  # fmt: skip
    specials += [
        probe(["what-if", "--from", str(d), "--flavour", "wolfssl", "--packages",
               str(lab.packages)], no_run_dirs, setup=restore)
        for d in (fifo_manifest, zero_manifest)
    ]  # fmt: skip
    specials.append(probe(whatif, setup=special(ADDED, lambda p: p.symlink_to(p.name))))

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
            outputs.append(probe([*argv, "--output", str(t.path(kind))], t.kept(kind),
                                 setup=both(restore, t.make(kind)), reader=reader))  # fmt: skip
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
        probe([*on_copy["size-report"], "--output", str(records[0])], _unchanged(records)),
        probe([*on_copy["history"], "--output", str(records[-1])], _unchanged(records)),
        probe([*from_own, "--output", str(own[0])], _unchanged(own), setup=restore),
        probe([*from_own, "--output", str(own[-1])], _unchanged(own), setup=restore),
    ]

    # the temporary name the old what-if used, planted as a link to the victim
    def planted() -> None:
        restore()
        (w / "planted").mkdir(exist_ok=True)
        link = w / "planted" / ".root.squashfs.tmp"
        link.unlink(missing_ok=True)
        link.symlink_to(victim.dir / "f")

    outputs.append(
        probe([*whatif, "--output", str(w / "planted" / "root.squashfs")], setup=planted)
    )

    # 4. signals: SIGTERM while an HTML report is made, at several points of it; SIGKILL of
    # what-if mid-run, then a run that must clear its directory
    html = w / "signals" / "report.html"

    def fresh_html() -> None:
        shutil.rmtree(html.parent, ignore_errors=True)
        html.parent.mkdir()

    def no_partial() -> Finding | None:
        left = [p.name for p in html.parent.iterdir() if p.name != "report.html"]
        return ("leftover", ", ".join(left)) if left else None

    def writing() -> bool:  # the report's temporary file is there
        return any(html.parent.glob(".report.html*"))

    seen: set[Path] = set()

    def working() -> bool:  # what-if has unpacked the image into a run directory of its own
        new = set((cache / "what-if").glob("run-*/root/etc")) - seen
        seen.update(new)
        return bool(new)

    sigs = [
        probe([*tasks["size-report"], "--output", str(html)], no_partial, setup=fresh_html,
              signal=(when, signal.SIGTERM))
        for when in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, writing)
    ]  # fmt: skip
    sigs += [probe(whatif, setup=restore, signal=(working, signal.SIGKILL))] * 2
    sigs.append(probe(whatif, no_run_dirs, setup=restore))
    return [
        ("what-if packages", archives),
        ("special inputs", specials),
        ("--output targets", outputs),
        ("signals", sigs),
    ]


def run(
    probe: Probe, argv: list[str], env: dict[str, str], timeout: float
) -> tuple[subprocess.CompletedProcess[str] | None, int | None]:
    """The run (None when it hung; its process group is killed) and the signal sent to it
    while it ran (probe.signal), with a reader on probe.reader meanwhile."""
    if probe.reader is not None:
        fifo = probe.reader
        threading.Thread(target=fifo.read_bytes, daemon=True).start()
    p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, errors="replace",
                         stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    sent = None
    try:
        if probe.signal:
            when, sig = probe.signal
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
                sent = sig
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None, sent
    finally:
        if probe.reader is not None:  # a reader nobody wrote to is still waiting: release it
            with contextlib.suppress(OSError):
                os.close(os.open(probe.reader, os.O_WRONLY | os.O_NONBLOCK))
    return subprocess.CompletedProcess(argv, p.returncode, out, err), sent


def prepare_report_store(w: Path) -> Path:
    """tests/report/lab.py's store: builds of two releases, footprint, memory, perf records."""
    from tests.report import lab as report_lab

    base = w / "report-lab"
    base.mkdir()
    return report_lab.make(base).store
