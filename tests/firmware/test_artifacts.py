"""Artifact measurement against independent oracles: unsquashfs -s for rootfs sizes, the xz
command (xz -9e) for library sizes, stat for files, the tests' own image assembly."""

from __future__ import annotations

import hashlib
import lzma
import shutil
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.firmware import artifacts, rootfs
from tests.conftest import need_tools
from tests.sqfs_kit import (
    FLAVOUR_LIBS,
    GLUE,
    ath79_sysupgrade,
    gzip_padded,
    make_tree,
    mksquashfs,
    profiles_json,
    uimage_kernel,
    unsquashfs_size,
    xz9e_size,
)

WR902 = "tplink_tl-wr902ac-v1"
AR300 = "glinet_gl-ar300m16"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def mbedtls_fs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    need_tools("mksquashfs", "unsquashfs", "xz")
    d = tmp_path_factory.mktemp("mbedtls")
    tree = make_tree(d / "root", "mbedtls", seed=5)
    return tree, mksquashfs(tree, d / "root.squashfs")


def test_tls_libraries_sizes_and_xz_match_stat_and_xz_9e(mbedtls_fs: tuple[Path, Path]) -> None:
    tree, image = mbedtls_fs
    info = rootfs.measure_rootfs(image)
    assert info.size == unsquashfs_size(image)
    want = {**FLAVOUR_LIBS["mbedtls"], **GLUE}
    assert {lib.path for lib in info.tls_libraries} == set(want)  # symlinks not counted twice
    for lib in info.tls_libraries:
        src = tree / lib.path.lstrip("/")
        assert lib.size == src.stat().st_size
        assert lib.xz_size == xz9e_size(src.read_bytes()), lib.path
        assert lib.group == ("glue" if "ustream" in lib.path else "mbedtls")
    owners = {lib.path: lib.package for lib in info.tls_libraries}
    assert owners["/lib/libustream-ssl.so"] == "libustream-mbedtls"
    assert info.flavour_guess() == "mbedtls"


def test_per_package_bytes_are_the_sizes_of_the_listed_files(
    mbedtls_fs: tuple[Path, Path],
) -> None:
    tree, image = mbedtls_fs
    info = rootfs.measure_rootfs(image)
    assert info.package_source == "/lib/apk/packages/*.list"
    lists = tree / "lib/apk/packages"
    for p in info.packages:
        paths = (lists / f"{p.name}.list").read_text().split()
        assert p.files == len(paths)
        assert p.size == sum((tree / x.lstrip("/")).stat().st_size for x in paths)
        assert 0 < p.stored_size <= unsquashfs_size(image)
    assert sum(p.stored_size for p in info.packages) < unsquashfs_size(image)


