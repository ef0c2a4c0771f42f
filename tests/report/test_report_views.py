"""The comparison (Flash, Memory, Performance), the fits matrix and the baselines, rendered in
every format from a store of real builds of two releases (tests/report/lab.py); every value
is checked against the files (stat, unsquashfs -s, xz -9e) or the records' own values."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.report import sizereport
from openwrt_wolf.report.render import FORMATS, render

from . import htmlkit
from .lab import AR300, FOOTPRINT, HANDSHAKES, HEAP_PEAK, MEMFREE, NEW, OLD, Lab


def test_every_format_shows_the_records(lab_env: Lab) -> None:
    o = lab_env.oracle
    rep = sizereport.build(release=NEW)
    assert set(FORMATS) == {"terminal", "markdown", "json", "csv", "html"}
    out = {fmt: render(rep, fmt, width=400) for fmt in FORMATS}
    # JSON: the comparison tables, figure by figure
    doc = json.loads(out["json"])
    tables = {t["id"]: t for t in doc["comparison"]}
    assert [t["id"] for t in doc["comparison"]] == ["flash", "memory", "performance"]
    flash = {r["id"]: r["values"] for r in tables["flash"]["rows"]}
    for flav in ("mbedtls", "wolfssl", "openssl"):
        oc = o[(NEW, flav)]
        assert flash[f"image:{AR300}"][flav]["value"] == oc.image
        assert flash[f"rootfs:{AR300}"][flav]["value"] == oc.rootfs
        assert flash[f"tls_xz:{AR300}"][flav]["value"] == oc.tls_xz
        assert flash["tls_xz:footprint:openwrt:mips_24kc"][flav]["value"] == FOOTPRINT[flav]
        src = flash[f"image:{AR300}"][flav]["source"]
        assert src["record"] == f"store:build/{NEW}-{flav}" and src["date"].startswith("2026-11-01")
    assert flash[f"image:{AR300}"]["openssl"]["verdict"] == "TOO_BIG"
    assert not o[(NEW, "openssl")].kept and o[(NEW, "mbedtls")].kept
    mem = {r["id"]: r["values"] for r in tables["memory"]["rows"]}
    perf = {r["id"]: r["values"] for r in tables["performance"]["rows"]}
    for flav in MEMFREE:
        assert mem[f"memfree:{AR300}"][flav]["value"] == MEMFREE[flav]
        assert mem[f"memfree:{AR300}"][flav]["source"]["setting"] == "hardware"
        assert mem["perf:heap_peak_handshake:malta-be"][flav]["value"] == HEAP_PEAK[flav]
        assert perf["perf:handshakes_tls13:malta-be"][flav]["value"] == HANDSHAKES[flav]
        assert perf["perf:handshakes_tls13:malta-be"][flav]["source"]["setting"] == "emulated (vm)"
    # the matrix: one device, its least headroom is the openssl image's (negative)
    (row,) = doc["matrix"]
    assert row["min_headroom"] == o[(NEW, "openssl")].headroom < 0
    assert row["cells"]["wolfssl"]["headroom"] == o[(NEW, "wolfssl")].headroom
    # CSV: the per-device rows
    got = {(r["flavour"], r["row"]): r["value"] for r in csv.DictReader(io.StringIO(out["csv"]))}
    for flav in MEMFREE:
        assert int(got[(flav, "image")]) == o[(NEW, flav)].image
        assert int(got[(flav, "erase_blocks")]) == o[(NEW, flav)].erase_blocks
    # terminal and Markdown: the comparison's titles and figures as a reader sees them
    for fmt in ("terminal", "markdown"):
        text = out[fmt]
        for title in ("Flash", "Memory", "Performance"):
            assert title in text
        assert f"{o[(NEW, 'wolfssl')].image:,}" in text
        assert f"does not fit: {o[(NEW, 'openssl')].image:,}" in text
        assert f"{MEMFREE['wolfssl']:,}" in text and "57.2" in text  # 57.25 handshakes/s
        assert f"{FOOTPRINT['openssl']:,}" in text
    # HTML: each table's data-value against the records
    h = htmlkit.parse(out["html"])
    fl = h.tables["table-flash"]
    cols = ["mbedtls", "wolfssl", "openssl"]
    assert fl[f"image:{AR300}"] == [str(o[(NEW, f)].image) for f in cols]
    assert fl[f"tls_xz:{AR300}"] == [str(o[(NEW, f)].tls_xz) for f in cols]
    assert fl["tls_xz:footprint:openwrt:mips_24kc"] == [str(FOOTPRINT[f]) for f in cols]
    assert h.tables["table-memory"][f"memfree:{AR300}"] == [str(MEMFREE[f]) for f in cols]
    assert h.tables["table-performance"]["perf:handshakes_tls13:malta-be"] == [
        str(HANDSHAKES[f]) for f in cols
    ]
    assert out["html"].count("<svg") >= 3  # the fit, TLS, memory and performance plots
    for fetch in ('src="http', "src='http", 'href="http', "url(http", "@import"):
        assert fetch not in out["html"]  # self-contained: nothing to fetch


def _baseline_checks(rep: sizereport.SizeReport, lab: Lab) -> None:
    assert rep.baseline is not None
    ds = rep.baseline.deltas[AR300]
    for flav in ("mbedtls", "wolfssl"):
        new, old = lab.oracle[(NEW, flav)], lab.oracle[(OLD, flav)]
        assert ds[flav].image == new.image - old.image
        assert ds[flav].erase_blocks == new.erase_blocks - old.erase_blocks
        assert ds[flav].rootfs == new.rootfs - old.rootfs
        assert ds[flav].tls_xz == new.tls_xz - old.tls_xz
    assert "openssl" not in ds and f"{AR300}/openssl" in rep.baseline.missing


def test_baseline_release_store_and_saved_report(lab_env: Lab, tmp_path: Path) -> None:
    rep = sizereport.build(release=NEW, baseline=OLD)
    assert rep.baseline is not None and rep.baseline.kind == "release"
    _baseline_checks(rep, lab_env)
    md = render(rep, "markdown")
    new, old = lab_env.oracle[(NEW, "wolfssl")], lab_env.oracle[(OLD, "wolfssl")]
    assert (
        f"{new.image - old.image:+,} B, {new.erase_blocks - old.erase_blocks:+} erase blocks" in md
    )
    saved = tmp_path / "base.json"
    saved.write_text(render(sizereport.build(release=OLD), "json"))
    rep2 = sizereport.build(release=NEW, baseline=str(saved))
    assert rep2.baseline is not None and rep2.baseline.kind == "report"
    _baseline_checks(rep2, lab_env)
    # a report saved by a version before the typed memory figures (size-report/1: mem_kb
    # beside the flash rows) is still a baseline: the flash rows are the same fields
    doc = json.loads(saved.read_text())
    doc["schema"] = "openwrt-wolf/size-report/1"
    for dev in doc["devices"]:
        for c in dev["cells"].values():
            c["mem_kb"] = c.pop("memory", {}).get("boot", {}).get("kb", {})
    old_saved = tmp_path / "base-1.json"
    old_saved.write_text(json.dumps(doc))
    rep1 = sizereport.build(release=NEW, baseline=str(old_saved))
    assert rep1.baseline is not None and rep1.baseline.kind == "report"
    _baseline_checks(rep1, lab_env)
    # a store holding only the old builds
    other = tmp_path / "old-store"
    (other / "build").mkdir(parents=True)
    for p in (lab_env.store / "build").glob(f"{OLD}-*.json"):
        (other / "build" / p.name).write_text(p.read_text())
    rep3 = sizereport.build(release=NEW, baseline=str(other))
    assert rep3.baseline is not None and rep3.baseline.kind == "store"
    _baseline_checks(rep3, lab_env)


def test_bad_baseline_is_one_error(lab_env: Lab, tmp_path: Path) -> None:
    with pytest.raises(WolfError, match="not a release"):
        sizereport.build(baseline="nonsense-ref")
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "something/else"}')
    with pytest.raises(WolfError, match="schema"):
        sizereport.build(baseline=str(bad))
