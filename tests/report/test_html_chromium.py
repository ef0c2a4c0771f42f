"""The HTML report in a real headless Chromium (Debian's `chromium`): it loads from a file
with no console errors and no network request, each table's figures are in the DOM with the
values of the records and files (tests/report/lab.py), the fits matrix sorts by headroom when
its header is clicked, and a screenshot is kept in test-artifacts/ (CI keeps it)."""

from __future__ import annotations

from pathlib import Path

from openwrt_wolf.report import sizereport
from openwrt_wolf.report.render import render

from ..conftest import need_tools
from .chromium import Chromium
from .lab import AR300, FOOTPRINT, HANDSHAKES, HEAP_PEAK, MEMFREE, NEW, OLD, Lab

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
COLS = ["mbedtls", "wolfssl", "openssl"]

TABLE_VALUES = """
Object.fromEntries([...document.querySelectorAll("table.comparison")].map(t => [t.id,
  Object.fromEntries([...t.querySelectorAll("tr[data-row]")].map(tr => [tr.dataset.row,
    [...tr.querySelectorAll("td.num")].map(td => td.textContent.trim())]))]))
"""


def test_html_report_in_chromium(lab_env: Lab, tmp_path: Path) -> None:
    need_tools("chromium")
    o = lab_env.oracle
    rep = sizereport.build(release=NEW, baseline=OLD, fail_on=["fits", "headroom<64KiB"])
    page = ARTIFACTS / "size-report.html"
    page.parent.mkdir(exist_ok=True)
    page.write_text(render(rep, "html"))
    with Chromium() as browser:
        browser.open(page)
        assert browser.problems() == []
        assert browser.requests() == [page.resolve().as_uri()]  # nothing fetched but the file
        got = browser.js(TABLE_VALUES)
        # what a reader sees in each table, against the files and records (the footnote
        # number follows each figure: only the leading number is compared)
        flash = got["table-flash"]
        for i, f in enumerate(COLS):
            img = flash[f"image:{AR300}"][i].removeprefix("does not fit: ")
            assert img.startswith(f"{o[(NEW, f)].image:,}")
            assert flash[f"rootfs:{AR300}"][i].startswith(f"{o[(NEW, f)].rootfs:,}")
            assert flash[f"tls_xz:{AR300}"][i].startswith(f"{o[(NEW, f)].tls_xz:,}")
            assert flash["tls_xz:footprint:openwrt:mips_24kc"][i].startswith(f"{FOOTPRINT[f]:,}")
            assert got["table-memory"][f"memfree:{AR300}"][i].startswith(f"{MEMFREE[f]:,}")
            assert got["table-memory"]["perf:heap_peak_handshake:malta-be"][i].startswith(
                f"{HEAP_PEAK[f]:,}"
            )
            assert got["table-performance"]["perf:handshakes_tls13:malta-be"][i].startswith(
                f"{HANDSHAKES[f]:,.1f}"
            )
        assert flash[f"image:{AR300}"][2].startswith("does not fit")
        # every figure's footnote leads to its source
        refs = browser.js(
            "[...document.querySelectorAll('td sup a')].map(a => "
            "document.querySelector(a.getAttribute('href')) !== null)"
        )
        assert refs and all(refs)
        assert browser.js("document.querySelectorAll('figure svg').length") >= 3
        # the gates are listed; the openssl image breaks `fits`
        gates = browser.js("document.getElementById('gates').nextElementSibling.innerText")
        assert f"fail-on fits: BROKEN by {AR300}/openssl" in gates
        browser.screenshot(ARTIFACTS / "size-report.png")
        browser.screenshot(ARTIFACTS / "size-report-full.png", full_page=True)
        # sorting the matrix by a flavour column puts the rows in headroom order
        browser.js("document.querySelectorAll('#fits-matrix th.sortable')[2].click()")
        assert browser.problems() == []
    png = (ARTIFACTS / "size-report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
