"""The one reader of files we did not write (untrusted.py): special files are refused without
a hang, sizes are checked before reading, numbers JSON must not carry are refused with the
field's path, typed models name the file and the field, names from lists stay in their
directory. The inputs are written here by hand; the oracles are their own definitions (the
path we broke, the kind of file we made), never the reader's output fed back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.trust import untrusted
from tests.conftest import need_tools, unavailable
from tests.results.test_store import GOOD

ROOT = Path(__file__).resolve().parent.parent.parent
# root without CAP_DAC_OVERRIDE: a chmod 000 file is unreadable to it, as to any user
NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


def no_dac_prefix() -> list[str]:
    if os.geteuid() != 0:
        return []
    need_tools("setpriv")
    probe = subprocess.run([*NO_DAC, "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        unavailable(f"setpriv cannot drop CAP_DAC_OVERRIDE here: {probe.stderr!r}")
    return NO_DAC


def _special(tmp: Path, kind: str) -> Path:
    p = tmp / "x.json"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "directory":
        p.mkdir()
    elif kind == "symlink loop":
        p.symlink_to(p.name)
    elif kind == "/dev/zero":
        p.symlink_to("/dev/zero")
    elif kind == "sparse 20 GB":
        with p.open("wb") as fh:
            fh.truncate(20 << 30)
    elif kind == "missing":
        pass
    return p


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("fifo", "is a FIFO (named pipe), not a file"),
        ("directory", "is a directory, not a file"),
        ("symlink loop", "a symlink loop"),
        ("/dev/zero", "is a character device, not a file"),
        ("sparse 20 GB", f"has {20 << 30:,} bytes, more than"),
        ("missing", "does not exist"),
    ],
)
def test_special_files_are_one_line_without_reading(kind: str, says: str, tmp_path: Path) -> None:
    path = _special(tmp_path, kind)
    t0 = time.monotonic()
    with pytest.raises(WolfError) as e:
        untrusted.load_json(path, "baseline")
    assert time.monotonic() - t0 < 5  # a FIFO or /dev/zero read would never return
    assert says in str(e.value) and str(path) in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "kind", ["fifo", "directory", "symlink loop", "/dev/zero", "sparse 20 GB", "missing", "junk"]
)
def test_a_cache_entry_that_is_no_file_of_ours_is_made_again(kind: str, tmp_path: Path) -> None:
    # load_cached is the cache's reader (base feed stamp, kept SDK packages, footprint and
    # rootfs entries): what is not a readable JSON file the parser takes is None, at once
    path = _special(tmp_path, kind) if kind != "junk" else tmp_path / "x.json"
    if kind == "junk":
        path.write_text('{"files": ')
    t0 = time.monotonic()
    assert untrusted.load_cached(path, "cache entry", lambda d: d) is None
    assert time.monotonic() - t0 < 5


def test_a_cache_entry_its_parser_refuses_is_made_again(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"size": 1}')

    def parse(d: object) -> int:
        if not isinstance(d, dict) or not isinstance(d.get("size"), int):
            raise WolfError("not a size")
        return int(d["size"])

    assert untrusted.load_cached(path, "cache entry", parse) == 1
    path.write_text('{"size": "1"}')
    assert untrusted.load_cached(path, "cache entry", parse) is None
    path.write_text('{"size": 1e400}')  # refused by the reader before the parser sees it
    assert untrusted.load_cached(path, "cache entry", parse) is None


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("NaN", "NaN (not a number JSON allows)"),
        ("Infinity", "Infinity (not a number JSON allows)"),
        ("-Infinity", "-Infinity (not a number JSON allows)"),
        ("1e400", "1e400 (not a finite number)"),
        (str(10**400), "an integer of 401 digits"),
        ("9" * 5000, "an integer of 5,000 digits"),  # int() of it raises: never called
        ("-" + "9" * 5000, "an integer of 5,000 digits"),
        (str(2**63), f"{2**63} (beyond 64 bits)"),
    ],
)
def test_numbers_json_must_not_carry_name_their_field(raw: str, says: str) -> None:
    text = f'{{"data": {{"fit": {{"limit": 5, "sizes": [1, {raw}]}}}}}}'
    with pytest.raises(WolfError) as e:
        untrusted.loads_json(text, "rec.json")
    assert str(e.value) == f"rec.json: field data.fit.sizes[1] is {says}"


def test_good_numbers_pass() -> None:
    doc = untrusted.loads_json(
        '{"a": [0, -1, 1.5, 9223372036854775807, -9223372036854775808]}', "x"
    )
    assert doc == {"a": [0, -1, 1.5, 2**63 - 1, -(2**63)]}


def test_not_json_and_deep_nesting_are_one_line() -> None:
    for text in ("{", "\xff", "[" * 100_000 + "]" * 100_000):
        with pytest.raises(WolfError, match=r"^x: not JSON"):
            untrusted.loads_json(text.encode("latin-1") if text == "\xff" else text, "x")


@dataclass(frozen=True)
class Leaf:
    size: int
    name: str = "?"
    ratio: float | None = None


@dataclass(frozen=True)
class Tree:
    verdict: Literal["FITS", "TOO_BIG"]
    leaves: list[Leaf] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ([], "field (top) is a list where an object belongs"),
        ({}, "field verdict is missing"),
        ({"verdict": "BIG"}, "field verdict is a string where one of FITS, TOO_BIG belongs"),
        ({"verdict": "FITS", "leaves": "x"}, "field leaves is a string where a list belongs"),
        ({"verdict": "FITS", "leaves": [{"size": "12abc"}]},
         "field leaves[0].size is a string where a whole number belongs"),
        ({"verdict": "FITS", "leaves": [{"size": True}]},
         "field leaves[0].size is true or false where a whole number belongs"),
        ({"verdict": "FITS", "leaves": [{"size": 1, "ratio": "x"}]},
         "field leaves[0].ratio is a string where a number or null belongs"),
        ({"verdict": "FITS", "limits": {"image": [1]}},
         "field limits.image is a list where a whole number belongs"),
        ({"verdict": "FITS", "notes": [5]}, "field notes[0] is a whole number where a string"),
    ],
)  # fmt: skip
def test_typed_names_the_file_and_the_field(doc: object, says: str) -> None:
    with pytest.raises(WolfError) as e:
        untrusted.typed(Tree, doc, "store/build/x.json")
    assert str(e.value).startswith(f"store/build/x.json: {says}"), str(e.value)


def test_typed_builds_the_model() -> None:
    t = untrusted.typed(
        Tree,
        {"verdict": "FITS", "leaves": [{"size": 3, "ratio": 1}], "notes": ["a"], "x": 1},
        "w",
    )
    assert t == Tree("FITS", [Leaf(3, "?", 1)], {}, ("a",))


@pytest.mark.parametrize(
    "name", ["../../../../etc/shadow", "/etc/shadow", "a/b", "..", ".", "", "a\x00b", "x\x1bb"]
)
def test_names_from_lists_stay_in_their_directory(name: str) -> None:
    with pytest.raises(WolfError, match="is not a file name in its directory"):
        untrusted.file_name(name, "profiles.json")


def test_unreadable_files_are_one_line(tmp_path: Path) -> None:
    """chmod 000 as root without DAC override (or as another user): permission denied, one
    line, through the CLI."""
    prefix = no_dac_prefix()
    base = tmp_path / "base.json"
    base.write_text("{}")
    base.chmod(0)
    store = tmp_path / "store"
    (store / "footprint").mkdir(parents=True)
    (store / "footprint" / "good.json").write_text(json.dumps(GOOD))  # something to report
    p = subprocess.run(
        [*prefix, sys.executable, "-m", "invoke", "size-report", "--store", str(store),
         "--baseline", str(base)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "OPENWRT_WOLF_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    base.chmod(0o600)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert errors == [f"error: --baseline {base}: permission denied (save one with "
                      "`size-report --format json --output FILE`)"], p.stderr  # fmt: skip


def test_a_20gb_sparse_file_is_refused_before_reading(tmp_path: Path) -> None:
    """The size is checked from stat: the reader's peak RSS stays small (it would be 20 GB).
    The peak is the reader's own VmHWM: getrusage's ru_maxrss would also carry the pytest
    worker's peak across fork and exec (Linux keeps it in the signal struct), and a worker
    grown past the bound failed this test on a fresh machine. A 1 GiB address-space limit
    makes reading the file fail outright rather than only slowly."""
    big = _special(tmp_path, "sparse 20 GB")
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from openwrt_wolf.trust import untrusted\n"
        "from openwrt_wolf.errors import WolfError\n"
        "try:\n"
        f"    untrusted.load_json(__import__('pathlib').Path({str(big)!r}), 'x')\n"
        "except WolfError as e:\n"
        "    print(e)\n"
        "status = open('/proc/self/status').read().splitlines()\n"
        "print(next(ln.split()[1] for ln in status if ln.startswith('VmHWM:')))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    message, rss_kb = p.stdout.strip().splitlines()
    assert "more than such a file holds" in message
    assert int(rss_kb) < 500_000, rss_kb


def test_store_record_of_each_special_kind_is_skipped_with_its_name(tmp_path: Path) -> None:
    from openwrt_wolf.results.store import FileStore

    good = {"schema": "openwrt-wolf/record/1", "kind": "memory", "key": "good",
            "release": "25.12.5", "device": "d", "flavour": "mbedtls",
            "data": {"MemFree": 1}, "created": "2026-01-01T00:00:00Z",
            "schema_version": 1}  # fmt: skip
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "good.json").write_text(json.dumps(good))
    for kind in ("fifo", "directory", "symlink loop", "/dev/zero", "sparse 20 GB"):
        d = tmp_path / "memory"
        bad = _special(d, kind)
        got = FileStore(tmp_path).query("memory")
        assert [r.key for r in got] == ["good"], kind
        if bad.is_dir() and not bad.is_symlink():
            bad.rmdir()
        else:
            bad.unlink()