def test_repeated_measurement_comes_from_the_cache_until_the_file_changes(
    mbedtls_fs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = shutil.copy(mbedtls_fs[1], tmp_path / "copy.squashfs")
    first = rootfs.measure_rootfs(Path(image))

    def boom(*a: object, **k: object) -> bytes:
        raise AssertionError("compressed again")

    monkeypatch.setattr(lzma, "compress", boom)
    monkeypatch.setattr(rootfs, "SquashFS", boom)
    assert rootfs.measure_rootfs(Path(image)) == first
    Path(image).touch()  # new mtime: the cached result no longer applies
    with pytest.raises(AssertionError, match="compressed again"):
        rootfs.measure_rootfs(Path(image))


def _profile(name: str, size: int | None, limits: dict[str, int] | None) -> dict[str, object]:
    img: dict[str, object] = {"type": "sysupgrade", "name": name, "sha256": "0" * 64,
                              "filesystem": "squashfs"}  # fmt: skip
    if size is not None:
        img["size"] = size
    spec: dict[str, object] = {
        "image_prefix": name.rsplit("-squashfs", 1)[0],
        "images": [img],
        "device_packages": [],
        "supported_devices": [],
        "titles": [],
    }
    if limits is not None:
        spec["file_size_limits"] = limits
    return spec


def test_2512_dir_deleted_image_is_measured_from_kernel_and_rootfs_pieces(
    mbedtls_fs: tuple[Path, Path], tmp_path: Path
) -> None:
    need_tools("mkimage")
    out = tmp_path / "bin/targets/ath79/generic"
    out.mkdir(parents=True)
    kernel = uimage_kernel(out / f"{WR902}-kernel.bin", 1_900_000)
    root = shutil.copy(mbedtls_fs[1], out / "root.squashfs")
    name = f"openwrt-25.12.5-ath79-generic-{WR902}-squashfs-sysupgrade.bin"
    # listed with a size, but the file is gone (as when check-size deleted it)
    profiles_json(out / "profiles.json", "25.12.5", "ath79/generic",
                  {WR902: _profile(name, 7_340_322, {"image": 7_536_640})})  # fmt: skip
    (a,) = artifacts.measure_dir(out)
    assert a.layout == "profiles.json 25.12"
    assert a.release == "25.12.5" and a.target == "ath79/generic"
    assert a.images[0].size == 7_340_322 and a.images[0].source == "profiles.json"
    assert a.file_size_limits == {"image": 7_536_640}
    assert a.kernel_size == kernel.stat().st_size
    assert a.rootfs is not None and a.rootfs.size == unsquashfs_size(Path(root))
    assert a.fit is not None
    assert (a.fit.kernel_size, a.fit.rootfs_size) == (a.kernel_size, a.rootfs.size)
    assert a.flavour == "mbedtls"


def test_2410_profiles_json_without_sizes_falls_back_to_measuring_files(
    mbedtls_fs: tuple[Path, Path], tmp_path: Path
) -> None:
    need_tools("mkimage")
    out = tmp_path / "out"
    out.mkdir()
    kernel = uimage_kernel(tmp_path / "kernel.bin", 1_500_000)
    name = f"openwrt-24.10.8-ath79-generic-{AR300}-squashfs-sysupgrade.bin"
    image = ath79_sysupgrade(kernel, mbedtls_fs[1], out / name)
    profiles_json(out / "profiles.json", "24.10.8", "ath79/generic",
                  {AR300: _profile(name, None, None)})  # fmt: skip
    (a,) = artifacts.measure_dir(out)  # not an error
    assert a.layout == "profiles.json 24.10"
    assert a.images[0].size == image.stat().st_size and a.images[0].source == "file"
    assert any("no image sizes" in n for n in a.notes)
    assert a.kernel_size == kernel.stat().st_size
    assert a.rootfs is not None and a.rootfs.size == unsquashfs_size(mbedtls_fs[1])
    assert a.split is not None and a.split["rootfs_offset"] % 65536 == 0
    assert a.fit is not None and a.fit.verdict == "FITS"  # 16000k of flash, ~4 MB used


def test_a_sysupgrade_image_alone_is_enough(mbedtls_fs: tuple[Path, Path], tmp_path: Path) -> None:
    need_tools("mkimage")
    kernel = uimage_kernel(tmp_path / "kernel.bin", 1_200_000)
    image = ath79_sysupgrade(kernel, mbedtls_fs[1], tmp_path / f"x-{AR300}-squashfs-sysupgrade.bin")
    (a,) = artifacts.measure(image)
    assert a.profile == AR300 and a.layout == "image"
    assert a.kernel_size == kernel.stat().st_size
    assert a.rootfs is not None and a.rootfs.size == unsquashfs_size(mbedtls_fs[1])
    assert {lib.path for lib in a.rootfs.tls_libraries} >= set(FLAVOUR_LIBS["mbedtls"])


def test_legacy_malta_dir_without_json(mbedtls_fs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "malta"
    out.mkdir()
    gzip_padded(mbedtls_fs[1], out / "openwrt-malta-be-rootfs-squashfs.img.gz", 8 << 20)
    elf = out / "openwrt-malta-be-vmlinux-initramfs.elf"
    elf.write_bytes(b"\x7fELF" + bytes(5000))
    (a,) = artifacts.measure_dir(out)
    assert a.profile == "malta-be" and a.layout == "files"
    assert a.rootfs is not None and a.rootfs.size == unsquashfs_size(mbedtls_fs[1])
    assert {i.type: i.size for i in a.images}["initramfs-kernel"] == 5004
    assert a.fit is None  # no flash


def test_missing_output_directory_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WolfError, match=r"output directory not found: .*nope"):
        artifacts.measure(tmp_path / "nope")


def test_non_squashfs_rootfs_piece_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / f"{WR902}-kernel.bin").write_bytes(bytes(1000))
    (tmp_path / "root.squashfs").write_bytes(b"UBI#" + bytes(4096))
    with pytest.raises(WolfError, match=r"root\.squashfs: no squashfs at offset 0x0"):
        artifacts.measure_dir(tmp_path)


