"""Links planted in the directories the project owns or reads, for bench/bad_inputs.py (issue
53): an OpenWrt tree's bookkeeping (`sources --tree T`), the results store (`wolfssl-symbols
--store S`) and the download cache's .part files (`build --mirror`, `sources --fetch`), each
run as a user runs it, each with a fresh tree, store or cache beside a victim folder.

What is planted: .wolf-sources, .wolf-sources/orig, a folder inside orig, .wolf-sources/work
and wolf-substitutions.json (dangling, or to a file) as links out of the tree, with --revert,
--redo and a plain run; a record linked out of the store (absolute and ../../), .history and a
kind folder linked out; an ImageBuilder archive's .part linked out of the cache (absolute,
relative; from a mirror directory, and from a mirror URL where the download is resumed) and an
upstream pin's .part.

Oracles besides the runner's (traceback, error line, hang): every entry of the victim folder
by kind and bytes before and after the run (a change is "security"); a refused run exits 2
naming the link ("is a symbolic link"), a run whose link is replaced stores a regular record
("wrong" else); a record the store held before a refused run still reads ("data loss")."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent.parent))

from hostile import Check, Finding, Probe  # noqa: E402  (bench/hostile.py)

from tests.standin.server import serve  # noqa: E402

FAMILIES = ("tree bookkeeping links", "store links", "cache part links", "cache memo links")
MAKEFILE = "tools/x/Makefile"
IB = "openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64.tar.zst"
PIN = "fwtool"  # the smallest upstream pin (7 KB)
_servers = contextlib.ExitStack()  # the local mirror lives as long as the bench
# stopped while its thread still runs: left to the interpreter's end, serve()'s shutdown()
# waits for ever on a thread already stopped
atexit.register(_servers.close)


def families(w: Path) -> list[tuple[str, list[Probe]]]:
    top = w / "links"
    return [
        ("tree bookkeeping links", bookkeeping_family(top / "trees")),
        ("store links", store_family(top / "stores")),
        ("cache part links", cache_family(top / "caches")),
        ("cache memo links", memo_family(top / "memos")),
    ]


# --- oracles --------------------------------------------------------------------------------


def snapshot(d: Path) -> dict[str, bytes | str]:
    """Every entry below d by kind, a file by its bytes, a link by its target."""
    out: dict[str, bytes | str] = {}
    for p in sorted(d.rglob("*")):
        rel = str(p.relative_to(d))
        if p.is_symlink():
            out[rel] = f"link {os.readlink(p)}"
        else:
            out[rel] = "dir" if p.is_dir() else p.read_bytes()
    return out


def refused(p: subprocess.CompletedProcess[str]) -> Finding | None:
    if p.returncode != 2 or "is a symbolic link" not in p.stderr:
        return "wrong", f"exit {p.returncode} without naming the link: {p.stderr[-300:]!r}"
    return None


def _probe(
    argv: list[str],
    victim: Path,
    plant: Callable[[], None],
    check: Check | None = refused,
    env: dict[str, str] | None = None,
    also: Callable[[], Finding | None] | None = None,
) -> Probe:
    """A run after ``plant`` (which makes it afresh); the victim folder's snapshot after it
    must be the one before."""
    before: list[dict[str, bytes | str]] = []

    def setup() -> None:
        plant()
        before[:] = [snapshot(victim)]

    def after() -> Finding | None:
        now = snapshot(victim)
        if now != before[0]:
            was = before[0]
            changed = sorted(k for k in now.keys() | was.keys() if now.get(k) != was.get(k))
            return "security", f"outside {victim} changed: {', '.join(changed[:5])}"
        return also() if also is not None else None

    return Probe(argv, check=check, setup=setup, after=after, env=env or {})


def _fresh(*dirs: Path) -> None:
    for d in dirs:  # rmtree removes a planted link itself, never what it names
        if d.is_symlink():
            d.unlink()
        elif d.exists():
            shutil.rmtree(d)


# --- `sources --tree T` ------------------------------------------------------------------------


def _tree(t: Path) -> None:
    """What Tree() checks, a Makefile an earlier run edited, its substitutions file."""
    for rel in ("Makefile", "include/target.mk", "config/Config-build.in", MAKEFILE):
        (t / rel).parent.mkdir(parents=True, exist_ok=True)
        (t / rel).write_text("PKG_VERSION:=1.1\n" if rel == MAKEFILE else "")
    edit = {"path": MAKEFILE, "what": "PKG_VERSION", "old": "1.1", "new": "1.0"}
    entry = {"file": "x-1.0.tar.gz", "expected": "0" * 64, "dirs": ["tools/x"],
             "class": "substitute", "origin": "debian:x", "placed": "x-1.0.tar.gz",
             "sha256": "1" * 64, "version": "1.0", "note": "", "edits": [edit]}  # fmt: skip
    subs = {"schema": 1, "tree": str(t), "created": "x", "allow": [], "files": [entry]}
    (t / "wolf-substitutions.json").write_text(json.dumps(subs))


def _bookkeeping_victim(v: Path) -> None:
    """A folder laid out as .wolf-sources is: what a linked one would move into the tree."""
    for rel, text in ((f"orig/{MAKEFILE}", "the victim's Makefile\n"), ("orig/passwd", "root\n"),
                      ("orig/sub/secret", "s3cret\n")):  # fmt: skip
        (v / rel).parent.mkdir(parents=True, exist_ok=True)
        (v / rel).write_text(text)


PLANTS: dict[str, tuple[str, str]] = {  # name: (link in the tree, its target in the victim)
    ".wolf-sources": (".wolf-sources", ""),
    "orig": (".wolf-sources/orig", "orig"),
    "orig/tools": (".wolf-sources/orig/tools", "orig/tools"),
    "work": (".wolf-sources/work", ""),
    "substitutions dangling": ("wolf-substitutions.json", "made.json"),
    "substitutions to a file": ("wolf-substitutions.json", "orig/passwd"),
}
MODES = {"--revert": ["--revert"], "--redo": ["--redo", "x-1.0.tar.gz", "--no-debian"],
         "plain": ["--no-debian"]}  # fmt: skip
# the runs that must stop at the link (a plain run past it would list the tree with make);
# orig/tools with --revert: kept() does not enter the link, so nothing is put back (exit 0)
RUNS = [(p, m) for p in PLANTS for m in MODES if not (p == "orig/tools" and m == "plain")]
RUNS = [r for r in RUNS if not (r[0].startswith("substitutions") and r[1] == "--revert")]


def bookkeeping_family(top: Path) -> list[Probe]:
    out = []
    for plant_name, mode in RUNS:
        name = f"{plant_name}-{mode}".replace("/", "_").replace(" ", "_").strip("-")
        t, victim = top / name / "openwrt", top / name / "outside"
        link, target = PLANTS[plant_name]

        def plant(
            t: Path = t, victim: Path = victim, link: str = link, target: str = target
        ) -> None:
            _fresh(t, victim)
            _tree(t)
            _bookkeeping_victim(victim)
            if link == "wolf-substitutions.json":
                (t / link).unlink()
            (t / link).parent.mkdir(parents=True, exist_ok=True)
            (t / link).symlink_to(victim / target if target else victim)

        ok = plant_name == "orig/tools" and mode == "--revert"
        out.append(_probe(["sources", "--tree", str(t), *MODES[mode]], victim, plant,
                          check=None if ok else refused))  # fmt: skip
    return out


# --- the results store -----------------------------------------------------------------------


def _toy_library(d: Path) -> Path:
    """A shared library for wolfssl-symbols (a task that files a record and ends)."""
    lib = d / "libwolfssl.so"
    if not lib.exists():
        d.mkdir(parents=True, exist_ok=True)
        (d / "toy.c").write_text("int wolfSSL_new(void) { return 1; }\n")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(d / "toy.c")],
                       check=True, timeout=120)  # fmt: skip
    return lib


OLD_RECORD = b'{"an old record": "kept"}\n'


def store_family(top: Path) -> list[Probe]:
    lib = _toy_library(top / "toy")
    key = hashlib.sha256(lib.read_bytes()).hexdigest()[:16]
    out = []
    for how in ("record absolute", "record ../../", ".history", "kind"):
        d = top / how.replace(" ", "-").replace("/", "_").replace(".", "")
        store, victim = d / "store", d / "outside"
        kind = store / "wolfssl-symbols"
        record = kind / f"{key}.json"

        def plant(how: str = how, store: Path = store, victim: Path = victim) -> None:
            _fresh(store, victim)
            victim.mkdir(parents=True)
            (victim / f"{key}.json").write_text("the victim's own bytes\n")
            store.mkdir()
            kind = store / "wolfssl-symbols"
            if how == "kind":
                kind.symlink_to(victim)
                return
            kind.mkdir()
            if how == "record absolute":
                (kind / f"{key}.json").symlink_to(victim / f"{key}.json")
            elif how == "record ../../":
                (kind / f"{key}.json").symlink_to(f"../../outside/{key}.json")
            else:
                (kind / f"{key}.json").write_bytes(OLD_RECORD)
                (kind / ".history").symlink_to(victim)

        def stored(p: subprocess.CompletedProcess[str], record: Path = record) -> Finding | None:
            if p.returncode not in (0, 1) or record.is_symlink() or not record.is_file():
                return "wrong", f"exit {p.returncode}, the record not a file of the store"
            return None

        def kept(record: Path = record, how: str = how) -> Finding | None:
            if how == ".history" and record.read_bytes() != OLD_RECORD:
                return "data loss", "the record a refused run found is gone"
            return None

        argv = ["wolfssl-symbols", "--lib", str(lib), "--store", str(store)]
        check = stored if how.startswith("record") else refused
        out.append(_probe(argv, victim, plant, check=check, also=kept))
    return out


# --- the download cache's .part files ----------------------------------------------------------


def _mirror(top: Path) -> Path:
    """A mirror directory whose sha256sums names an ImageBuilder archive of random bytes, and
    the smallest upstream pin under its name (copied from ../shared/openwrt)."""
    m = top / "mirror"
    t = m / "releases" / "25.12.5" / "targets" / "ath79" / "generic"
    if not t.is_dir():
        t.mkdir(parents=True)
        data = os.urandom(64 << 10)
        (t / IB).write_bytes(data)
        (t / "sha256sums").write_text(f"{hashlib.sha256(data).hexdigest()} *{IB}\n")
    return m


def _pin_file() -> Path | None:
    from openwrt_wolf.host import upstream

    p = upstream.pin(PIN)
    src = upstream.shared_dir() / p.file
    return src if src.is_file() else None


def cache_family(top: Path) -> list[Probe]:
    mirror = _mirror(top)
    url, _srv = _servers.enter_context(serve(mirror))
    build = ["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--mirror"]
    part = Path("downloads/25.12.5/ath79/generic") / f"{IB}.part"
    runs: list[tuple[str, list[str], Path, str]] = [
        ("dir-absolute", [*build, str(mirror)], part, "absolute"),
        ("dir-relative", [*build, str(mirror)], part, "relative"),
        ("url-resumed", [*build, url], part, "absolute"),
    ]
    pin = _pin_file()
    if pin is not None:  # served by the local mirror URL: nothing from the network
        shutil.copy2(pin, mirror / pin.name)
        runs.append(("upstream-pin", ["sources", "--fetch", PIN, "--sources-url", url],
                     Path("upstream/dl") / f"{pin.name}.part", "absolute"))  # fmt: skip
    out = []
    for name, argv, rel, how in runs:
        d = top / name
        cache, victim = d / "cache", d / "outside"
        env = {"OPENWRT_WOLF_CACHE": str(cache), "OPENWRT_WOLF_SHARED": str(d / "no-shared")}

        def plant(
            cache: Path = cache, victim: Path = victim, rel: Path = rel, how: str = how
        ) -> None:
            _fresh(cache, victim)
            victim.mkdir(parents=True)
            (victim / "v").write_bytes(b"the victim's own bytes\n" * 100)
            link = cache / rel
            link.parent.mkdir(parents=True)
            link.symlink_to(victim / "v" if how == "absolute" else
                            os.path.relpath(victim / "v", link.parent))  # fmt: skip

        out.append(_probe(argv, victim, plant, env=env))
    return out


# --- a memo in the cache (host/upstream.py's digest of a pin already downloaded) ----------------


def memo_family(top: Path) -> list[Probe]:
    """`sources --fetch PIN` with the pin already in the cache: its sha256 is remembered in
    upstream/<file>.sha256, where a link is planted (absolute, relative: replaced, the run
    ends well) or upstream/ itself is a link out of the cache (one line)."""
    pin = _pin_file()
    if pin is None:
        return []
    out = []
    for how in ("absolute", "relative", "folder"):
        d = top / how
        cache, victim = d / "cache", d / "outside"
        env = {"OPENWRT_WOLF_CACHE": str(cache), "OPENWRT_WOLF_SHARED": str(d / "no-shared")}
        memo = cache / "upstream" / f"{pin.name}.sha256"

        def plant(cache: Path = cache, victim: Path = victim, memo: Path = memo,
                  how: str = how) -> None:  # fmt: skip
            _fresh(cache, victim)
            victim.mkdir(parents=True)
            (victim / "v").write_bytes(b"the victim's own bytes\n" * 100)
            up = victim if how == "folder" else cache / "upstream"
            (up / "dl").mkdir(parents=True)
            shutil.copy2(pin, up / "dl" / pin.name)
            if how == "folder":
                cache.mkdir(parents=True)
                (cache / "upstream").symlink_to(victim)
                return
            memo.symlink_to(victim / "v" if how == "absolute" else
                            os.path.relpath(victim / "v", memo.parent))  # fmt: skip

        def remembered(p: subprocess.CompletedProcess[str], memo: Path = memo) -> Finding | None:
            if p.returncode != 0 or memo.is_symlink() or not memo.is_file():
                return "wrong", f"exit {p.returncode}, memo not a file: {p.stderr[-300:]!r}"
            return None

        argv = ["sources", "--fetch", PIN, "--sources-url", "http://127.0.0.1:9/"]
        check = refused if how == "folder" else remembered
        out.append(_probe(argv, victim, plant, check=check, env=env))
    return out
