"""The HTML report in a real headless Chromium (Debian's `chromium`): it loads from a file
with no console errors and no network request, each table's figures are in the DOM with the
values of the records and files (tests/report/lab.py), the fits matrix sorts by headroom when
its header is clicked, and a screenshot is kept in test-artifacts/ (CI keeps it)."""

from __future__ import annotations

import re
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


# --- layout: every table within a 1400 px page, byte axes readable ----------------------------

BOXES = """
(() => ({
  viewport: document.documentElement.clientWidth,
  page: document.documentElement.scrollWidth,
  tables: [...document.querySelectorAll("table")].map(t => {
    const box = t.closest(".wide"), r = (box || t).getBoundingClientRect();
    return {name: t.id || t.className, wrapped: box !== null, left: r.left, right: r.right,
            table: t.getBoundingClientRect().width, room: box ? box.clientWidth : 0};
  }),
}))()
"""


def _report_page(name: str) -> Path:
    rep = sizereport.build(release=NEW, baseline=OLD, top_packages=6, fail_on=["fits"])
    page = ARTIFACTS / name
    page.parent.mkdir(exist_ok=True)
    page.write_text(render(rep, "html"))
    return page


def test_every_table_fits_a_1400px_page(lab_env: Lab) -> None:
    """Measured in the browser, not a golden image: at 1400 px no table reaches past the
    viewport or needs its scroll box, and the page itself never scrolls sideways."""
    need_tools("chromium")
    page = _report_page("size-report-1400.html")
    with Chromium(width=1400, height=1000) as browser:
        browser.open(page)
        got = browser.js(BOXES)
        browser.screenshot(ARTIFACTS / "size-report-1400.png", full_page=True)
    assert got["viewport"] == 1400 and got["page"] <= 1400, got
    names = [t["name"] for t in got["tables"]]
    assert {"fits-matrix", "table-flash", "device", "packages", "footprint"} <= set(names)
    for t in got["tables"]:
        assert t["wrapped"] and t["left"] >= 0 and t["right"] <= 1400, t
        assert t["table"] <= t["room"] + 0.5, t  # the whole table shows without scrolling


def test_a_table_wider_than_the_page_scrolls_in_its_box_with_its_first_column(
    lab_env: Lab,
) -> None:
    """Where a table cannot fit (here a 700 px window), its box scrolls, not the page, and
    the first column (the row's name) stays in view while the last column comes into it."""
    need_tools("chromium")
    page = _report_page("size-report-700.html")
    with Chromium(width=700, height=900) as browser:
        browser.open(page)
        assert browser.js(BOXES)["page"] <= 700
        got = browser.js("""(() => {
          const box = document.querySelector("table.device").closest(".wide");
          const first = () => box.querySelector("tbody tr th").getBoundingClientRect().left;
          const before = first(), wide = box.scrollWidth > box.clientWidth;
          box.scrollLeft = box.scrollWidth;
          const last = box.querySelector("tbody tr td:last-child").getBoundingClientRect();
          return {wide, before, after: first(), box: box.getBoundingClientRect().left,
                  right: box.getBoundingClientRect().right, last: last.right,
                  scrolled: box.scrollLeft};
        })()""")
        browser.screenshot(ARTIFACTS / "size-report-700-scrolled.png")
    assert got["wide"] and got["scrolled"] > 0, got
    assert abs(got["after"] - got["box"]) < 1 and abs(got["before"] - got["box"]) < 1, got
    assert got["last"] <= got["right"] + 0.5, got


def _ticks(browser: Chromium, figure: str) -> list[str]:
    return list(browser.js(
        f"[...document.querySelectorAll('#{figure} svg text')].map(t => t.textContent.trim())"
    ))  # fmt: skip


def _axis_reads(texts: list[str], unit: str, largest: float) -> None:
    """The axis is in ``unit``, its tick labels carry separators and no exponent, and the last
    tick is within one tick step of the largest bar (the axis adds a small margin)."""
    assert unit in texts, texts
    assert not any(re.search(r"\de[+-]?\d", t) for t in texts), texts
    ticks = [t for t in texts if re.fullmatch(r"\d{1,3}(,\d{3})*(\.\d+)?", t)]
    assert not [t for t in texts if re.fullmatch(r"\d{4,}(\.\d+)?", t)], texts  # no 1200
    numbers = [float(t.replace(",", "")) for t in ticks]
    step = numbers[1] - numbers[0]
    assert numbers[-1] - step < largest < numbers[-1] + step, (numbers, largest)


def test_byte_axes_read_kib_or_mib_with_separators(lab_env: Lab) -> None:
    """The TLS-library plot read "1e6": now KiB with thousands separators (OpenSSL's xz
    library, 1,243,648 B, is 1,214.5 KiB: ticks to 1,200); free memory (kB, i.e. KiB, from
    /proc/meminfo) in MiB; the fit plot in KiB with separators."""
    need_tools("chromium")
    page = _report_page("size-report-plots.html")
    with Chromium(width=1400, height=1000) as browser:
        browser.open(page)
        tls = _ticks(browser, "plot-tls")
        fit = _ticks(browser, "plot-fit-0")
        ids = browser.js("[...document.querySelectorAll('figure[id^=plot-memory]')].map(f => f.id)")
        mem = {f: _ticks(browser, f) for f in ids}
    _axis_reads(tls, "KiB", FOOTPRINT["openssl"] / 1024)
    assert "1,200" in tls
    free = next(t for t in mem.values() if "Free memory at idle after boot" in t)
    _axis_reads(free, "MiB", max(MEMFREE.values()) / 1024)
    heap = next(t for t in mem.values() if "Heap peak during a TLS handshake" in t)
    _axis_reads(heap, "KiB", max(HEAP_PEAK.values()) / 1024)
    assert "16,000" in fit and not any(re.search(r"\de[+-]?\d", t) for t in fit)
