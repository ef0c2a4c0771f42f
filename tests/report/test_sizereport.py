"""The size report end to end: build records and --from directories made of real squashfs
images; the rendered JSON and CSV are parsed and checked against unsquashfs -s, xz -9e and
the sizes the tests wrote; "does not fit" from the 0x710000 safeloader limit (openwrt-facts)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.firmware import artifacts
from openwrt_wolf.report import sizereport
from openwrt_wolf.report.render import render
from openwrt_wolf.results.store import FileStore, Record
from tests.conftest import need_tools
from tests.records import build_data, footprint_data, memory_data
from tests.sqfs_kit import (
    FLAVOUR_LIBS,
    GLUE,
    make_tree,
    mksquashfs,
    profiles_json,
    uimage_kernel,
    unsquashfs_size,
    xz9e_size,
)

WR902 = "tplink_tl-wr902ac-v1"
SAFELOADER_MAX = 0x710000  # kernel + rootfs tplink-safeloader allows on the TL-WR902AC v1
KERNEL = {"mbedtls": 1_900_000, "wolfssl": 1_900_000, "openssl": 7_200_000}  # openssl: too big
LISTED = {"mbedtls": 4_915_490, "wolfssl": 5_177_634}  # sysupgrade sizes in profiles.json


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))


class Lab:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.dirs: dict[str, Path] = {}
        self.tls_xz: dict[str, int] = {}  # oracle: xz -9e of each TLS file, summed
        self.rootfs: dict[str, int] = {}  # oracle: unsquashfs -s
        self.kernel: dict[str, int] = {}  # oracle: stat


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    need_tools("mksquashfs", "unsquashfs", "xz", "mkimage")
    base = tmp_path_factory.mktemp("lab")
    lab = Lab(base)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENWRT_WOLF_CACHE", str(base / "cache"))
        for i, flav in enumerate(("mbedtls", "wolfssl", "openssl")):
            out = base / flav / "bin/targets/ath79/generic"
            out.mkdir(parents=True)
            tree = make_tree(base / flav / "root", flav, seed=10 + i)
            img = mksquashfs(tree, out / "root.squashfs")
            k = uimage_kernel(out / f"{WR902}-kernel.bin", KERNEL[flav], seed=i)
            name = f"openwrt-25.12.5-ath79-generic-{WR902}-squashfs-sysupgrade.bin"
            spec = {}  # OpenWrt lists only profiles with images it kept
            if flav in LISTED:
                images = [{"type": "sysupgrade", "size": LISTED[flav], "name": name}]
                spec = {WR902: {"images": images, "file_size_limits": {"image": 7_536_640}}}
            profiles_json(out / "profiles.json", "25.12.5", "ath79/generic", spec)
            lab.dirs[flav] = out
            lab.rootfs[flav] = unsquashfs_size(img)
            lab.kernel[flav] = k.stat().st_size
            libs = {**FLAVOUR_LIBS[flav], **GLUE}
            lab.tls_xz[flav] = sum(xz9e_size((tree / p.lstrip("/")).read_bytes()) for p in libs)
        store = FileStore(base / "results")
        for flav, d in lab.dirs.items():
            (a,) = artifacts.measure_dir(d)
            store.put(
                Record(
                    "build",
                    f"b-{flav}",
                    "25.12.5",
                    WR902,
                    flav,
                    build_data([], output=a, device=WR902, flavour=flav),
                )
            )
        yield lab


def test_json_rows_match_the_oracles(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(lab.base / "cache"))
    rep = sizereport.build(store=lab.base / "results", device="tl-wr902ac")
    doc = json.loads(render(rep, "json"))
    assert doc["schema"] == "openwrt-wolf/size-report/2"
    (dev,) = doc["devices"]
    assert dev["profile"] == WR902 and dev["flavours"] == ["mbedtls", "wolfssl", "openssl"]
    cells = dev["cells"]
    for flav in lab.dirs:
        assert cells[flav]["tls_xz"] == lab.tls_xz[flav]
        assert cells[flav]["rootfs"] == lab.rootfs[flav]
    assert cells["mbedtls"]["image"] == LISTED["mbedtls"]
    assert cells["mbedtls"]["verdict"] == cells["wolfssl"]["verdict"] == "FITS"
    # the openssl build: kernel + rootfs exceeds what tplink-safeloader allows
    assert lab.kernel["openssl"] + lab.rootfs["openssl"] > SAFELOADER_MAX
    assert cells["openssl"]["verdict"] == "TOO_BIG"
    assert cells["openssl"]["image_computed"] is True
    assert cells["openssl"]["headroom"] < 0 and cells["openssl"]["margin"] < 0
    d = dev["deltas"]["wolfssl"]
    assert d["tls_xz"] == lab.tls_xz["wolfssl"] - lab.tls_xz["mbedtls"]
    assert d["rootfs"] == lab.rootfs["wolfssl"] - lab.rootfs["mbedtls"]
    assert d["image"] == LISTED["wolfssl"] - LISTED["mbedtls"]


def test_csv_and_markdown_show_the_same_numbers(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(lab.base / "cache"))
    rep = sizereport.build(store=lab.base / "results")
    rows = list(csv.DictReader(io.StringIO(render(rep, "csv"))))
    got = {(r["flavour"], r["row"]): r for r in rows if r["profile"] == WR902}
    for flav in lab.dirs:
        assert int(got[(flav, "rootfs")]["value"]) == lab.rootfs[flav]
        assert int(got[(flav, "tls_xz")]["value"]) == lab.tls_xz[flav]
    assert int(got[("openssl", "tls_xz")]["delta_vs_mbedtls"]) == (
        lab.tls_xz["openssl"] - lab.tls_xz["mbedtls"]
    )
    assert got[("openssl", "fits")]["value"] == "does not fit"
    md = render(rep, "markdown")
    assert f"| Root filesystem | {lab.rootfs['mbedtls']:,} |" in md
    assert "does not fit: " in md
    term = render(rep, "terminal", width=240)
    assert f"{lab.tls_xz['wolfssl']:,}" in term and "does not fit" in term


def test_largest_packages_table(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(lab.base / "cache"))
    rep = sizereport.build(store=lab.base / "results", top_packages=1)
    md = render(rep, "markdown")
    table = md.split("| package (bytes in the squashfs) |", 1)[1].split("\n\n", 1)[0]
    (row,) = table.splitlines()[2:]
    # libopenssl3 (1.25 MB of libraries) is about twice any other package of the test
    # rootfs, and only the openssl image has it
    name, mbed, wolf, ossl = (c.strip() for c in row.strip("|").split("|"))
    assert (name, mbed, wolf) == ("libopenssl3", "–", "–")
    assert 0 < int(ossl.replace(",", "")) < lab.rootfs["openssl"]


def test_from_dirs_and_flavour_filter(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(lab.base / "cache"))
    monkeypatch.setenv("OPENWRT_WOLF_STORE", str(lab.base / "empty-store"))
    rep = sizereport.build(
        from_dirs=[str(lab.dirs["mbedtls"]), f"wolfssl={lab.dirs['wolfssl']}"],
        flavour="wolfssl,mbedtls",
    )
    (dev,) = rep.devices
    assert dev.flavours == ["mbedtls", "wolfssl"]
    assert dev.cells["wolfssl"].rootfs == lab.rootfs["wolfssl"]
    assert dev.cells["mbedtls"].tls_xz == lab.tls_xz["mbedtls"]


def test_memory_and_footprint_records_are_shown(lab: Lab, tmp_path: Path) -> None:
    store = FileStore(tmp_path / "results")
    for p in (lab.base / "results/build").glob("*.json"):
        rec = Record.from_dict(json.loads(p.read_text()))
        store.put(rec)
    # the shapes the memory (results/memory.py) and footprint jobs store
    mem = memory_data(23456.0, memavailable_kb=30001.5, spread=(23400, 23500))
    store.put(Record("memory", "m1", "25.12.5", WR902, "wolfssl", mem))
    fp = footprint_data("wolfssl", version="5.9.1", installed=1_399_304, xz=431_484,
                        squashfs_cost=440_001)  # fmt: skip
    store.put(Record("footprint", "f1", "25.12.5", None, "wolfssl", fp))  # fmt: skip
    rep = sizereport.build(store=tmp_path / "results")
    md = render(rep, "markdown")
    assert "| MemFree (median, kB) | – | 23,456 | – |" in md
    assert "| MemAvailable (median, kB) | – | 30,002 | – |" in md
    assert "| wolfssl | 5.9.1 | openwrt | mips_24kc | 1,399,304 | 431,484 | 440,001 |" in md


def test_rootfs_on_disk_memory_is_its_own_row(lab: Lab, tmp_path: Path) -> None:
    """measure-memory --root disk (the squashfs on a disk, as from flash) and the initramfs
    boot measure different things: each keeps its own row, neither replaces the other."""
    store = FileStore(tmp_path / "results")
    for p in (lab.base / "results/build").glob("*.json"):
        store.put(Record.from_dict(json.loads(p.read_text())))
    for key, root, kb in (("m-ram", "initramfs", 23456.0), ("m-disk", "disk", 27000.0)):
        mem = memory_data(kb, root=root)
        store.put(Record("memory", key, "25.12.5", WR902, "wolfssl", mem))
    rep = sizereport.build(store=tmp_path / "results")
    memory = next(t for t in rep.comparison if t.id == "memory")
    rows = {r.id: r for r in memory.rows}
    ram, disk = rows[f"memfree:{WR902}"], rows[f"memfree-disk:{WR902}"]
    assert ram.values["wolfssl"].value == 23456 and disk.values["wolfssl"].value == 27000
    assert "on disk" in disk.label and "on disk" not in ram.label
    src = disk.values["wolfssl"].source
    assert src is not None and src.setting.startswith("emulated") and "m-disk" in src.record


def test_build_job_records_listing_files_are_read(lab: Lab, tmp_path: Path) -> None:
    """The build job stores data["artifacts"] as a file list plus data["fit"]."""
    store = FileStore(tmp_path / "results")
    d = lab.dirs["wolfssl"]
    files = [
        {"name": p.name, "path": str(p), "sha256": "0" * 64, "size": p.stat().st_size, "type": t}
        for p, t in ((d / f"{WR902}-kernel.bin", "kernel"), (d / "root.squashfs", "rootfs"))
    ]
    files.append({"name": "x-sysupgrade.bin", "path": "/gone", "sha256": "0" * 64,
                  "size": 5_555_555, "type": "sysupgrade"})  # fmt: skip
    # a fit report as written before rootfs_room: "headroom" was the limit minus checked size
    fit = {"profile": WR902, "recipe": "tplink-safeloader", "kernel_size": 2_000_000,
           "rootfs_size": 4_000_000, "checked_size": 7_404_334, "limit": 7_405_568,
           "limit_name": "safeloader kernel+rootfs", "blocksize": 65536, "erase_blocks": 99,
           "padding": 77, "headroom": 1234, "headroom_blocks": 0, "verdict": "FITS",
           "metadata_size": None, "final_size": None, "notes": []}  # fmt: skip
    data = build_data(files, fit, device=WR902, flavour="wolfssl",
                      manifest={"libwolfssl5.9.1.ee39414e": "5.9.1-r1"})  # fmt: skip
    store.put(Record("build", "k1", "25.12.5", WR902, "wolfssl", data))
    rep = sizereport.build(store=tmp_path / "results")
    c = rep.devices[0].cells["wolfssl"]
    assert (c.rootfs, c.tls_xz) == (lab.rootfs["wolfssl"], lab.tls_xz["wolfssl"])
    assert (c.image, c.erase_blocks, c.margin, c.verdict) == (5_555_555, 99, 1234, "FITS")
    assert c.headroom is None  # a record written before rootfs_room: no rootfs room to show


def test_a_build_record_is_read_whole_or_skipped_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A build record is read as the one model (results/build.py) or not at all: one that
    lacks a field (the shape the report once read piecemeal) is skipped with one warning
    naming its file and the field; the whole one beside it is reported."""
    store = FileStore(tmp_path / "results")
    files = [{"name": "x-sysupgrade.bin", "path": "/gone", "sha256": "0" * 64,
              "size": 5_555_555, "type": "sysupgrade"}]  # fmt: skip
    fit = {"profile": WR902, "recipe": "tplink-safeloader", "kernel_size": 2_000_000,
           "rootfs_size": 3_000_000, "checked_size": 5_555_555, "limit": 7_405_568,
           "limit_name": "IMAGE_SIZE", "blocksize": 65536, "erase_blocks": 85, "padding": 0,
           "margin": 1_850_013, "headroom_blocks": 28, "verdict": "FITS",
           "metadata_size": None, "final_size": None, "notes": []}  # fmt: skip
    whole = build_data(files, fit, device=WR902, flavour="mbedtls")
    store.put(Record("build", "good", "25.12.5", WR902, "mbedtls", whole))
    partial = {"artifacts": files, "fit": fit}
    bad = store.put(Record("build", "bad", "25.12.5", WR902, "wolfssl", partial))
    with caplog.at_level("WARNING", logger="openwrt_wolf.store"):
        rep = sizereport.build(store=tmp_path / "results")
    (dev,) = rep.devices
    assert list(dev.cells) == ["mbedtls"] and dev.cells["mbedtls"].image == 5_555_555
    (warning,) = [r.getMessage() for r in caplog.records]
    assert str(bad) in warning and "field data.request is missing" in warning, warning


