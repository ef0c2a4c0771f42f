"""The stand-ins the test modules share are made once per test run, not once per pytest-xdist
worker (issue 36: each worker assembled the 25.12.5 mirror, 2.5-3 min, and test_queue, the
what-if lab and the buildroot assembled its ImageBuilders again). The oracle: a pytest -n 2
run of the modules' own fixtures, with make_standin's assembly replaced by one that logs each
call, and the worker of every test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONFTEST = """
import json, os
from pathlib import Path
import pytest
from tests.conftest import *  # noqa: F403  the suite's fixtures
from tests.whatif import test_whatif as whatif
from tests.standin import make_standin

LOG = Path(os.environ["MADE_ONCE_LOG"])


def _log(what, **kw):
    with LOG.open("a") as f:
        f.write(json.dumps({"what": what, "pid": os.getpid(), **kw}) + "\\n")


def make_server(root, targets=("ath79/generic",), release="25.12.5", **kw):
    _log("make_server", release=release, targets=list(targets))
    for target in targets:
        t, s = target.split("/")
        ib = root / ".trees" / f"openwrt-imagebuilder-{release}-{t}-{s}.Linux-x86_64"
        ib.mkdir(parents=True)
        (ib / "Makefile").write_text("stand-in\\n")
    return root


def make_tree(dest, target, release="25.12.5", **kw):
    _log("make_tree", release=release, target=target)
    t, s = target.split("/")
    top = dest / f"openwrt-imagebuilder-{release}-{t}-{s}.Linux-x86_64"
    top.mkdir(parents=True)
    return top


def make_buildroot(dest, target, release="25.12.5", *, ib_tree=None, **kw):
    _log("make_buildroot", copied=ib_tree is not None and ib_tree.is_dir())
    if ib_tree is None:
        make_tree(dest / ".ib", target, release)
    top = dest / f"openwrt-{release}-{target.replace('/', '-')}"
    top.mkdir(parents=True)
    return top


def make_image(ib, profile, flavour, bin_dir, rootfs):
    _log("make_image", ib=ib.name, profile=profile, flavour=flavour)
    bin_dir.mkdir(parents=True)
    rootfs.write_bytes(b"")


make_standin.make_server = make_server
make_standin.make_tree = make_tree
make_standin.make_buildroot = make_buildroot
whatif._make_image = make_image


@pytest.fixture(scope="session")
def openwrt_tree_25125(tmp_path_factory):
    return tmp_path_factory.mktemp("tree")


@pytest.fixture(scope="session")
def openwrt_tree_24108(tmp_path_factory):
    return tmp_path_factory.mktemp("tree24")


@pytest.fixture(scope="session")
def openwrt_tools():
    return None


@pytest.fixture(scope="session")
def standin_kit():
    return None
"""

# every test runs on both workers (--dist each), so that both ask for each fixture whatever
# order the suite's hooks give the tests
TESTS = """
import os, json
from pathlib import Path
import pytest
from {module} import {fixture}


@pytest.mark.parametrize("i", range(2))
def test_uses(i, {fixture}):
    assert {fixture}
    with Path(os.environ["MADE_ONCE_LOG"]).open("a") as f:
        f.write(json.dumps({{"what": "test", "fixture": "{fixture}",
                             "worker": os.environ["PYTEST_XDIST_WORKER"]}}) + "\\n")
"""

FIXTURES = {
    "build": ("tests.build.test_build", "mirror_dir"),
    "queue": ("tests.queue.test_queue", "mirror"),
    "build2410": ("tests.build.test_build_2410", "mirror_2410"),
    "buildroot": ("tests.build.test_buildroot", "pristine"),
    "whatif": ("tests.whatif.conftest", "lab"),
}


def _env() -> dict[str, str]:
    # not bench/suite_times.py's clock: the inner run's stand-ins are not this run's
    return {k: v for k, v in os.environ.items() if k != "WOLF_SUITE_CLOCK"}


def test_stand_ins_are_made_once_per_run(tmp_path: Path) -> None:
    import json

    from tests.whatif import test_whatif as whatif

    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name, (module, fixture) in FIXTURES.items():
        (tmp_path / f"test_{name}.py").write_text(TESTS.format(module=module, fixture=fixture))
    log = tmp_path / "log.jsonl"
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "each",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "bt"),
         str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**_env(), "PYTHONPATH": str(ROOT), "MADE_ONCE_LOG": str(log)},
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = [json.loads(ln) for ln in log.read_text().splitlines()]
    for _, fixture in FIXTURES.values():  # the precondition: both workers asked for each
        assert len({r["worker"] for r in rows if r.get("fixture") == fixture}) == 2, fixture
    made = [r for r in rows if r["what"] != "test"]
    servers = sorted(r["release"] for r in made if r["what"] == "make_server")
    assert servers == ["24.10.8", "25.12.5"], made
    assert [r for r in made if r["what"] == "make_tree"] == [], made  # no ImageBuilder again
    assert [r["copied"] for r in made if r["what"] == "make_buildroot"] == [True], made
    images = [r for r in made if r["what"] == "make_image"]  # the what-if lab's 7 builds, once
    assert len(images) == len(whatif.BUILDS), made


PLUGIN = """
import json, os
def pytest_collection_finish(session):
    with open(os.environ["ORDER_LOG"], "w") as f:
        json.dump([[i.nodeid, "standin_kit" in getattr(i, "fixturenames", ()),
                    [m.args[0] for m in i.iter_markers("xdist_group")]] for i in session.items],
                  f)
"""


def test_tests_needing_the_kit_come_last(tmp_path: Path) -> None:
    """The suite's order puts every test that needs the stand-in kit after the others (a cold
    kit took 20 min, and the other worker waited on its lock meanwhile, the tests after the
    first ones of tests/build/test_build.py needing it too). Oracle: pytest's own collection of
    test_build.py (which mixes both) and test_cli.py after it, with each item's fixtures."""
    import json

    (tmp_path / "order_plugin.py").write_text(PLUGIN)
    log = tmp_path / "order.json"
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
         "-p", "order_plugin", "tests/build/test_build.py", "tests/test_cli.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**_env(), "PYTHONPATH": f"{tmp_path}:{ROOT}", "ORDER_LOG": str(log)},
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    needs = [n for _, n, _g in json.loads(log.read_text())]
    assert True in needs and False in needs
    assert needs == sorted(needs), "a test without the kit comes after one that needs it"


# modules whose tests all wait on one run shared by the workers (a lock): on one worker, the
# other runs the rest meanwhile instead of waiting (cold: 10 min for the conformance table)
SHARED_RUNS = (
    "tests/perf/test_conformance.py",
    "tests/perf/test_lab.py",
    "tests/perf/test_net.py",
    "tests/perf/test_wifi.py",
    "tests/footprint/test_apk.py",
)


def test_modules_waiting_on_one_shared_run_keep_to_one_worker(tmp_path: Path) -> None:
    import json

    (tmp_path / "order_plugin.py").write_text(PLUGIN)
    log = tmp_path / "order.json"
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
         "-p", "order_plugin", *SHARED_RUNS],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**_env(), "PYTHONPATH": f"{tmp_path}:{ROOT}", "ORDER_LOG": str(log)},
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    groups: dict[str, set[str]] = {}
    for nodeid, _, marks in json.loads(log.read_text()):
        groups.setdefault(nodeid.split("::")[0], set()).add(marks[0] if marks else "")
    assert sorted(groups) == sorted(SHARED_RUNS)
    assert all(len(g) == 1 and "" not in g for g in groups.values()), groups