def test_dir_with_only_kdir_pieces_and_no_json(
    mbedtls_fs: tuple[Path, Path], tmp_path: Path
) -> None:
    kernel = tmp_path / f"{WR902}-kernel.bin"
    kernel.write_bytes(bytes(1_234_567))
    shutil.copy(mbedtls_fs[1], tmp_path / "root.squashfs")
    (a,) = artifacts.measure_dir(tmp_path)
    assert (a.profile, a.layout) == (WR902, "files")
    assert a.kernel_size == 1_234_567
    assert a.rootfs is not None and a.rootfs.size == unsquashfs_size(mbedtls_fs[1])


def test_a_bare_rootfs_gives_the_rootfs_rows_only(mbedtls_fs: tuple[Path, Path]) -> None:
    (a,) = artifacts.measure(mbedtls_fs[1])
    assert a.layout == "rootfs" and a.fit is None and a.kernel_size is None
    assert a.rootfs is not None and a.rootfs.size == unsquashfs_size(mbedtls_fs[1])
    assert a.flavour == "mbedtls"


def test_an_unstripped_library_is_flagged(tmp_path: Path) -> None:
    need_tools("gcc", "mksquashfs")
    src = tmp_path / "tls.c"
    src.write_text(
        "int wolfSSL_Init(void) { return 1; }\nint wolfSSL_Cleanup(void) { return 0; }\n"
    )
    root = tmp_path / "root/usr/lib"
    root.mkdir(parents=True)
    for name, flags in (("libwolfssl.so.5", []), ("libmbedtls.so.21", ["-s"])):
        subprocess.run(["gcc", "-shared", "-fPIC", *flags, "-o", str(root / name), str(src)],
                       check=True)  # fmt: skip
    info = rootfs.measure_rootfs(mksquashfs(tmp_path / "root", tmp_path / "r.squashfs"))
    got = {lib.path: lib.stripped for lib in info.tls_libraries}
    # gcc -s strips the symbol table; without it the library keeps .symtab
    assert got == {"/usr/lib/libwolfssl.so.5": False, "/usr/lib/libmbedtls.so.21": True}


def test_manifest_packages_with_their_archive_sizes(
    mbedtls_fs: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    out = bin_dir / "targets/ath79/generic"
    (out / "packages").mkdir(parents=True)
    shutil.copy(mbedtls_fs[1], out / "root.squashfs")
    (out / f"{WR902}-kernel.bin").write_bytes(bytes(1000))
    prefix = f"openwrt-25.12.5-ath79-generic-{WR902}"
    (out / f"{prefix}.manifest").write_text(
        "kmod-usb2 - 6.12.94-r1\nlibmbedtls21 - 3.6.6-r1\nlibustream-mbedtls - 2025.10.1-r1\n"
    )
    (out / "packages/kmod-usb2-6.12.94-r1.apk").write_bytes(bytes(4321))
    feed = bin_dir / "packages/mips_24kc/base"
    feed.mkdir(parents=True)
    (feed / "libmbedtls21-3.6.6-r1.apk").write_bytes(bytes(98765))
    (a,) = artifacts.measure_dir(out)
    got = {p.name: (p.version, p.size) for p in a.manifest}
    assert got == {
        "kmod-usb2": ("6.12.94-r1", 4321),
        "libmbedtls21": ("3.6.6-r1", 98765),
        "libustream-mbedtls": ("2025.10.1-r1", None),
    }


def test_opkg_package_lists_of_2410(tmp_path: Path) -> None:
    need_tools("mksquashfs")
    tree = make_tree(tmp_path / "root", "wolfssl", seed=9, packages="opkg")
    info = rootfs.measure_rootfs(mksquashfs(tree, tmp_path / "r.squashfs"))
    assert info.package_source == "/usr/lib/opkg/info/*.list"
    sizes = {p.name: p.size for p in info.packages}
    lib = tree / "usr/lib/libwolfssl.so.5.9.1.ee39414e"
    assert sizes["libwolfssl5.9.1.ee39414e"] == lib.stat().st_size
    assert info.flavour_guess() == "wolfssl"


def test_unreadable_profiles_json_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "profiles.json").write_text('{"target": "ath79/generic", "profiles": [')
    with pytest.raises(WolfError, match=r"profiles\.json .*profiles\.json: not JSON"):
        artifacts.measure_dir(tmp_path)


