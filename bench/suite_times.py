"""Benchmark: where the test suite's time goes, and what the stand-ins cost against what they
build (docs/testing.md "What the suite costs").

    .venv/bin/python bench/suite_times.py [-n 2] [--runs cold,warm] [MODULE ...]
    .venv/bin/python bench/suite_times.py --standins
    .venv/bin/python bench/suite_times.py --report CLOCK [--top N]

Suite mode runs pytest (the whole suite, or the modules given) cold, in a fresh cache
($OPENWRT_WOLF_CACHE in a new directory: every library, userland, tool and stand-in built
again, as on a fresh machine), then warm (the same cache again), each with `-p
bench.suite_clock`, and prints per test module its wall time (the sum of its tests' setup, call
and teardown on their workers) and CPU time (user + system of the worker and its children,
getrusage), the slowest first, then the run's own wall and CPU time (all of pytest's processes:
RUSAGE_CHILDREN), and each fixture that said what it prepares (tests/conftest.py preparing).
A session or module fixture's cost lands on the first test that asks for it, so a module's
figure includes what it was first to build. CPU time is the figure to compare on a busy
machine; wall time says what a quiet one waits.

--standins assembles each stand-in once (the 25.12.5 ImageBuilders of ath79/generic and
ramips/mt76x8 and their SDK, the 24.10.8 one, the buildroot tree) and runs on it what the tests
run (the what-if lab's `make image` builds), printing assembly against build: CPU and wall of
each, and their ratio. The kit (the footprint lab's MIPS builds) comes from the cache
(OPENWRT_WOLF_CACHE, ~/.cache/openwrt-wolf): cold, it is built first and shown apart.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@contextmanager
def clocked(into: dict[str, float]) -> Iterator[None]:
    """Wall and CPU seconds (this process and every child it waited for) of the block."""
    wall, cpu = time.monotonic(), _cpu()
    yield
    into["wall"], into["cpu"] = time.monotonic() - wall, _cpu() - cpu


# --- suite mode ----------------------------------------------------------------------------


def run_suite(
    modules: list[str], workers: int, cache: Path, work: Path, name: str
) -> dict[str, Any]:
    clock = work / f"clock-{name}"
    clock.mkdir(parents=True)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
            "bench.suite_clock", f"--basetemp={work / f'tmp-{name}'}", *modules]  # fmt: skip
    if workers > 1:
        argv[3:3] = ["-n", str(workers)]
    env = {**os.environ, "OPENWRT_WOLF_CACHE": str(cache), "WOLF_SUITE_CLOCK": str(clock)}
    took: dict[str, float] = {}
    with clocked(took), (work / f"pytest-{name}.txt").open("w") as log:
        rc = subprocess.run(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, check=False).returncode  # fmt: skip
    tail = (work / f"pytest-{name}.txt").read_text(errors="replace").strip().splitlines()[-1:]
    return {"rc": rc, "summary": tail[0] if tail else "", **took, **read_clock(clock)}


def read_clock(clock: Path) -> dict[str, Any]:
    """The plugin's rows summed by test module; the fixtures' preparing lines."""
    mods: dict[str, dict[str, float]] = collections.defaultdict(
        lambda: {"tests": 0, "wall": 0.0, "cpu": 0.0}
    )
    prepared: list[dict[str, Any]] = []
    for f in sorted(clock.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            if "prepared" in row:
                prepared.append(row)
                continue
            m = mods[row["test"].split("::")[0]]
            m["tests"] += 1
            m["wall"] += row["wall"]
            m["cpu"] += row["self"] + row["children"]
    return {"modules": dict(mods), "prepared": prepared}


def print_suite(runs: dict[str, dict[str, Any]], top: int) -> None:
    names = list(runs)
    mods = sorted({m for r in runs.values() for m in r["modules"]},
                  key=lambda m: -runs[names[0]]["modules"].get(m, {}).get("cpu", 0.0))  # fmt: skip
    head = "".join(f" {n + ' cpu s':>12} {n + ' wall s':>13}" for n in names)
    print(f"{'module':<48} {'tests':>5}{head}")
    for m in mods[:top] if top else mods:
        first = runs[names[0]]["modules"].get(m, {})
        cells = ""
        for n in names:
            got = runs[n]["modules"].get(m)
            if got:
                cells += f" {got['cpu']:>12.1f} {got['wall']:>13.1f}"
            else:
                cells += f" {'-':>12} {'-':>13}"
        print(f"{m:<48} {int(first.get('tests', 0)):>5}{cells}")
    for n in names:
        r = runs[n]
        mods = r["modules"].values()
        print(
            f"{n}: {sum(int(m['tests']) for m in mods)} tests, modules' sum "
            f"{sum(m['cpu'] for m in mods):.0f} s CPU, {sum(m['wall'] for m in mods):.0f} s wall"
        )
        if "rc" in r:  # not for --report: that run's pytest was not ours to time
            print(f"{n}: wall {r['wall']:.0f} s, CPU {r['cpu']:.0f} s (all pytest processes); "
                  f"exit {r['rc']}: {r['summary']}")  # fmt: skip
        for p in sorted(r["prepared"], key=lambda p: -p["cpu"]):
            print(f"  {n} fixture {p['prepared']}: {p['cpu']:.1f} s CPU, {p['wall']:.1f} s wall "
                  f"({p['worker']})")  # fmt: skip
    print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


# --- stand-in mode -------------------------------------------------------------------------


def standins(work: Path) -> list[tuple[str, dict[str, float], str, dict[str, float], int]]:
    from openwrt_wolf.host import openwrt_tools, upstream
    from tests.standin import kit as kit_mod
    from tests.standin import make_standin
    from tests.whatif import test_whatif as wi

    rows = []
    t25, t24 = upstream.openwrt_tree("25.12.5"), upstream.openwrt_tree("24.10.8")
    tools = openwrt_tools.ensure()
    took: dict[str, float] = {}
    with clocked(took):
        kit = kit_mod.make_kit(work / "kit")
    rows.append(("kit (apk, key, TLS payloads; cold: lab builds)", dict(took), "", {}, 0))

    def images(ib: Path, builds: list[tuple[str, str]], tag: str) -> tuple[dict[str, float], int]:
        got: dict[str, float] = {}
        with clocked(got):
            for profile, flavour in builds:
                wi._make_image(ib, profile, flavour, work / f"bin-{tag}-{profile}-{flavour}",
                               work / f"root-{tag}-{profile}-{flavour}.squashfs")  # fmt: skip
        return got, len(builds)

    for target in (wi.ATH79, wi.MT76X8):
        made: dict[str, float] = {}
        with clocked(made):
            ib = make_standin.make_tree(work / "ib", target, tree=t25, tools=tools, kit=kit)
        builds = [(p, f) for t, p, f in wi.BUILDS if t == target]
        copy = Path(shutil.copytree(ib, work / "build" / ib.name, symlinks=True))
        built, n = images(copy, builds, target.replace("/", "-"))
        rows.append((f"25.12.5 ImageBuilder {target}", made, "its make image runs", built, n))
        sdk: dict[str, float] = {}
        with clocked(sdk):
            top = make_standin.make_sdk(work / "ib", target, kit=kit)
            for tree in (ib, top):
                make_standin.pack(tree, work / f"{tree.name}.tar.zst")
        rows.append((f"  + its SDK and both archives {target}", sdk, "", {}, 0))
    made = {}
    with clocked(made):
        ib = make_standin.make_tree(work / "ib24", wi.ATH79, "24.10.8", tree=t24, tools=tools)
    built, n = images(ib, [(wi.V1, "mbedtls"), (wi.V1, "wolfssl")], "2410")
    rows.append(("24.10.8 ImageBuilder ath79/generic", made, "its make image runs", built, n))
    made = {}
    with clocked(made):
        make_standin.make_buildroot(work / "br", wi.ATH79, tree=t25, tools=tools, kit=kit,
                                    ib_tree=work / "ib" / wi._ib(work, wi.ATH79).name)  # fmt: skip
    rows.append(("buildroot tree ath79/generic (from the ImageBuilder)", made, "", {}, 0))
    return rows


def print_standins(rows: list[tuple[str, dict[str, float], str, dict[str, float], int]]) -> None:
    print(f"{'stand-in':<54} {'cpu s':>7} {'wall s':>7}  {'builds':>6} {'cpu s':>7} {'wall s':>7}"
          f" {'made/built cpu':>14}")  # fmt: skip
    for name, made, _what, built, n in rows:
        line = f"{name:<54} {made['cpu']:>7.1f} {made['wall']:>7.1f}"
        if n:
            ratio = made["cpu"] / (built["cpu"] / n)
            line += (f"  {n:>6} {built['cpu']:>7.1f} {built['wall']:>7.1f} "
                     f"{ratio:>8.1f} x one")  # fmt: skip
        print(line)
    print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help="test modules or node ids (default: the suite)")
    ap.add_argument("-n", type=int, default=2, help="pytest-xdist workers (1: none)")
    ap.add_argument("--runs", default="cold,warm", help="cold, warm or cold,warm")
    ap.add_argument("--top", type=int, default=0, help="print only the N costliest modules")
    ap.add_argument("--keep", type=Path, help="work here and keep it (logs, clocks)")
    ap.add_argument("--standins", action="store_true", help="the stand-ins' cost (above)")
    ap.add_argument("--report", type=Path, metavar="CLOCK",
                    help="only print the table of a run made elsewhere with -p bench.suite_clock "
                    "and WOLF_SUITE_CLOCK=CLOCK (a CI run in a fresh root)")  # fmt: skip
    args = ap.parse_args()
    if args.report:
        print_suite({"run": read_clock(args.report)}, args.top)
        return
    work = args.keep or Path(tempfile.mkdtemp(prefix="wolf-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    act: Callable[[], None]
    if args.standins:

        def act() -> None:
            print_standins(standins(work))

    else:

        def act() -> None:
            runs = {}
            for name in args.runs.split(","):
                if name not in ("cold", "warm"):
                    raise SystemExit(f"--runs: {name!r} is not cold or warm")
                runs[name] = run_suite(args.modules, args.n, work / "cache", work, name)
            print_suite(runs, args.top)

    try:
        act()
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept: {work}")


if __name__ == "__main__":
    main()
