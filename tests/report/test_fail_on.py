"""--fail-on: each rule trips on a record just over its threshold and not on one just under;
a broken rule is listed and the exit status is 1; a bad rule is one error line and exit 2.
The records are crafted in the build job's shape (file list + fit report)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openwrt_wolf.results.store import FileStore, Record
from tests.records import build_data

ROOT = Path(__file__).resolve().parents[2]
DEV = "glinet_gl-ar300m16"
LIMIT = 16_384_000
BASE_IMAGE = 5_000_000


def _fit(
    image: int, *, blocks: int, headroom: int | None = None, fits: bool = True
) -> dict[str, Any]:
    room = LIMIT - image if headroom is None else headroom
    return {
        "profile": "glinet_gl-ar300m16",
        "recipe": "ath79-default",
        "kernel_size": image // 2,
        "rootfs_size": image - image // 2,
        "checked_size": image,
        "limit": LIMIT,
        "limit_name": "IMAGE_SIZE",
        "blocksize": 65536,
        "erase_blocks": blocks,
        "padding": 0,
        "margin": LIMIT - image,
        "headroom_blocks": (LIMIT - image) // 65536,
        "verdict": "FITS" if fits else "TOO_BIG",
        "metadata_size": None,
        "final_size": None,
        "rootfs_room": room,  # what the report calls headroom
    }


def _record(release: str, key: str, image: int, fit: dict[str, Any]) -> Record:
    files = [
        {
            "name": "x-sysupgrade.bin",
            "path": "/nonexistent/x-sysupgrade.bin",
            "sha256": "0" * 64,
            "size": image,
            "type": "sysupgrade",
        }
    ]
    return Record(
        "build",
        key,
        release,
        DEV,
        "mbedtls",
        build_data(files, fit, device=DEV, release=release),
        created="2026-11-01T00:00:00Z" if release == "25.12.5" else "2026-10-01T00:00:00Z",
    )


def _store(tmp: Path, image: int, fit: dict[str, Any]) -> Path:
    st = FileStore(tmp / "store")
    st.put(_record("24.10.8", "old", BASE_IMAGE, _fit(BASE_IMAGE, blocks=80)))
    st.put(_record("25.12.5", "new", image, fit))
    return st.root


def _run(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "size-report",
            "--store",
            str(store),
            "--release",
            "25.12.5",
            "--baseline",
            "24.10.8",
            "--format",
            "csv",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OPENWRT_WOLF_CACHE": str(store.parent / "cache")},
    )


# rule, (image, fit) just over its threshold, (image, fit) just under it
CASES = {
    "fits": (
        (LIMIT + 1, _fit(LIMIT + 1, blocks=251, headroom=-1, fits=False)),
        (LIMIT, _fit(LIMIT, blocks=250, headroom=0)),
    ),
    "headroom<64KiB": (  # the rootfs may grow by 65,535 B / by 65,536 B
        (9_000_000, _fit(9_000_000, blocks=138, headroom=65535)),
        (9_000_000, _fit(9_000_000, blocks=138, headroom=65536)),
    ),
    "margin<4KiB": (
        (LIMIT - 4095, _fit(LIMIT - 4095, blocks=250)),
        (LIMIT - 4096, _fit(LIMIT - 4096, blocks=250)),
    ),
    "growth>4KiB": (
        (BASE_IMAGE + 4097, _fit(BASE_IMAGE + 4097, blocks=80)),
        (BASE_IMAGE + 4096, _fit(BASE_IMAGE + 4096, blocks=80)),
    ),
    "blocks>+0": (
        (BASE_IMAGE, _fit(BASE_IMAGE, blocks=81)),
        (BASE_IMAGE, _fit(BASE_IMAGE, blocks=80)),
    ),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_trips_just_over_and_not_just_under(rule: str, tmp_path: Path) -> None:
    (over_img, over_fit), (under_img, under_fit) = CASES[rule]
    p = _run(_store(tmp_path / "over", over_img, over_fit), "--fail-on", rule)
    assert p.returncode == 1, p.stderr[-2000:]
    assert f"fail-on {rule}: BROKEN by {DEV}/mbedtls" in p.stderr
    assert "Traceback" not in p.stderr
    p = _run(_store(tmp_path / "under", under_img, under_fit), "--fail-on", rule)
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"fail-on {rule}: ok (1 checked)" in p.stderr


def test_several_rules_at_once_list_each_broken_one(tmp_path: Path) -> None:
    image = LIMIT - 1000
    p = _run(
        _store(tmp_path, image, _fit(image, blocks=250)),
        "--fail-on",
        "fits,headroom<64KiB",
        "--fail-on",
        "growth>4KiB",
    )
    assert p.returncode == 1
    assert "fail-on fits: ok" in p.stderr
    assert f"fail-on headroom<64KiB: BROKEN by {DEV}/mbedtls: headroom +1,000 B" in p.stderr
    assert (
        f"fail-on growth>4KiB: BROKEN by {DEV}/mbedtls: growth {image - BASE_IMAGE:+,} B"
        in p.stderr
    )


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("headroom<<5", "not a size"),
        ("speed>3", "unknown measure 'speed'"),
        ("headroom<lots", "not a size"),
        ("blocks>+1.5", "not a whole number"),
        ("fits!", "not a rule"),
    ],
)
def test_bad_rule_is_one_line_and_exit_2(rule: str, says: str, tmp_path: Path) -> None:
    p = _run(_store(tmp_path, BASE_IMAGE, _fit(BASE_IMAGE, blocks=80)), "--fail-on", rule)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(errors) == 1, p.stderr[-2000:]
    assert says in errors[0] and "Traceback" not in p.stderr


def test_growth_without_a_baseline_is_an_error(tmp_path: Path) -> None:
    store = _store(tmp_path, BASE_IMAGE, _fit(BASE_IMAGE, blocks=80))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "size-report",
            "--store",
            str(store),
            "--fail-on",
            "growth>4KiB",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and "give --baseline REF" in p.stderr


def test_a_rule_that_could_check_nothing_says_so(tmp_path: Path) -> None:
    """A record written before the fit model had rootfs_room carries no headroom."""
    fit = _fit(BASE_IMAGE, blocks=80)
    del fit["rootfs_room"]
    p = _run(_store(tmp_path, BASE_IMAGE, fit), "--fail-on", "headroom<64KiB")
    assert p.returncode == 0, p.stderr[-2000:]
    want = f"fail-on headroom<64KiB: ok (0 checked, 1 not checked: {DEV}/mbedtls: headroom unknown)"
    assert want in p.stderr
