"""The whole-target fits matrix (sorted by headroom) and `invoke history` (builds over time,
replaced records kept). Records are crafted in the build job's shape; the oracle is what
they were written with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openwrt_wolf.report import sizereport
from openwrt_wolf.report.render import render
from openwrt_wolf.results.store import FileStore, Record

from ..records import build_data, memory_data
from . import htmlkit
from .test_fail_on import _fit, _record

ROOT = Path(__file__).resolve().parents[2]
ROOMS = {  # profile -> flavour -> headroom written into the record
    "glinet_gl-ar300m16": {"mbedtls": 9_000_000, "wolfssl": 8_900_000},
    "tplink_tl-wr902ac-v1": {"mbedtls": 300_000, "wolfssl": -5_000},
    "tplink_tl-wr902ac-v3": {"mbedtls": 1_200_000, "wolfssl": 1_100_000},
}


def _matrix_store(tmp: Path) -> Path:
    st = FileStore(tmp / "store")
    for dev, rooms in ROOMS.items():
        for flav, room in rooms.items():
            image = 7_000_000
            fit = _fit(image, blocks=107, headroom=room, fits=room >= 0)
            files = [
                {
                    "name": "s.bin",
                    "path": "/gone",
                    "sha256": "0" * 64,
                    "size": image,
                    "type": "sysupgrade",
                }
            ]
            data = build_data(files, fit, device=dev, flavour=flav)
            st.put(Record("build", f"{dev}-{flav}", "25.12.5", dev, flav, data))
    return st.root


def test_matrix_sorted_by_least_headroom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _matrix_store(tmp_path)
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    rep = sizereport.build(store=store)
    want = sorted(ROOMS, key=lambda d: min(ROOMS[d].values()))
    assert [r.profile for r in rep.matrix] == want
    assert [r.min_headroom for r in rep.matrix] == [min(ROOMS[d].values()) for d in want]
    term = render(rep, "terminal", width=300)
    part = term.split("Fits: every device", 1)[1]
    assert [part.index(d) for d in want] == sorted(part.index(d) for d in want)
    assert "does not fit, -5,000 B" in part
    h = htmlkit.parse(render(rep, "html"))
    assert h.matrix == want
    by_name = sizereport.build(store=store, sort="device")
    assert [r.profile for r in by_name.matrix] == sorted(ROOMS)


def test_history_lists_every_build_and_keeps_replaced_records(tmp_path: Path) -> None:
    st = FileStore(tmp_path / "store")
    images = {
        "2026-09-01T00:00:00Z": ("24.10.8", 5_000_000),
        "2026-10-01T00:00:00Z": ("25.12.5", 5_100_000),
        "2026-11-01T00:00:00Z": ("25.12.5", 5_300_000),
    }
    for created, (rel, image) in images.items():
        rec = _record(rel, f"key-{rel}", image, _fit(image, blocks=image // 65536 + 1))
        st.put(Record(**{**rec.__dict__, "created": created}))  # the same key: a rebuild
        if created.startswith("2026-10"):
            st.put(
                Record(
                    "memory",
                    "m1",
                    "25.12.5",
                    rec.device,
                    "mbedtls",
                    memory_data(60_001),
                    created="2026-10-02T00:00:00Z",
                )
            )
    # the replaced 25.12.5 record is still there, byte for byte
    kept = list((st.root / "build" / ".history").rglob("*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["created"] == "2026-10-01T00:00:00Z"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "history",
            "--device",
            "gl-ar300m16",
            "--store",
            str(st.root),
            "--format",
            "json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OPENWRT_WOLF_CACHE": str(tmp_path / "cache")},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    got = [
        (pt["created"], pt["release"], pt["image"], pt["headroom"], pt["memfree_kb"])
        for pt in doc["points"]
    ]
    assert got == [
        (c, rel, img, 16_384_000 - img, 60_001 if c.startswith("2026-10") else None)
        for c, (rel, img) in images.items()
    ]
    out = tmp_path / "h.html"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "history",
            "--device",
            "gl-ar300m16",
            "--store",
            str(st.root),
            "--format",
            "html",
            "--output",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    html = out.read_text()
    assert "<svg" in html and all(f"{img:,}" in html for _, img in images.values())


def test_history_of_an_unbuilt_device_is_one_line(tmp_path: Path) -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "history",
            "--device",
            "gl-ar300m16",
            "--store",
            str(tmp_path / "empty"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("error: no build")
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "history"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and "history needs --device" in p.stderr