def test_unknown_device_is_one_clear_error(lab: Lab) -> None:
    with pytest.raises(WolfError, match="unknown device 'tl-wr9999'"):
        sizereport.build(store=lab.base / "results", device="tl-wr9999")


def test_cli_missing_output_directory_is_one_line(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "size-report", "--from", str(tmp_path / "nope")],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: output directory not found: ")


def test_cli_writes_json_atomically_to_output(lab: Lab, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "size-report", "--store", str(lab.base / "results"),
         "--device", "tl-wr902ac", "--format", "json", "--output", str(out)],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2],
        env={**__import__("os").environ, "OPENWRT_WOLF_CACHE": str(lab.base / "cache")},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["devices"][0]["cells"]["wolfssl"]["rootfs"] == lab.rootfs["wolfssl"]


def test_footprint_records_alone_make_a_report(tmp_path: Path) -> None:
    """`invoke footprint` alone (no image built yet) is enough for a report; the two wolfSSL
    ECC choices of the minimal mode stay two rows."""
    store = FileStore(tmp_path / "store")
    for key, ecc, xz in (("a", "sp-p256", 244_812), ("b", "generic", 218_732)):
        data = footprint_data("wolfssl", config="minimal", ecc=ecc, installed=xz * 2, xz=xz,
                              squashfs_cost=xz + 6000)  # fmt: skip
        store.put(Record("footprint", key, "25.12.5", None, "wolfssl", data))
    report = sizereport.build(store=str(store.root))
    assert report.devices == []
    got = json.loads(render(report, "json"))
    rows = {(f["config"], f["xz"]) for f in got["footprints"]}
    assert rows == {("minimal (sp-p256)", 244_812), ("minimal (generic)", 218_732)}
    with pytest.raises(WolfError, match="nothing to report for tl-wr902ac"):
        sizereport.build(store=str(store.root), device="tl-wr902ac")


