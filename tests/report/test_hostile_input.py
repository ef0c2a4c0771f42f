"""The size report on hostile input (issue 20): records whose fields are of the wrong type or
hold numbers JSON must not carry, baselines and profiles.json of the wrong shape, and names
that try to inject a formula, a heading, HTML or terminal escapes.

Oracles: the good records' values (tests/report/lab.py: stat, unsquashfs -s, xz -9e), the
field we broke (named in the warning), Python's csv module reading the CSV back, markdown-it-py
(rich's own dependency) parsing the Markdown, the standard library's HTML parser."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from openwrt_wolf.report import sizereport
from openwrt_wolf.report.render import render

from . import htmlkit
from .lab import AR300, MEMFREE, NEW, OLD, Lab

ROOT = Path(__file__).resolve().parent.parent.parent


def report(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", "size-report", "--store", str(store), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=180, env=dict(os.environ),
    )  # fmt: skip


def _record(lab: Lab, release: str, flavour: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        (lab.store / "build" / f"{release}-{flavour}.json").read_text()
    )
    return doc


def _put(d: Any, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for p in parents:
        d = d[int(p)] if isinstance(d, list) else d[p]
    if isinstance(d, list):
        d[int(last) :] = [value]
    else:
        d[last] = value


def _store(tmp: Path, records: dict[str, str]) -> Path:
    for rel, text in records.items():
        (tmp / "store" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "store" / rel).write_text(text)
    return tmp / "store"


# --- empty comparison cells in the HTML page (StrictUndefined crashed on them) ----------


def test_html_with_an_empty_comparison_cell_of_an_older_release(lab_env: Lab) -> None:
    """24.10.8 has no openssl build, the footprint records have: the Flash table's image row
    has an empty openssl cell."""
    html = render(sizereport.build(release=OLD), "html")
    cells = htmlkit.parse(html).tables["table-flash"][f"image:{AR300}"]
    o = lab_env.oracle
    assert cells == [str(o[(OLD, "mbedtls")].image), str(o[(OLD, "wolfssl")].image), ""]


def test_html_with_a_memory_record_of_a_flavour_not_built(lab: Lab, tmp_path: Path) -> None:
    mem = json.loads((lab.store / "memory" / "mem-wolfssl.json").read_text())
    store = _store(tmp_path, {
        "build/b.json": json.dumps(_record(lab, NEW, "mbedtls")),
        "memory/m.json": json.dumps(mem),
    })  # fmt: skip
    p = report(store, "--format", "html", "--release", NEW)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    t = htmlkit.parse(p.stdout).tables
    assert t["table-memory"][f"memfree:{AR300}"] == ["", str(MEMFREE["wolfssl"])]
    assert t["table-flash"][f"image:{AR300}"] == [str(lab.oracle[(NEW, "mbedtls")].image), ""]


# --- records of the wrong shape: skipped with one warning naming file and field --------

HOSTILE: list[tuple[str, str, str]] = [
    ("data.output.fit.limit", '"12abc"', "a string where a whole number or null belongs"),
    ("data.output.fit.limit", "NaN", "NaN (not a number JSON allows)"),
    ("data.output.fit.rootfs_room", "Infinity", "Infinity (not a number JSON allows)"),
    ("data.output.fit.checked_size", "1e400", "1e400 (not a finite number)"),
    ("data.output.images.0.size", str(10**400), "an integer of 401 digits"),
    ("data.output.rootfs.size", "9" * 5000, "an integer of 5,000 digits"),
    ("data.output.rootfs.tls_libraries.0.xz_size", "[1]", "a list where a whole number"),
    ("data.output.fit.notes", '"x"', "a string where a list belongs"),
    ("data.output.fit", "[]", "a list where an object or null belongs"),
    ("data.output.images", "{}", "an object where a list belongs"),
    ("data.output.notes.0", "5", "a whole number where a string belongs"),
]


@pytest.mark.parametrize(
    ("path", "raw", "says"), HOSTILE, ids=[f"{p}={r[:10]}" for p, r, _ in HOSTILE]
)
def test_a_bad_build_record_is_skipped_and_named(
    path: str, raw: str, says: str, lab: Lab, tmp_path: Path
) -> None:
    bad = _record(lab, NEW, "wolfssl")
    _put(bad, path, "@@X@@")
    store = _store(tmp_path, {
        "build/good.json": json.dumps(_record(lab, NEW, "mbedtls")),
        "build/bad.json": json.dumps(bad).replace('"@@X@@"', raw),
    })  # fmt: skip
    p = report(store, "--format", "json", "--release", NEW)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    (warning,) = [ln for ln in p.stderr.splitlines() if ln.startswith("warning:")]
    field = path.removeprefix("data.output.").replace(".0", "[0]")
    assert str(store / "build" / "bad.json") in warning and field in warning, warning
    assert says in warning, warning
    doc = json.loads(p.stdout, parse_constant=lambda c: pytest.fail(f"bare {c}"))
    (dev,) = doc["devices"]
    assert list(dev["cells"]) == ["mbedtls"]  # the good record is still reported
    assert dev["cells"]["mbedtls"]["image"] == lab.oracle[(NEW, "mbedtls")].image


def test_a_bad_footprint_record_is_skipped_and_the_report_renders(tmp_path: Path) -> None:
    from tests.results.test_store import GOOD

    bad = {**GOOD, "key": "bad", "data": {**GOOD["data"], "installed": "12abc"}}
    store = _store(tmp_path, {"footprint/good.json": json.dumps(GOOD),
                              "footprint/bad.json": json.dumps(bad)})  # fmt: skip
    for fmt in ("terminal", "markdown", "csv", "html"):
        p = report(store, "--format", fmt)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
        assert "field data.installed is a string" in p.stderr
        assert "431,484" in p.stdout or "431484" in p.stdout  # the good record's xz


MEMORY_BAD: list[tuple[str, object, str]] = [
    ("partial", {"target": "vm", "summary": {"MemFree": {"median": 1}}},
     "field data.memfree_kb is missing"),
    ("string", {"memfree_kb": "12abc"}, "field data.memfree_kb is a string"),
    ("spread", {"summary": {"MemFree": {"median": 1, "min": "x", "max": 1}}},
     "field data.summary.MemFree.min is a string"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "data", "says"), MEMORY_BAD, ids=[m[0] for m in MEMORY_BAD])
def test_a_memory_record_is_read_whole_or_skipped_and_named(
    name: str, data: dict[str, object], says: str, lab: Lab, tmp_path: Path
) -> None:
    """A memory record of the wrong shape, or a partial one, is not half read: it is skipped
    with one warning line naming its file and field, and the good one is still shown."""
    good = json.loads((lab.store / "memory" / "mem-wolfssl.json").read_text())
    bad = {**good, "flavour": "mbedtls", "key": "bad"}
    bad["data"] = data if name == "partial" else {**good["data"], **data}
    store = _store(tmp_path, {
        "build/b.json": json.dumps(_record(lab, NEW, "mbedtls")),
        "memory/good.json": json.dumps(good),
        "memory/bad.json": json.dumps(bad),
    })  # fmt: skip
    p = report(store, "--format", "html", "--release", NEW)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    (warning,) = [ln for ln in p.stderr.splitlines() if ln.startswith("warning:")]
    assert str(store / "memory" / "bad.json") in warning and says in warning, warning
    t = htmlkit.parse(p.stdout).tables
    assert t["table-memory"][f"memfree:{AR300}"] == ["", str(MEMFREE["wolfssl"])]


BASELINES: list[tuple[object, str]] = [
    ({"schema": sizereport.SCHEMA, "devices": "x"}, "field devices is a string where a list"),
    ({"schema": sizereport.SCHEMA, "devices": [{"profile": AR300, "cells": []}]},
     "field devices[0].cells is a list where an object belongs"),
    ({"schema": sizereport.SCHEMA, "devices": [{"profile": AR300,
                                                "cells": {"mbedtls": {"image": "x"}}}]},
     "field devices[0].cells.mbedtls.image is a string"),
    ([], "schema None, this tool reads"),
]  # fmt: skip


@pytest.mark.parametrize(("doc", "says"), BASELINES)
def test_a_baseline_of_the_wrong_shape_is_one_line(
    doc: object, says: str, lab: Lab, tmp_path: Path
) -> None:
    base = tmp_path / "base.json"
    base.write_text(json.dumps(doc))
    p = report(lab.store, "--baseline", str(base), "--release", NEW)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert len(errors) == 1 and says in errors[0] and str(base) in errors[0], p.stderr


def test_profiles_json_cannot_point_outside_its_directory(lab: Lab, tmp_path: Path) -> None:
    """An image named ../../secret: the file is neither opened nor quoted."""
    secret = tmp_path / "secret"
    secret.write_text("SECRET-CONTENT-1234567\n")
    out = tmp_path / "a" / "b"
    shutil.copytree(lab.base / NEW / "mbedtls" / "bin/targets/ath79/generic", out)
    doc = json.loads((out / "profiles.json").read_text())
    doc["profiles"][AR300]["images"][0]["name"] = "../../secret"
    (out / "profiles.json").write_text(json.dumps(doc))
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "size-report", "--from", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180, env=dict(os.environ),
    )  # fmt: skip
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert len(errors) == 1 and "'../../secret' is not a file name" in errors[0], errors
    assert "SECRET" not in p.stdout + p.stderr
    assert secret.read_bytes().hex()[:16] not in p.stdout + p.stderr


# --- names that try to inject: per format -------------------------------------------

FORMULAS = ['=HYPERLINK("http://evil.example","x")', "+cmd|' /C calc'!A0", "-2+3",
            "@SUM(1+1)", "\t=1+1", "\r=1+1"]  # fmt: skip
INJECT = "x\n### INJECTED <script>alert(1)</script> | [/bold] \x1b]0;title\x07\x1b[2J"


def _injected_store(lab: Lab, tmp: Path, device: str, note: str) -> Path:
    recs = {}
    for flav in ("mbedtls", "openssl"):
        r = _record(lab, NEW, flav)
        r["device"] = device
        r["data"]["output"]["notes"] = [note]
        recs[f"build/{flav}.json"] = json.dumps(r)
    return _store(tmp, recs)


@pytest.mark.parametrize("formula", FORMULAS)
def test_csv_cells_cannot_start_a_formula(formula: str, lab: Lab, tmp_path: Path) -> None:
    p = report(_injected_store(lab, tmp_path, formula, formula), "--format", "csv")
    assert p.returncode == 0, p.stderr[-2000:]
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert rows and all(r["profile"].startswith("'") for r in rows if r["row"] == "image")
    for row in rows:
        for cell in row.values():
            if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                float(cell)  # only a number may start so: a real numeric cell stays one
    # the too-big openssl image's negative headroom is still a number a spreadsheet sums
    (room,) = [r["value"] for r in rows if r["flavour"] == "openssl" and r["row"] == "headroom"]
    assert int(room) == lab.oracle[(NEW, "openssl")].headroom < 0


def test_markdown_shows_names_as_text(lab: Lab, tmp_path: Path) -> None:
    p = report(_injected_store(lab, tmp_path, INJECT, INJECT), "--format", "markdown")
    assert p.returncode == 0, p.stderr[-2000:]
    md = MarkdownIt("commonmark").enable("table")
    tokens = md.parse(p.stdout)
    kinds = {t.type for t in tokens} | {c.type for t in tokens for c in t.children or []}
    assert not kinds & {"html_block", "html_inline"}, "HTML passed into the Markdown"
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert not [h for h in headings if h.startswith("INJECTED")], headings
    widths: list[int] = []
    for t in tokens:
        if t.type == "tr_open":
            widths.append(0)
        elif t.type in ("th_open", "td_open"):
            widths[-1] += 1
        elif t.type == "table_close":
            assert len(set(widths)) == 1, f"a row with another number of cells: {widths}"
            widths = []
    html = md.render(p.stdout)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    assert "\x1b" not in p.stdout


def test_terminal_and_html_show_names_without_escapes(lab: Lab, tmp_path: Path) -> None:
    store = _injected_store(lab, tmp_path, INJECT, INJECT)
    term = report(store, "--format", "terminal")
    assert term.returncode == 0 and "Traceback" not in term.stderr, term.stderr[-2000:]
    for out in (term.stdout, term.stderr):
        assert "\x1b" not in out and "\x07" not in out
    assert "[/bold]" in term.stdout and "\\x1b]0;title\\x07" in term.stdout
    html = report(store, "--format", "html")
    assert html.returncode == 0, html.stderr[-2000:]
    assert "<script>alert" not in html.stdout and "&lt;script&gt;alert(1)" in html.stdout
    assert "\x1b" not in html.stdout


def test_json_carries_names_exactly(lab: Lab, tmp_path: Path) -> None:
    p = report(_injected_store(lab, tmp_path, INJECT, INJECT), "--format", "json")
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)  # JSON escapes control characters itself
    assert doc["devices"][0]["profile"] == INJECT
    assert "\x1b" not in p.stdout


def test_an_unreadable_kind_directory_fails_the_gate(lab: Lab, tmp_path: Path) -> None:
    """--fail-on fits passed on "0 checked" when build/ could not be listed; now it is one
    error line naming the directory (read as root without CAP_DAC_OVERRIDE)."""
    from tests.trust.test_untrusted import no_dac_prefix

    prefix = no_dac_prefix()
    store = _store(tmp_path, {
        "build/b.json": json.dumps(_record(lab, NEW, "mbedtls")),
        "memory/m.json": (lab.store / "memory" / "mem-wolfssl.json").read_text(),
    })  # fmt: skip
    (store / "build").chmod(0)
    try:
        p = subprocess.run(
            [*prefix, sys.executable, "-m", "invoke", "size-report", "--store", str(store),
             "--fail-on", "fits"],
            cwd=ROOT, capture_output=True, text=True, timeout=180, env=dict(os.environ),
        )  # fmt: skip
    finally:
        (store / "build").chmod(0o755)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert errors == [f"error: store directory {store / 'build'}: permission denied"], p.stderr
    assert "checked" not in p.stderr
