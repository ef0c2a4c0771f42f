"""The records of real OpenWrt builds committed under docs/records/ (docs/results.md "Real
OpenWrt: ath79"), read as a user redraws the tables from them: the store's own reader takes
every record, the size report draws the flash table from the store alone (the images and the
rootfs pieces are not in the repository), and each figure it draws is checked against the
files OpenWrt's own make wrote beside the images (profiles.json: each image's size and sha256;
sha256sums), committed beside the records. A record a later schema can no longer read, or a
record whose images are not the ones OpenWrt listed, fails here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openwrt_wolf.results.store import FileStore

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(p for p in (ROOT / "docs" / "records").iterdir() if (p / "store").is_dir())


def builds_with_openwrt_files(run: Path) -> list[tuple[str, str]]:
    """(profile, flavour) of every build whose OpenWrt files (openwrt/<profile>/<flavour>/)
    were committed."""
    return sorted((d.parent.name, d.name) for d in (run / "openwrt").glob("*/*") if d.is_dir())


def openwrt_file(run: Path, device: str, flavour: str, name: str) -> Path:
    return run / "openwrt" / device / flavour / name


def profile_images(run: Path, flavour: str, device: str) -> dict[str, dict[str, Any]]:
    profiles = json.loads(openwrt_file(run, device, flavour, "profiles.json").read_text())
    return {i["name"]: i for i in profiles["profiles"][device]["images"]}


def profile_limits(run: Path, flavour: str, device: str) -> dict[str, int]:
    profiles = json.loads(openwrt_file(run, device, flavour, "profiles.json").read_text())
    return dict(profiles["profiles"][device].get("file_size_limits", {}))


def sha256sums(run: Path, device: str, flavour: str) -> dict[str, str]:
    out = {}
    for line in openwrt_file(run, device, flavour, "sha256sums").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        out[name.lstrip("*")] = digest
    return out


def test_there_are_runs() -> None:
    assert RUNS, "docs/records/ holds no run"


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_each_build_record_s_images_are_the_ones_openwrt_listed(run: Path) -> None:
    builds = FileStore(run / "store").query("build")
    assert sorted((r.device or "", r.flavour or "") for r in builds) == builds_with_openwrt_files(
        run
    )
    for rec in builds:
        assert rec.device is not None and rec.flavour is not None
        images = profile_images(run, rec.flavour, rec.device)
        sums = sha256sums(run, rec.device, rec.flavour)
        arts = {a["name"]: a for a in rec.data["artifacts"]}
        assert images, f"{rec.flavour}: profiles.json lists no image"
        for name, img in images.items():
            assert (arts[name]["size"], arts[name]["sha256"]) == (img["size"], img["sha256"])
            assert sums[name] == img["sha256"]
        sysupgrade = next(i for i in images.values() if i["type"] == "sysupgrade")
        assert rec.data["fit"]["final_size"] == sysupgrade["size"]


REDRAWN = ("rootfs", "image", "erase_blocks", "padding", "limit", "headroom", "margin",
           "verdict", "factory_verdict", "factory_room")  # fmt: skip


def away(run: Path, tmp: Path) -> Path:
    """A copy of the run's store whose files' paths (every "path" field: the images, the
    kernel and rootfs pieces) lead nowhere, as on any other machine: the report must draw
    from the records alone."""

    def gone(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: str(tmp / "gone") + x if k == "path" and isinstance(x, str) else gone(x)
                    for k, x in v.items()}  # fmt: skip
        return [gone(x) for x in v] if isinstance(v, list) else v

    store = tmp / "store"
    for rec in (run / "store").rglob("*.json"):
        copy = store / rec.relative_to(run / "store")
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(json.dumps(gone(json.loads(rec.read_text()))))
    return store


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_the_size_report_redraws_the_flash_table_from_the_records(
    run: Path, tmp_path: Path
) -> None:
    """Without the images: each image size is OpenWrt's (profiles.json), OpenWrt's own size
    check is never stricter than our verdict, and every row the records hold equals the
    report made on the build machine with the rootfs pieces at hand (size-report.json)."""
    builds = FileStore(run / "store").query("build")
    devices = sorted({r.device for r in builds if r.device})
    out = tmp_path / "report.json"
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "size-report", "--store", str(away(run, tmp_path)),
         "--device", ",".join(devices), "--flavour", "all", "--format", "json",
         "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    drawn = cells(json.loads(out.read_text()))
    there = cells(json.loads((run / "size-report.json").read_text()))
    for rec in builds:
        assert rec.device is not None and rec.flavour is not None
        cell = drawn[(rec.device, rec.flavour)]
        images = profile_images(run, rec.flavour, rec.device)
        sysupgrade = next(i for i in images.values() if i["type"] == "sysupgrade")
        assert cell["image"] == sysupgrade["size"]
        # OpenWrt's own check (IMAGE_SIZE, profiles.json file_size_limits) is never stricter
        # than ours: an image we call fitting passes it too
        limit = profile_limits(run, rec.flavour, rec.device).get("image")
        if limit is not None:
            assert cell["limit"] <= limit
            if cell["verdict"] == "FITS":
                assert sysupgrade["size"] <= limit
        want = there[(rec.device, rec.flavour)]
        assert {k: cell[k] for k in REDRAWN} == {k: want[k] for k in REDRAWN}


def cells(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["profile"], f): c for d in report["devices"] for f, c in d["cells"].items()}


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_the_patch_set_s_wolfssl_image_holds_no_mbed_tls(run: Path) -> None:
    """The reference's first claim, on the committed records: OpenWrt's own manifest of the
    wolfSSL image (the record's copy of it) names no Mbed TLS package, and its profiles.json
    lists the patch set's defaults."""
    for rec in FileStore(run / "store").query("build", flavour="wolfssl"):
        assert rec.device is not None
        names = list(rec.data["manifest"])
        assert names and not [n for n in names if re.search("mbedtls", n)], names
        profiles = json.loads(openwrt_file(run, rec.device, "wolfssl", "profiles.json").read_text())
        assert not [p for p in profiles["default_packages"] if "mbedtls" in p]


TOO_BIG = sorted(p / "too-big" for p in RUNS if (p / "too-big").is_dir())


@pytest.mark.parametrize("store", TOO_BIG, ids=lambda p: p.parent.name)
def test_a_too_big_image_is_refused_as_openwrt_s_tools_refused_it(store: Path) -> None:
    """The oracle is what OpenWrt printed when it refused the image (tplink-safeloader's
    "file-system partition too big", then check-size stat-ing the file the recipe removed),
    kept in the record as OpenWrt's own lines: the fit predicts each of them, no other, and
    calls both images too big."""
    builds = FileStore(store).query("build")
    assert builds
    for rec in builds:
        fit = rec.data["fit"]
        printed = [re.sub(r"Image file \S+ is", "Image file ... is", w)
                   for w in rec.data["openwrt_warnings"]]  # fmt: skip
        notes = fit["notes"] + (fit.get("factory") or {}).get("notes", [])
        predicted = [n.removeprefix("OpenWrt would print: ") for n in notes
                     if n.startswith("OpenWrt would print: ")]  # fmt: skip
        assert printed and sorted(printed) == sorted(predicted)
        assert rec.data["image_deleted"] and fit["verdict"] == "TOO_BIG"
        assert fit["factory"]["verdict"] == "TOO_BIG"
        # tplink-safeloader's file-system partition is what the firmware partition leaves
        # past the kernel: the bytes it printed are our limit less the kernel
        fs_max = int(re.search(r"more than (\d+) bytes", printed[0])[1])  # type: ignore[index]
        assert fit["limit"] - fit["kernel_size"] == fs_max


WHATIF = sorted(p / "what-if" for p in RUNS if (p / "what-if").is_dir())


@pytest.mark.parametrize("folder", WHATIF, ids=lambda p: p.parent.name)
def test_what_if_between_real_images_is_the_real_imagebuilder_s_rootfs(folder: Path) -> None:
    """what-if from each real image to each other flavour (docs/results.md): the predicted
    squashfs's sha256 and size are those of the rootfs the real ImageBuilder made for that
    flavour (its build record), and the predicted sysupgrade size is the one OpenWrt's make
    listed in profiles.json."""
    builds = {(r.data["device"], r.data["flavour"]): r.data
              for r in FileStore(folder.parent / "store").query("build")}  # fmt: skip
    seen = set()
    for f in sorted(folder.glob("*.json")):
        w = json.loads(f.read_text())["what_if"]
        device, frm, to = w["profile"], w["flavour_from"], w["flavour_to"]
        assert frm != to and (device, frm) in builds, f.name
        real = builds[(device, to)]
        (rootfs,) = [a for a in real["artifacts"] if a["type"] == "rootfs"]
        assert (w["rootfs_to_sha256"], w["rootfs_to"]) == (rootfs["sha256"], rootfs["size"]), f
        images = profile_images(folder.parent, to, device)
        sysupgrade = next(i for n, i in images.items() if n.endswith("sysupgrade.bin"))
        assert w["fit_to"]["final_size"] == sysupgrade["size"], f.name
        seen.add((device, frm, to))
    devices = {d for d, _ in builds}
    flavours = ("mbedtls", "wolfssl", "openssl")
    assert seen == {(d, a, b) for d in devices for a in flavours for b in flavours if a != b}