def test_substitutions_of_a_build_are_shown(lab: Lab, tmp_path: Path) -> None:
    """A buildroot build's record carries the tree's substitutions (build/sources/dl.py); every
    renderer shows each file that was not OpenWrt's exact one, once, with the builds that used
    it, and the JSON keeps the record's entries."""
    from openwrt_wolf.build.sources.substitutions import Substitutions

    entry = {
        "file": "ustream-ssl-2026.03.01~99f1c0db.tar.zst", "class": "substitute",
        "placed": "ustream-ssl-2024.07.28~99bd3d2b.tar.zst", "version": "99bd3d2b167c",
        "origin": "git:/src/openwrt+ustream-ssl/repo@99bd3d2b", "note": "older commit",
        "expected": "631ce829", "dirs": ["package/libs/ustream-ssl"], "sha256": "ab", "edits": [],
    }  # fmt: skip
    exact = {**entry, "file": "mbedtls-3.6.6.tar.bz2", "class": "exact", "placed": "x"}
    subs = Substitutions("/tree", "2026-12-01T00:00:00+00:00", ("substitute",), (entry, exact))
    store = FileStore(tmp_path / "results")
    for flav, d in lab.dirs.items():
        (a,) = artifacts.measure_dir(d)
        data = build_data([], output=a, device=WR902, flavour=flav)
        data["sources"] = subs.summary() if flav != "openssl" else {}
        store.put(Record("build", f"s-{flav}", "25.12.5", WR902, flav, data))
    rep = sizereport.build(store=tmp_path / "results", device="tl-wr902ac")
    md = render(rep, "markdown")
    rows = [ln for ln in md.splitlines() if "99bd3d2b" in ln]
    assert len(rows) == 1  # one row for the file, not one per flavour
    assert "| substitute |" in rows[0] and "mbedtls, wolfssl" in rows[0]
    assert "mbedtls-3.6.6" not in md  # exact files are not listed
    assert "ustream-ssl-2024.07.28~99bd3d2b.tar.zst" in render(rep, "terminal")
    assert "ustream-ssl-2024.07.28~99bd3d2b.tar.zst" in render(rep, "html")
    doc = json.loads(render(rep, "json"))
    cells = doc["devices"][0]["cells"]
    assert cells["wolfssl"]["substitutions"] == [entry] and cells["openssl"]["substitutions"] == []


