"""The index the main job writes beside the SDK's packages (build/driver.py _index_packages),
with apk-tools 3.0.5 itself (the stand-in kit's host apk, as an ImageBuilder's staging_dir has
it): a directory apk indexes gets packages.adb listing exactly its packages; one apk refuses
(a damaged package) leaves no index and one line saying why, and the job goes on: by then the
images are made and measured."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from openwrt_wolf.build import driver
from openwrt_wolf.build.imagebuilder import ImageBuilder


def imagebuilder_with(apk: Path, top: Path) -> ImageBuilder:
    (top / "staging_dir" / "host" / "bin").mkdir(parents=True)
    (top / "Makefile").write_text("# an ImageBuilder's top: only its apk is used here\n")
    (top / "staging_dir" / "host" / "bin" / "apk").symlink_to(apk)
    return ImageBuilder(top)


def mkpkg(apk: Path, out: Path, name: str, version: str) -> None:
    files = out / f".files-{name}"
    (files / "usr" / "lib").mkdir(parents=True)
    (files / "usr" / "lib" / f"{name}.so").write_bytes(b"\x7fELF" + name.encode())
    argv = [str(apk), "mkpkg", "--info", f"name:{name}", "--info", f"version:{version}",
            "--info", "arch:mips_24kc", "--files", str(files), "--output",
            str(out / f"{name}-{version}.apk")]  # fmt: skip
    subprocess.run(argv, check=True, capture_output=True, timeout=120)


def listed(apk: Path, index: Path) -> set[str]:
    argv = [str(apk), "adbdump", "--format", "json", str(index)]
    dump = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    return {f"{p['name']}-{p['version']}.apk" for p in json.loads(dump.stdout)["packages"]}


def test_the_sdk_s_packages_get_an_index_apk_reads(standin_kit: Any, tmp_path: Path) -> None:
    ib = imagebuilder_with(standin_kit.apk, tmp_path / "ib")
    pkgs = tmp_path / "packages"
    pkgs.mkdir()
    mkpkg(standin_kit.apk, pkgs, "libwolfssl5.9.2", "5.9.2-r1")
    mkpkg(standin_kit.apk, pkgs, "libustream-wolfssl20201210", "2024.07.28-r1")
    index, why = driver._index_packages(ib, pkgs)
    assert why is None and index == pkgs / "packages.adb"
    assert listed(standin_kit.apk, index) == {p.name for p in pkgs.glob("*.apk")}


def test_a_package_apk_refuses_leaves_no_index_and_says_why(
    standin_kit: Any, tmp_path: Path
) -> None:
    ib = imagebuilder_with(standin_kit.apk, tmp_path / "ib")
    pkgs = tmp_path / "packages"
    pkgs.mkdir()
    mkpkg(standin_kit.apk, pkgs, "libwolfssl5.9.2", "5.9.2-r1")
    (pkgs / "evil-1-r1.apk").write_bytes(b"ADB." + bytes(range(256)) * 8)  # not a package
    index, why = driver._index_packages(ib, pkgs)
    assert index is None and not (pkgs / "packages.adb").exists()
    assert why is not None and "\n" not in why and "packages.adb" in why
    assert "what-if --packages" in why and "exit" in why
