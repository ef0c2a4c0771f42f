"""Hostile-input families for bench/bad_inputs.py (issue 32, part C): the environment the
project reads, `build --files` overlays on a stand-in ImageBuilder, two `--output` writers at
once, SIGKILL and SIGTERM while a report or a record is written, and option values (huge,
negative, NaN, other scripts' digits, control characters, 10,000 devices, long lists) across
the tasks.

Besides what bad_inputs.py checks for every run (a traceback, no error line, a hang, a secret
or a raw control character printed), each probe's oracles are: the victim directory beside
the inputs unchanged ("security"); no command run before a value that is checkable up front
was refused, and an error line of at most 2,000 characters ("wrong"); the run's peak RSS
(getrusage of the run, through this file's --run wrapper) under 512 MiB ("wrong"); the
output file one whole report and the old file intact after a signal ("data loss"); nothing
partial left beside it ("leftover"); for overlays that build, the image (Debian's unsquashfs)
holding the overlay's files and a build with another overlay being built, not served from
the cache ("wrong").

    python bench/hostile_env.py --run [--venv] [--rss FILE] -- python -m invoke TASK ...

runs one probe as `invoke` (--venv: .venv's own `invoke`, cli.main, which reads invoke's
configuration files as untrusted; `python -m invoke` is invoke's program) and writes its
peak RSS in KiB to FILE."""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hostile import NO_DAC, Finding, Probe, fails, unreadable_ok  # noqa: E402

from tests import hostile_archives as cases_kit  # noqa: E402

FAMILIES = ("environment", "--files overlays", "concurrent --output", "signals mid-write",
            "option values")  # fmt: skip
PEAK_RSS = 512 << 10  # KiB
LONGEST_ERROR = 2000
V1 = "tplink_tl-wr902ac-v1"
After = Callable[[], Finding | None]
Check = Callable[[subprocess.CompletedProcess[str]], Finding | None]


# --- the --run wrapper: .venv's invoke, and the run's peak RSS ----------------------------