def test_an_sd_card_device_speaks_of_its_root_partition(tmp_path: Path) -> None:
    """The Raspberry Pi 5 has no flash: its limit is the root partition (ROOTFS_PARTSIZE, 104
    MiB = 109,051,904 bytes, config/Config-images.in), no erase blocks; a rootfs one byte over
    it does not fit, though OpenWrt writes that image without a word."""
    from openwrt_wolf.catalogue import devices
    from openwrt_wolf.firmware import fit
    from openwrt_wolf.results.artifacts import Artifacts, ImageFile

    pi = devices.resolve("rpi-5")
    store = FileStore(tmp_path / "results")
    rootfs = {"mbedtls": 109_051_904 - 4096, "openssl": 109_051_904 + 1}
    for flav, size in rootfs.items():
        name = "openwrt-25.12.5-bcm27xx-bcm2712-rpi-5-squashfs-sysupgrade.img.gz"
        a = Artifacts(profile="rpi-5", source=str(tmp_path), layout="files",
                      images=[ImageFile(name, "sysupgrade", 40_000_000)], kernel_size=9_000_000,
                      fit=fit.evaluate(pi, kernel_size=9_000_000, rootfs_size=size))  # fmt: skip
        store.put(Record("build", f"pi-{flav}", "25.12.5", "rpi-5", flav,
                         build_data([], output=a, device="rpi-5", flavour=flav)))  # fmt: skip
    rep = sizereport.build(store=tmp_path / "results", device="rpi5")
    doc = json.loads(render(rep, "json"))
    (dev,) = doc["devices"]
    cells = dev["cells"]
    assert cells["mbedtls"]["limit"] == cells["openssl"]["limit"] == 104 * 1024 * 1024
    assert "root partition (ROOTFS_PARTSIZE 104 MiB" in cells["mbedtls"]["limit_name"]
    assert (cells["mbedtls"]["headroom"], cells["mbedtls"]["verdict"]) == (4096, "FITS")
    assert (cells["openssl"]["headroom"], cells["openssl"]["verdict"]) == (-1, "TOO_BIG")
    assert cells["openssl"]["erase_blocks"] is None
    md = render(rep, "markdown")
    limit_row = next(ln for ln in md.splitlines() if ln.startswith("| Limit"))
    assert "109,051,904 (root partition (ROOTFS_PARTSIZE 104 MiB" in limit_row
    image_row = next(ln for ln in md.splitlines() if ln.startswith("| Firmware image"))
    assert image_row.count("does not fit") == 1
