"""The results store reads defensively: a record that is not what it claims is skipped with a
one-line warning naming its file, and the rest is still reported. Records written by hand
here (json.dumps), not by the store, are the oracle."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openwrt_wolf.results.store import FileStore, Record
from tests.records import footprint_data

ROOT = Path(__file__).resolve().parent.parent.parent

GOOD: dict[str, Any] = {
    "schema": "openwrt-wolf/record/1",
    "kind": "footprint",
    "key": "good",
    "release": "25.12.5",
    "device": None,
    "flavour": "wolfssl",
    "data": footprint_data("wolfssl", installed=1_399_304, xz=431_484, squashfs_cost=440_001),
    "created": "2026-11-30T12:00:00Z",
    "schema_version": 1,
}

BAD: dict[str, Any] = {
    "a list": [GOOD],
    "data null": {**GOOD, "data": None},
    "data a string": {**GOOD, "data": "x"},
    "created null": {**GOOD, "created": None},
    "release a number": {**GOOD, "release": 25.12},
    "device a list": {**GOOD, "device": ["a"]},
    "schema version a string": {**GOOD, "schema_version": "1"},
    "schema version true": {**GOOD, "schema_version": True},
    "kind missing": {k: v for k, v in GOOD.items() if k != "kind"},
    "null": None,
}


def _write_bad(d: Path, name: str) -> Path:
    path = d / "footprint" / "bad.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if name == "a directory":
        path.mkdir()
    elif name == "unreadable (dangling link)":
        path.symlink_to(d / "nowhere.json")
    elif name == "a FIFO":
        os.mkfifo(path)
    elif name == "not UTF-8":
        path.write_bytes(b"\xff\xfe{\x00")
    elif name == "truncated":
        path.write_text(json.dumps(GOOD)[:50])
    else:
        path.write_text(json.dumps(BAD[name]))
    return path


KINDS = [*BAD, "a directory", "a FIFO", "unreadable (dangling link)", "not UTF-8", "truncated"]


@pytest.mark.parametrize("name", KINDS)
def test_bad_record_is_skipped_with_one_warning(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "footprint").mkdir()
    (tmp_path / "footprint" / "good.json").write_text(json.dumps(GOOD))
    bad = _write_bad(tmp_path, name)
    st = FileStore(tmp_path)
    with caplog.at_level(logging.WARNING):
        got = st.query("footprint")
    assert [r.key for r in got] == ["good"]
    assert got[0].data == GOOD["data"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(bad) in warnings[0], warnings
    assert "\n" not in warnings[0]
    # the build cache's lookup treats it as absent (the job runs again and replaces it)
    with caplog.at_level(logging.WARNING):
        assert st.get("footprint", "bad") is None


def test_a_good_record_reads_back(tmp_path: Path) -> None:
    st = FileStore(tmp_path)
    st.put(Record("footprint", "k", "25.12.5", None, "wolfssl", {"a": 1}))
    (r,) = st.query()
    assert (r.kind, r.key, r.device, r.data) == ("footprint", "k", None, {"a": 1})


def test_size_report_reports_the_rest(tmp_path: Path) -> None:
    (tmp_path / "footprint").mkdir()
    (tmp_path / "footprint" / "good.json").write_text(json.dumps(GOOD))
    bad = _write_bad(tmp_path, "data null")
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "size-report", "--store", str(tmp_path), "--format",
         "csv"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    (warning,) = [ln for ln in p.stderr.splitlines() if ln.startswith("warning:")]
    assert str(bad) in warning
    assert "431484" in p.stdout.replace(",", "")  # its xz figure (the Flash comparison)


# --- links planted in the store (issue 53): never followed -----------------------------------

OLD = {**GOOD, "created": "2026-11-01T08:00:00Z"}


def _record(created: str) -> Record:
    return Record("footprint", "good", "25.12.5", None, "wolfssl", GOOD["data"], created)


def _snapshot(d: Path) -> dict[str, bytes | str]:
    """Every entry below d: a file's bytes, a folder's or a link's kind."""
    out: dict[str, bytes | str] = {}
    for p in sorted(d.rglob("*")):
        rel = str(p.relative_to(d))
        out[rel] = "link" if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes()
    return out


@pytest.mark.parametrize("how", ["record absolute", "record ../../", "history", "kind"])
def test_links_planted_in_the_store_are_not_followed(how: str, tmp_path: Path) -> None:
    """<store>/<kind>/<key>.json a link (absolute or ../../) had its target overwritten; a
    .history that links to a folder got the old record hard-linked into it; a kind folder that
    is a link received the record. Now a link at the record's name is replaced by the record,
    one on the way is one error line; outside the store nothing changes."""
    from openwrt_wolf.errors import WolfError

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "good.json").write_text("the victim's own bytes\n")
    before = _snapshot(outside)
    store = tmp_path / "store"
    kind = store / "footprint"
    kind.parent.mkdir()
    if how == "kind":
        kind.symlink_to(outside)
    else:
        kind.mkdir()
    if how.startswith("record"):
        target = outside / "good.json"
        (kind / "good.json").symlink_to(
            target if how.endswith("absolute") else "../../outside/good.json"
        )
    if how == "history":
        (kind / "good.json").write_text(json.dumps(OLD))
        (kind / ".history").symlink_to(outside)
    s = FileStore(store)
    err: WolfError | None = None
    try:
        s.put(_record(GOOD["created"]))
    except WolfError as e:
        err = e
    assert _snapshot(outside) == before
    if how.startswith("record"):
        assert err is None and not (kind / "good.json").is_symlink()
        assert s.get("footprint", "good") == _record(GOOD["created"])
    else:
        shown = kind if how == "kind" else kind / ".history"
        assert err is not None and err.message == (
            f"{shown} is a symbolic link; links inside the results store are not followed"
        )
    if how == "history":  # refused before the record was replaced: nothing measured is lost
        assert json.loads((kind / "good.json").read_text()) == OLD