def test_output_files_typed_by_profiles_json_with_openwrts_sha256sums(tmp_path: Path) -> None:
    """A build's file list: image types from the profile's profiles.json entry (not from the
    file names), the other files by what they are, sha256sums entries as OpenWrt wrote them
    ('<hex> *<name>'); the digests checked here with hashlib."""
    pre = "openwrt-25.12.5-ath79-generic"
    files = {
        f"{pre}-{WR902}-squashfs-sysupgrade.bin": b"image",
        f"{pre}-{WR902}-initramfs-kernel.bin": b"initramfs",
        f"{pre}-{AR300}-squashfs-sysupgrade.bin": b"another profile's image",
        f"{pre}-{WR902}.manifest": b"busybox - 1.37.0-r1\n",
        "kernel-piece.bin": b"skipped",
        "notes.txt": b"x",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "sub").mkdir()  # a directory is not a file of the build
    images = [{"name": f"{pre}-{WR902}-squashfs-sysupgrade.bin", "type": "sysupgrade"},
              {"name": f"{pre}-{WR902}-initramfs-kernel.bin", "type": "kernel"}]  # fmt: skip
    profiles_json(tmp_path / "profiles.json", "25.12.5", "ath79/generic",
                  {WR902: {"images": images}, AR300: {"images": []}})  # fmt: skip
    good = hashlib.sha256(b"image").hexdigest()
    (tmp_path / "sha256sums").write_text(
        f"{good} *{pre}-{WR902}-squashfs-sysupgrade.bin\n{'0' * 64} *notes.txt\n"
    )
    got = {
        f.path.name: (f.type, f.listed_sha256)
        for f in artifacts.output_files(tmp_path, WR902, skip=("kernel-piece.bin",))
    }
    assert got == {
        f"{pre}-{WR902}-squashfs-sysupgrade.bin": ("sysupgrade", good),
        f"{pre}-{WR902}-initramfs-kernel.bin": ("kernel", None),  # profiles.json's word
        f"{pre}-{AR300}-squashfs-sysupgrade.bin": ("other", None),  # not this profile's
        f"{pre}-{WR902}.manifest": ("manifest", None),
        "notes.txt": ("other", "0" * 64),
        "profiles.json": ("profiles.json", None),
        "sha256sums": ("sha256sums", None),
    }


def test_armsr_output_fits_its_root_partition(
    mbedtls_fs: tuple[Path, Path], tmp_path: Path
) -> None:
    """An armsr/armv8 output directory as OpenWrt 25.12.5 leaves it (profiles.json types
    combined-efi for squashfs and ext4, the rootfs piece *-squashfs-rootfs.img.gz): the limit
    is ROOTFS_PARTSIZE (104 MiB), the headroom that less the squashfs's bytes_used (unsquashfs
    -s), and the firmware image the squashfs disk image sysupgrade writes, not the ext4 one."""
    out = tmp_path / "bin/targets/armsr/armv8"
    out.mkdir(parents=True)
    pre = "openwrt-25.12.5-armsr-armv8-generic"
    gzip_padded(mbedtls_fs[1], out / f"{pre}-squashfs-rootfs.img.gz", 1 << 20)
    disks = {"squashfs": 12_846_162, "ext4": 13_869_884}
    images: list[dict[str, object]] = []
    for fs, size in disks.items():
        (out / f"{pre}-{fs}-combined-efi.img.gz").write_bytes(bytes(size))
        images.append({"type": "combined-efi", "filesystem": fs, "sha256": "0" * 64,
                       "name": f"{pre}-{fs}-combined-efi.img.gz", "size": size})  # fmt: skip
    images.append({"type": "rootfs", "filesystem": "squashfs", "sha256": "0" * 64,
                   "name": f"{pre}-squashfs-rootfs.img.gz"})  # fmt: skip
    profiles_json(out / "profiles.json", "25.12.5", "armsr/armv8",
                  {"generic": {"image_prefix": pre, "images": images, "device_packages": [],
                               "supported_devices": [], "titles": []}})  # fmt: skip
    (a,) = artifacts.measure_dir(out)
    assert a.rootfs is not None and a.rootfs.size == unsquashfs_size(mbedtls_fs[1])
    assert a.fit is not None and a.fit.limit == 104 * 1024 * 1024
    assert "ROOTFS_PARTSIZE 104 MiB" in (a.fit.limit_name or "")
    assert a.fit.margin == 104 * 1024 * 1024 - a.rootfs.size and a.fit.verdict == "FITS"
    assert a.upgrade_image is not None and a.upgrade_image.size == disks["squashfs"]