def wrapper_main(argv: list[str]) -> int:
    venv = "--venv" in argv
    rss = argv[argv.index("--rss") + 1] if "--rss" in argv else None
    cmd = argv[argv.index("--") + 1 :]
    if venv:  # python -m invoke ... -> .venv/bin/invoke ...
        cmd = [str(ROOT / ".venv" / "bin" / "invoke"), *cmd[3:]]
    child = subprocess.Popen(cmd)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    rc = child.wait()
    if rss:
        Path(rss).write_text(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
    if rc < 0:  # ended by a signal: end the same way, so the runner sees what a shell sees
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    return rc


class Runs:
    """Probes through the wrapper, each with its own RSS file."""

    def __init__(self, w: Path) -> None:
        self.dir = w / "rss"
        self.dir.mkdir(exist_ok=True)
        self.n = 0

    def prefix(self, *, venv: bool = False, no_dac: bool = False) -> tuple[list[str], Path]:
        self.n += 1
        f = self.dir / f"{self.n}.kib"
        run = [sys.executable, str(Path(__file__)), "--run", "--rss", str(f)]
        return [*(NO_DAC if no_dac else []), *run, *(["--venv"] if venv else []), "--"], f


def _rss_ok(f: Path) -> Finding | None:
    with contextlib.suppress(OSError, ValueError):
        kib = int(f.read_text())
        if kib > PEAK_RSS:
            return "wrong", f"peak RSS {kib >> 10} MiB, more than {PEAK_RSS >> 10} MiB"
    return None


def refused_early(p: subprocess.CompletedProcess[str]) -> Finding | None:
    """Refused (exit status not 0), before any command ran, in one line of sane length."""
    if got := fails(p):
        return got
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    ran = [ln for ln in p.stderr.splitlines() if ln.startswith("$ ")]
    if errors and ran:
        return "wrong", f"refused after running a command: {ran[0][:100]}"
    if errors and len(errors[0]) > LONGEST_ERROR:
        return "wrong", f"an error line of {len(errors[0]):,} characters"
    return None


def no_traceback_ok(p: subprocess.CompletedProcess[str]) -> Finding | None:
    """A run that must work (exit 0)."""
    return None if p.returncode == 0 else ("wrong", f"exit {p.returncode}: {p.stderr[-200:]!r}")


def both(*checks: After | None) -> After:
    def run() -> Finding | None:
        for c in checks:
            if c is not None and (got := c()):
                return got
        return None

    return run


def probe(
    runs: Runs,
    argv: list[str],
    check: Check | None = None,
    after: After | None = None,
    *,
    venv: bool = False,
    no_dac: bool = False,
    **kw: Any,
) -> Probe:
    pre, f = runs.prefix(venv=venv, no_dac=no_dac)
    return Probe(argv, check=check, prefix=pre, after=both(after, lambda: _rss_ok(f)), **kw)


# --- shared inputs -------------------------------------------------------------------------


def _special(p: Path, kind: str) -> Path:
    """Make ``p`` a file, FIFO, link to /dev/full, ... (fresh each time)."""
    if p.is_symlink() or p.is_file() or p.is_fifo() or p.is_socket():
        p.unlink()
    elif p.is_dir():
        shutil.rmtree(p)
    if kind == "file":
        p.write_text("")
    elif kind == "FIFO":
        os.mkfifo(p)
    elif kind == "link to /dev/full":
        p.symlink_to("/dev/full")
    elif kind == "socket":
        socket.socket(socket.AF_UNIX).bind(str(p))
    elif kind == "directory":
        p.mkdir()
    return p


def _toy_library(w: Path) -> Path:
    """A shared library for wolfssl-symbols (a task that files a record and ends)."""
    lib = w / "toy" / "libwolfssl.so"
    if not lib.exists():
        lib.parent.mkdir(exist_ok=True)
        (lib.parent / "toy.c").write_text("int wolfSSL_new(void) { return 1; }\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(lib.parent / "toy.c")],
                       check=True, timeout=120)  # fmt: skip
    return lib


def _failing_ib(w: Path) -> Path:
    """An ImageBuilder whose `make info` fails at once: build-config --imagebuilder logs it
    into the cache first, so it is a task that writes to the cache and ends."""
    ib = w / "failing-ib"
    ib.mkdir(exist_ok=True)
    (ib / "Makefile").write_text("info:\n\t@exit 3\n")
    return ib


# --- 1. the environment --------------------------------------------------------------------


def _linked_dir(link: Path, target: Path) -> Callable[[], None]:
    """A setup: ``link`` a symlink to the empty folder ``target``."""

    def setup() -> None:
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        link.symlink_to(target)

    return setup


def _unwritable(runs: Runs, ro: Path, task: list[str], var: str, below: str) -> list[Probe]:
    """``$var`` a folder (or one below it) we may not write: root without CAP_DAC_OVERRIDE."""
    if not unreadable_ok():
        return []
    ro.mkdir(exist_ok=True)
    ro.chmod(0o555)
    at = ro / below if below else ro
    return [probe(runs, task, refused_early, no_dac=True, env={var: str(at)})]


def environment_family(w: Path, runs: Runs) -> list[Probe]:
    secret = (w / "secret").read_text().strip()
    env_dir = w / "env"
    env_dir.mkdir(exist_ok=True)
    ib = _failing_ib(w)
    cache_task = ["build-config", "-f", "wolfssl", "-d", "tl-wr902ac", "--imagebuilder", str(ib)]
    lib = _toy_library(w)
    out: list[Probe] = []

    def at(kind: str, name: str) -> tuple[Path, Callable[[], None]]:
        p = env_dir / name.replace(" ", "-").replace("/", "")
        return p, lambda: (_special(p, kind), None)[1]

    kinds = ("file", "FIFO", "link to /dev/full", "socket")
    # terminal variables: every task checks them first
    for var, values in (
        ("COLUMNS", ["abc", "0", "-5", "9" * 40, "١٢٠", "1e3", "100001", "12 0"]),
        ("OPENWRT_WOLF_PROGRESS_EVERY", ["abc", "nan", "inf", "-1", "0", "1e300", "٣٠", "1_0"]),
    ):
        out += [probe(runs, ["devices"], refused_early, env={var: v}) for v in values]
    out.append(probe(runs, ["devices"], no_traceback_ok, env={"PYTHONIOENCODING": "ascii"}))
    out.append(probe(runs, ["devices"], no_traceback_ok, env={"PYTHONIOENCODING": "latin-1"}))
    out.append(probe(runs, ["devices"], no_traceback_ok, venv=True,
                     env={"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0"}))  # fmt: skip
    # the cache: a task that writes there at once
    for kind in kinds:
        p, setup = at(kind, f"cache-{kind}")
        out.append(probe(runs, cache_task, refused_early, env={"OPENWRT_WOLF_CACHE": str(p)},
                         setup=setup))  # fmt: skip
    for value in ("/dev/full", "~nosuchuser/cache", str(w / "secret" / "cache")):
        out.append(probe(runs, cache_task, refused_early, env={"OPENWRT_WOLF_CACHE": value}))
    target = env_dir / "cache-target"
    link = env_dir / "cache-link"
    linked = _linked_dir(link, target)

    def used() -> Finding | None:  # the link's directory holds the log; the link stays one
        if not link.is_symlink() or not (target / "make-info.log").is_file():
            return "wrong", "the cache behind a link was not used"
        return None

    out.append(probe(runs, cache_task, fails, used, setup=linked,
                     env={"OPENWRT_WOLF_CACHE": str(link)}))  # fmt: skip
    out += _unwritable(runs, env_dir / "cache-ro", cache_task, "OPENWRT_WOLF_CACHE", "c")
    # $XDG_CACHE_HOME and $HOME (the cache's default); a relative one would be under the
    # current directory, the project here: nothing may appear there
    home = env_dir / "home"
    home.mkdir(exist_ok=True)
    no_cache = {"OPENWRT_WOLF_CACHE": "", "HOME": str(home)}
    before = set(os.listdir(ROOT))

    def nothing_in_the_project() -> Finding | None:
        new = set(os.listdir(ROOT)) - before
        return ("security", f"made {sorted(new)} in the project's directory") if new else None

    for xdg in ("relative/xdg", str(w / "secret")):
        out.append(probe(runs, cache_task, None, nothing_in_the_project,
                         env={**no_cache, "XDG_CACHE_HOME": xdg}))  # fmt: skip
    for h in ("", "relative/home", str(w / "secret"), "~nosuchuser"):
        for venv in (False, True):
            if h == str(w / "secret") and not venv:
                continue  # invoke's own program: its config loader is not ours
            out.append(probe(runs, cache_task, refused_early, nothing_in_the_project, venv=venv,
                             env={**no_cache, "XDG_CACHE_HOME": "", "HOME": h}))  # fmt: skip
    for kind in ("FIFO", "directory", "bad YAML", "link to /dev/full"):
        hd = env_dir / f"home-{kind.replace(' ', '-').replace('/', '')}"
        hd.mkdir(exist_ok=True)

        def conf(hd: Path = hd, kind: str = kind) -> None:
            c = hd / ".invoke.yaml"
            if kind == "bad YAML":
                _special(c, "file").write_text("a: [\n")
            else:
                _special(c, kind)

        out.append(probe(runs, ["devices"], refused_early, venv=True, setup=conf,
                         env={"HOME": str(hd)}))  # fmt: skip
    # the store: read (size-report) and written (wolfssl-symbols files a record)
    writer = ["wolfssl-symbols", "--lib", str(lib)]
    for kind in kinds:
        p, setup = at(kind, f"store-{kind}")
        for task in (["size-report"], writer):
            out.append(probe(runs, task, refused_early, setup=setup,
                             env={"OPENWRT_WOLF_STORE": str(p)}))  # fmt: skip
    for value in ("/dev/full", "~nosuchuser/results", str(w / "secret" / "results")):
        for task in (["size-report"], writer):
            out.append(probe(runs, task, refused_early, env={"OPENWRT_WOLF_STORE": value}))
    st_target, st_link = env_dir / "store-target", env_dir / "store-link"
    store_linked = _linked_dir(st_link, st_target)

    def filed() -> Finding | None:
        got = list(st_target.glob("wolfssl-symbols/*.json"))
        return None if st_link.is_symlink() and got else ("wrong", "no record behind the link")

    out.append(probe(runs, writer, None, filed, setup=store_linked,
                     env={"OPENWRT_WOLF_STORE": str(st_link)}))  # fmt: skip
    out += _unwritable(runs, env_dir / "store-ro", writer, "OPENWRT_WOLF_STORE", "")
    # make phase timeouts, with an ImageBuilder whose make info never ends
    hung = ["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--imagebuilder",
            str(w / "hung-ib")]  # fmt: skip
    for v in ("abc", "nan", "-1", "0", "1e400", "inf"):
        out.append(probe(runs, hung, fails, env={"OPENWRT_WOLF_TIMEOUT_INFO": v}))
    # upstream sources: mirror directories, URLs, the shared folder, an OpenWrt tree
    empty_shared = env_dir / "no-shared"
    (empty_shared / "openwrt").mkdir(parents=True, exist_ok=True)
    fetch = ["sources", "--fetch", "json-c"]
    for kind in kinds:
        p, setup = at(kind, f"sources-{kind}")
        out.append(probe(runs, fetch, fails, setup=setup,
                         env={"OPENWRT_WOLF_SOURCES": str(p),
                              "OPENWRT_WOLF_SHARED": str(empty_shared)}))  # fmt: skip
        p2, setup2 = at(kind, f"shared-{kind}")
        out.append(probe(runs, fetch, fails, setup=setup2, env={"OPENWRT_WOLF_SHARED": str(p2)}))
    for v in ("~nosuchuser/dl", "/dev/zero", f"{w}/a:{w}/b::"):
        out.append(
            probe(
                runs,
                fetch,
                fails,
                env={"OPENWRT_WOLF_SOURCES": v, "OPENWRT_WOLF_SHARED": str(empty_shared)},
            )
        )
    out.append(probe(runs, fetch, fails, env={"OPENWRT_WOLF_SHARED": "~nosuchuser"}))
    for v in (
        "not a url",
        f"http://u:{secret}@127.0.0.1:9",
        "http://127.0.0.1:9/\nAFTER",
        f"http://u:pa ss{secret}@127.0.0.1:9/",
        "ftp://127.0.0.1:9/",
    ):
        out.append(probe(runs, fetch, fails, secrets=(secret,),
                         env={"OPENWRT_WOLF_SOURCES_URL": v,
                              "OPENWRT_WOLF_SHARED": str(empty_shared)}))  # fmt: skip
    tools = ["openwrt-tools"]  # an empty cache: it needs the tree
    for kind in kinds:
        p, setup = at(kind, f"tree-{kind}")
        out.append(
            probe(
                runs,
                tools,
                fails,
                setup=setup,
                env={"OPENWRT_TREE": str(p), "OPENWRT_WOLF_CACHE": str(w / "c-tree")},
            )
        )
    out.append(
        probe(
            runs,
            tools,
            fails,
            env={"OPENWRT_TREE": "~nosuchuser/openwrt", "OPENWRT_WOLF_CACHE": str(w / "c-tree")},
        )
    )
    # secrets in variables
    for q in (
        f"redis://:{secret}\n@127.0.0.1:9/0",
        f"redis://u:a {secret}@127.0.0.1:9/0",
        f"redis://127.0.0.1:9/0\n{secret}",
    ):
        out.append(probe(runs, ["worker", "--burst", "--queue", "env"], fails,
                         secrets=(secret,), env={"OPENWRT_WOLF_QUEUE": q}))  # fmt: skip
    for task in (
        ["flash", "--device", "tl-wr902ac", "--host", "127.0.0.1", "--port", "9", "--password",
         "--image", str(w / "rnd")],
        ["measure-memory", "--host", "127.0.0.1", "--port", "9", "--password"],
    ):  # fmt: skip
        out.append(probe(runs, task, fails, secrets=(secret,),
                         env={"OPENWRT_WOLF_ROUTER_PASSWORD": secret}))  # fmt: skip
    # PATH: no tools at all
    out.append(probe(runs, ["hosttools"], None, env={"PATH": ""}))
    out.append(probe(runs, cache_task, fails, env={"PATH": ""}))
    return out


# --- 2. build --files overlays on the stand-in ImageBuilder ---------------------------------


def _image_files(store: Path) -> list[str] | None:
    """The files of the rootfs the store's newest build record names (Debian's unsquashfs)."""
    recs = sorted(store.glob("build/*.json"), key=lambda p: p.stat().st_mtime)
    if not recs:
        return None
    rec = json.loads(recs[-1].read_text())
    rootfs = [a["path"] for a in rec["data"]["artifacts"] if a["type"] == "rootfs"]
    if not rootfs:
        return None
    got = subprocess.run(["unsquashfs", "-lls", rootfs[0]], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    return got.stdout.splitlines()


def files_family(w: Path, lab_dir: Path, runs: Runs) -> list[Probe]:
    import hostile_fs

    lab = hostile_fs.make_lab(lab_dir)
    ib = lab.packages.parent
    victim = cases_kit.Victim(w / "overlay-victim")
    victim.plant()
    top = w / "overlays"
    top.mkdir(exist_ok=True)
    sentinel = w / "sentinels" / "overlay"
    secret = w / "secret"

    def build(files: Path | str, store: Path) -> list[str]:
        return ["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--imagebuilder",
                str(ib), "--files", str(files), "--store", str(store)]  # fmt: skip

    def overlay(name: str, make: Callable[[Path], None]) -> tuple[Path, Callable[[], None]]:
        d = top / re.sub(r"[^A-Za-z0-9]+", "-", name)  # FILES= is one word for make

        def setup() -> None:
            # rm -rf: shutil.rmtree recurses, and one overlay is 1,100 folders deep
            subprocess.run(["rm", "-rf", str(d)], check=True, timeout=300)
            (d / "etc").mkdir(parents=True)
            (d / "etc" / "wolf-banner").write_text("hello\n")
            make(d)

        return d, setup

    def unchanged() -> Finding | None:
        changed = victim.changes()
        if changed:
            victim.plant()
            return "security", f"victim files {', '.join(changed)} changed"
        return None

    def in_image(store: Path, *names: str) -> After:
        def check() -> Finding | None:
            listing = _image_files(store)
            if listing is None:
                return "wrong", "no build record with a rootfs"
            text = "\n".join(listing)
            missing = [n for n in names if f"squashfs-root{n}" not in text]
            if missing:
                return "wrong", f"the image lacks the overlay's {', '.join(missing)}"
            if secret.read_text().strip() in text:
                return "security", "a secret's text in the image listing"
            return None

        return check

    out: list[Probe] = []
    n = 0

    def case(name: str, make: Callable[[Path], None], works: bool, *names: str,
             no_dac: bool = False) -> None:  # fmt: skip
        nonlocal n
        n += 1
        d, setup = overlay(name, make)
        store = w / "overlay-stores" / str(n)
        check = no_traceback_ok if works else refused_early
        after = both(
            unchanged,
            in_image(store, "/etc/wolf-banner", *names) if works else None,
            lambda: ("security", "code in a file name ran")
            if sentinel.exists() or any((p / "wolf-sentinel-overlay").exists()
                                        for p in (ROOT, ib, ib / "build_dir")) else None,
        )  # fmt: skip
        out.append(probe(runs, build(d, store), check, after, setup=setup, no_dac=no_dac))

    v = victim.dir
    case("plain", lambda d: None, True)
    case("link inside", lambda d: (d / "etc" / "l").symlink_to("wolf-banner"), True, "/etc/l")
    case(
        "link inside, up and down",
        lambda d: (d / "etc" / "tz").symlink_to("../usr/share/zoneinfo/UTC"),
        True,
        "/etc/tz",
    )
    case("dangling link inside", lambda d: (d / "etc" / "x").symlink_to("nowhere"), True)
    case("link out, absolute", lambda d: (d / "etc" / "rc.d").symlink_to(v), False)
    case(
        "link out, climbing",
        lambda d: (d / "etc" / "rc.d").symlink_to("../" * 12 + str(v)[1:]),
        False,
    )
    case("link out to a file", lambda d: (d / "etc" / "passwd").symlink_to(v / "f"), False)
    case(
        "link out via a link inside",
        lambda d: ((d / "etc" / "a").symlink_to("b"), (d / "etc" / "b").symlink_to(v)),
        False,
    )
    case("top folder a link out", lambda d: (d / "usr").symlink_to("/usr"), False)
    case("a link named ..", lambda d: (d / "etc" / "up").symlink_to(".." + "/.." * 10), False)

    def hardlink(d: Path) -> None:
        with contextlib.suppress(OSError):  # same file system: a hard link to outside
            os.link(v / "f", d / "etc" / "hard")

    case("hard link to a file outside", hardlink, True)
    case("FIFO", lambda d: os.mkfifo(d / "etc" / "group"), False)
    case("socket", lambda d: socket.socket(socket.AF_UNIX).bind(str(d / "etc" / "s")), False)
    for dev, (major, minor) in (("char device", (1, 3)), ("block device", (240, 7))):
        mode = stat.S_IFCHR if dev == "char device" else stat.S_IFBLK

        def mknod(d: Path, mode: int = mode, major: int = major, minor: int = minor) -> None:
            with contextlib.suppress(PermissionError):  # without root: no device, a FIFO
                os.mknod(d / "etc" / "dev", mode | 0o666, os.makedev(major, minor))
                return
            os.mkfifo(d / "etc" / "dev")

        case(dev, mknod, False)

    def sparse(d: Path) -> None:
        with (d / "etc" / "big").open("wb") as fh:
            fh.truncate(20 << 30)

    case("20 GB sparse file", sparse, False)

    def many(d: Path) -> None:
        (d / "many").mkdir()
        for i in range(100_001):
            (d / "many" / str(i)).touch()

    case("100,001 files", many, False)

    def deep(d: Path) -> None:
        p = d
        for _ in range(1100):  # deeper than Python's recursion limit; each name short
            p = p / "d"
            with contextlib.suppress(OSError):
                p.mkdir()
        (p / "f").touch() if p.exists() else None

    n_deep = len(out)
    case("1,100 levels deep", deep, True)
    deep_probe = out[n_deep]
    deep_after = deep_probe.after

    def deep_gone() -> Finding | None:  # shutil.rmtree (the bench's cleanup) recurses
        got = deep_after() if deep_after else None
        subprocess.run(["rm", "-rf", str(top / "1-100-levels-deep")], check=True, timeout=300)
        return got

    deep_probe.after = deep_gone
    # a name the ImageBuilder's `find | while read FILE` loop and cp see: nothing of it runs
    # (the sentinel would be made in the directory make runs in, the ImageBuilder's)
    marker = "wolf-sentinel-overlay"
    case(
        "names with control characters",
        lambda d: (d / "etc" / f"x\x1b[2J\n$(touch {marker})`touch {marker}`").write_text("x"),
        True,
    )
    if unreadable_ok():

        def unreadable(d: Path) -> None:
            (d / "etc" / "secret").write_text("x")
            (d / "etc" / "secret").chmod(0)

        case("an unreadable file", unreadable, False, no_dac=True)
    # --files that is no directory, or a link to one
    for kind in ("file", "FIFO", "link to /dev/full", "socket"):
        p = top / f"files-{kind.replace(' ', '-').replace('/', '')}"
        out.append(
            probe(
                runs,
                build(p, w / "overlay-stores" / "x"),
                refused_early,
                unchanged,
                setup=lambda p=p, kind=kind: (_special(p, kind), None)[1],
            )
        )
    for value in ("/dev/zero", "/nonexistent", "~nosuchuser/files"):
        out.append(probe(runs, build(value, w / "overlay-stores" / "x"), refused_early))
    good, setup_good = overlay("behind a link", lambda d: None)
    link = top / "files-link"

    def linked() -> None:
        setup_good()
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        link.symlink_to(good)

    s = w / "overlay-stores" / "link"
    out.append(probe(runs, build(link, s), no_traceback_ok,
                     in_image(s, "/etc/wolf-banner"), setup=linked))  # fmt: skip
    # two overlays one after the other: the second is built, with its own files
    for name, other in (("overlay-a", "/etc/only-b"), ("overlay-b", "/etc/only-a")):
        mine = "/etc/only-" + name[-1]
        d, setup = overlay(name, lambda d, mine=mine: (d / mine[1:]).write_text(mine))
        s = w / "overlay-stores" / name

        def own(s: Path = s, mine: str = mine, other: str = other) -> Finding | None:
            listing = "\n".join(_image_files(s) or [])
            if f"squashfs-root{mine}" not in listing or f"squashfs-root{other}" in listing:
                return "wrong", f"the image is not the one of its overlay ({mine})"
            return None

        out.append(probe(runs, build(d, s), no_traceback_ok, own, setup=setup))
    return out


# --- 3. two --output writers at once --------------------------------------------------------


def _whole(path: Path, fmt: str, reference: bytes) -> Finding | None:
    if not path.is_file():
        return "data loss", f"{path} is not a file after the runs"
    # the report's time of making (to the second) is the one thing two runs may differ in
    stamp = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    data, reference = stamp.sub(b"<time>", path.read_bytes()), stamp.sub(b"<time>", reference)
    if data != reference:
        pairs = enumerate(zip(data, reference, strict=False))
        at = next((i for i, (x, y) in pairs if x != y), len(data))
        return "data loss", (f"{path}: {len(data):,} bytes, not the report "
                             f"({len(reference):,}): at {at}: {data[at - 60 : at + 30]!r} "
                             f"{reference[at - 60 : at + 30]!r}")  # fmt: skip
    if fmt == "json":
        json.loads(data)
    return None


def _no_temporary(d: Path, keep: set[str]) -> Finding | None:
    left = sorted(p.name for p in d.iterdir() if p.name not in keep)
    return ("leftover", ", ".join(left)) if left else None


def concurrent_family(w: Path, store: Path, env: dict[str, str], runs: Runs) -> list[Probe]:
    out: list[Probe] = []
    d = w / "concurrent"
    d.mkdir(exist_ok=True)
    tasks = {
        "html": ["size-report", "--store", str(store), "--format", "html"],
        "json": ["size-report", "--store", str(store), "--format", "json"],
        "markdown": ["size-report", "--store", str(store), "--format", "markdown"],
        "csv": ["history", "--store", str(store), "--device", "glinet_gl-ar300m16",
                "--format", "csv"],
    }  # fmt: skip
    for fmt, argv in tasks.items():
        ref = d / f"ref.{fmt}"
        subprocess.run([sys.executable, "-m", "invoke", *argv, "--output", str(ref)], cwd=ROOT,
                       env=env, check=True, capture_output=True, timeout=300)  # fmt: skip
        reference = ref.read_bytes()
        for writers in (2, 3):
            for old in (False, True):
                target = d / f"out-{fmt}-{writers}-{int(old)}"
                others: list[subprocess.Popen[bytes]] = []

                def setup(target: Path = target, argv: list[str] = argv, writers: int = writers,
                          old: bool = old, others: list[Any] = others) -> None:  # fmt: skip
                    with contextlib.suppress(FileNotFoundError):
                        target.unlink()
                    if old:
                        target.write_bytes(b"OLD REPORT\n")
                    others[:] = [
                        subprocess.Popen([sys.executable, "-m", "invoke", *argv, "--output",
                                          str(target)], cwd=ROOT, env=env,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                        for _ in range(writers - 1)
                    ]  # fmt: skip

                def after(target: Path = target, fmt: str = fmt, reference: bytes = reference,
                          others: list[Any] = others) -> Finding | None:  # fmt: skip
                    for o in others:
                        _out, err = o.communicate(timeout=300)
                        if o.returncode != 0 or b"Traceback" in err:
                            return "wrong", f"a second writer: exit {o.returncode}: {err[-200:]!r}"
                    keep = {p.name for p in d.iterdir() if not p.name.startswith(".")}
                    return _whole(target, fmt, reference) or _no_temporary(d, keep)

                out.append(probe(runs, [*argv, "--output", str(target)], no_traceback_ok,
                                 after, setup=setup))  # fmt: skip
    return out


# --- 4. SIGKILL and SIGTERM while a report or a record is written ---------------------------


def signals_family(w: Path, store: Path, runs: Runs) -> list[Probe]:
    d = w / "mid-write" / "report"
    d.mkdir(parents=True, exist_ok=True)
    html = d / "report.html"
    old = b"<!-- the old report -->\n"
    report = ["size-report", "--store", str(store), "--format", "html", "--output", str(html)]

    def planted() -> None:
        for p in d.iterdir():
            p.unlink()
        html.write_bytes(old)

    def writing() -> bool:
        return any(p.name.startswith(".report.html") for p in d.iterdir())

    def intact() -> Finding | None:
        if not html.is_file():
            return "data loss", "the old report is gone"
        data = html.read_bytes()
        if data != old and not data.rstrip().endswith(b"</html>"):
            return "data loss", f"the report is cut: {len(data):,} bytes"
        return _no_temporary(d, {"report.html"})

    out = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for when in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, writing, writing):
            out.append(Probe(report, after=intact, setup=planted, signal=(when, sig)))
    # a record: wolfssl-symbols files one (its key is the library's sha256); the old record
    # of the same key is kept in .history and the new one replaces it, whole
    lib = _toy_library(w)
    rs = w / "mid-write" / "records"
    kind_dir = rs / "wolfssl-symbols"
    first = subprocess.run([sys.executable, "-m", "invoke", "wolfssl-symbols", "--lib", str(lib),
                            "--store", str(rs)], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)  # fmt: skip
    (rec,) = kind_dir.glob("*.json")
    old_rec = rec.read_bytes()

    def record_planted() -> None:
        shutil.rmtree(rs)
        kind_dir.mkdir(parents=True)
        rec.write_bytes(old_rec)

    def record_writing() -> bool:
        return any(p.name.startswith(".") and p.name.endswith(".tmp")
                   for p in kind_dir.iterdir())  # fmt: skip

    def record_intact() -> Finding | None:
        try:
            json.loads(rec.read_bytes())
        except (OSError, ValueError) as e:
            return "data loss", f"the record does not read: {e}"
        return _no_temporary(kind_dir, {rec.name, ".history"})

    assert first.returncode in (0, 1), first.stderr
    task = ["wolfssl-symbols", "--lib", str(lib), "--store", str(rs)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for when in (0.3, 0.6, 0.9, 1.2, record_writing, record_writing):
            out.append(Probe(task, after=record_intact, setup=record_planted, signal=(when, sig)))
    return out


# --- 5. option values across the tasks ------------------------------------------------------

HUGE = "9" * 40
NUMBERS = ["abc", "-1", "0", "65536", "100000", HUGE, "1" + "0" * 400, "nan", "inf", "-inf",
           "1e400", "٣", "1_0", "0x10", "\x1b[2J", "1\n2"]  # fmt: skip
NAMES = ["wolfѕsl", "x\x1b]0;owned\x07", "", " ", "a" * 100_000, "../../x", "$(touch {s})",
         "x\ny", "-x", "all,"]  # fmt: skip


def options_family(w: Path, runs: Runs) -> list[Probe]:
    sentinel = w / "sentinels" / "options"
    names = [n.format(s=sentinel) for n in NAMES]
    rnd = str(w / "rnd")
    ten_k_devices = ",".join(f"nosuch-{i}" for i in range(10_000))
    ten_k_packages = ",".join(f"pkg{i}" for i in range(10_000))
    b = ["build", "--no-report"]
    fd = ["-f", "mbedtls", "-d", "tl-wr902ac"]
    numeric = [
        [*b, *fd, "-j"],
        [*b, *fd, "--queue", "redis://127.0.0.1:9/0", "--retries"],
        [*b, *fd, "--queue", "redis://127.0.0.1:9/0", "--worker-timeout"],
        ["size-report", "--packages"],
        ["measure-memory", "--boots"],
        ["measure-memory", "--idle"],
        ["measure-memory", "--memory"],
        ["measure-memory", "--wait-up"],
        ["measure-memory", "--host", "127.0.0.1", "--port"],
        ["flash", "--device", "tl-wr902ac", "--host", "127.0.0.1", "--image", rnd, "--port"],
        ["flash", "--device", "tl-wr902ac", "--host", "127.0.0.1", "--image", rnd, "--wait-up"],
        ["worker", "--burst", "--queue", "redis://127.0.0.1:9/0", "--heartbeat"],
        ["tls-conformance", "--case", "nosuch", "--jobs"],
        ["vm", "--image", rnd, "--memory"],
        ["perf", "--target", "router", "--host", "127.0.0.1", "--port"],
        ["bench-size", "--size-mb"],
        ["bench-size", "--repeat"],
    ]
    named = [
        [*b, "-d", "tl-wr902ac", "-f"],
        [*b, "-f", "mbedtls", "-d"],
        [*b, *fd, "--release"],
        [*b, *fd, "--backend"],
        [*b, *fd, "--packages"],
        ["build-config", *fd, "--what"],
        ["size-report", "--format"],
        ["size-report", "--sort"],
        ["size-report", "--fail-on"],
        ["size-report", "--release"],
        ["history", "--device"],
        ["fit", "--image", rnd, "--device"],
        ["devices", "--release"],
        ["devices", "--target"],
        ["hosttools", "--group"],
        ["footprint", "--arch"],
        ["footprint", "--library"],
        ["footprint", "--config"],
        ["footprint", "--version"],
        ["footprint", "--component"],
        ["perf", "--target"],
        ["perf", "--target", "qemu", "--test"],
        ["perf", "--target", "qemu", "--clock"],
        ["perf", "--target", "qemu", "--flavour"],
        ["perf", "--target", "qemu", "--wolfssl-config"],
        ["tls-conformance", "--case"],
        ["tls-conformance", "--flavour"],
        ["sources", "--fetch"],
        ["sources", "--tree", str(w / "dir"), "--allow"],
        ["patch", "--tree", str(w / "dir"), "--release"],
        ["worker", "--burst", "--queue", "redis://127.0.0.1:9/0", "--name"],
    ]
    valid = {("bench-size", "0")}  # any size: the benchmark runs, exit 0
    out = [probe(runs, [*argv, v], refused_early, sentinel=sentinel)
           for argv in numeric for v in NUMBERS if (argv[0], v) not in valid]  # fmt: skip
    out += [probe(runs, [*argv, v], refused_early, sentinel=sentinel)
            for argv in named for v in names]  # fmt: skip
    out += [
        probe(runs, [*b, "-f", "mbedtls", "-d", ten_k_devices], refused_early),
        probe(runs, [*b, *fd, "--packages", ten_k_packages], refused_early),
        probe(runs, [*b, "-f", ",".join(["mbedtls"] * 10_000), "-d", ten_k_devices],
              refused_early),
        probe(runs, ["size-report", "--device", ten_k_devices], refused_early),
        probe(runs, ["size-report", "--fail-on", ",".join(["fits"] * 10_000 + ["x"])],
              refused_early),
        probe(runs, ["size-report", "--fail-on", "headroom<1e400KiB"], refused_early),
        probe(runs, ["size-report", "--fail-on", "growth>nanKiB"], refused_early),
        probe(runs, ["size-report", "--fail-on", f"headroom<{HUGE}KiB"], refused_early),
        probe(runs, ["footprint", "--version", "wolfssl=5.9.2," * 5_000 + "x=1"], refused_early),
        probe(runs, ["footprint", "--library", "wolfssl", "--config", "minimal", "--ecc",
                     ",".join(["sp-p256"] * 10_000) + ",x"], refused_early),
        probe(runs, ["tls-conformance", "--case", ",".join(f"c{i}" for i in range(10_000))],
              refused_early),
        probe(runs, ["perf", "--target", "qemu", "--test", ",".join(["crypto"] * 10_000) + ",x"],
              refused_early),
        probe(runs, ["sources", "--tree", str(w / "dir"), "--device", ten_k_devices,
                     "--flavour", "all"], refused_early),
    ]  # fmt: skip
    # paths: no such user, longer than the kernel takes, control characters
    for argv in (["build", "--no-report", *fd, "--tree"], ["fit", "--device", "tl-wr902ac",
                 "--image"], ["wolfssl-symbols", "--lib"], ["size-report", "--from"],
                 ["what-if", "--flavour", "wolfssl", "--image"], ["patch", "--tree"],
                 ["vm", "--image"], ["footprint", "--toolchain"]):  # fmt: skip
        for v in ("~nosuchuser/x", "/tmp/" + "x" * 5000, "/tmp/" + "y" * 300, "/tmp/x\x1b[2J"):
            out.append(probe(runs, [*argv, v], refused_early))
    return out


def families(
    w: Path, lab_dir: Path, env: dict[str, str], wanted: set[str] | None
) -> list[tuple[str, list[Probe]]]:
    """The families wanted (all when None); the stand-in ImageBuilder build is made only for
    the overlays, tests/report/lab.py's store only for the report writers."""
    runs = Runs(w)
    want = (lambda n: True) if not wanted else (lambda n: n in wanted)
    out: list[tuple[str, list[Probe]]] = []
    if want("environment"):
        out.append(("environment", environment_family(w, runs)))
    if want("--files overlays"):
        out.append(("--files overlays", files_family(w, lab_dir, runs)))
    if want("concurrent --output") or want("signals mid-write"):
        import hostile_fs

        store = w / "report-lab" / "results"
        if not store.is_dir():
            store = hostile_fs.prepare_report_store(w)
        if want("concurrent --output"):
            out.append(("concurrent --output", concurrent_family(w, store, env, runs)))
        if want("signals mid-write"):
            out.append(("signals mid-write", signals_family(w, store, runs)))
    if want("option values"):
        out.append(("option values", options_family(w, runs)))
    return out


if __name__ == "__main__" and "--run" in sys.argv:
    raise SystemExit(wrapper_main(sys.argv[1:]))
