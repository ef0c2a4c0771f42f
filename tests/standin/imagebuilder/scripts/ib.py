#!/usr/bin/env python3
"""The work behind the stand-in ImageBuilder's Makefile (openwrt-wolf tests only).

Mirrors what OpenWrt's ImageBuilder does and prints, in OpenWrt's words:
- `make info`: _call_info's "Current Target / Default Packages / Available Profiles" text;
- the BUILD_PACKAGES arithmetic of target/imagebuilder/files/Makefile ("-pkg" removes);
- apk's resolver errors ("unable to select packages", "no such package", "conflicts:",
  "trying to overwrite ... owned by ...");
- `make manifest`: "name - version" lines (make-index-json.py --manifest);
- `make image`: root.squashfs in $(KDIR), the recipe in $(KDIR)/tmp, check-size's
  "    WARNING: Image file <f> is too big: <size> > <limit>" and deletion, cp to BIN_DIR,
  profiles.json as json_add_image_info.py/json_overview_image_info.py write it,
  sha256sums as rules.mk's sha256sums writes it ("<hash> *<name>").
Images are assembled from real files with mksquashfs, dd and the kernel pieces shipped in
$(KDIR) (uImage made with mkimage when the stand-in tree was generated).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import time
import zlib
from pathlib import Path

TOP = Path(os.environ.get("TOPDIR") or Path(__file__).resolve().parent.parent)
INFO = json.loads((TOP / ".standin.json").read_text())
PREREQ = ("mksquashfs", "dd", "mkimage")


def build_dir() -> Path:
    return TOP / "build_dir" / f"target-{INFO['arch_packages']}_musl"


def kdir() -> Path:
    return build_dir() / f"linux-{INFO['target']}_{INFO['subtarget']}"


def target_dir() -> Path:
    return build_dir() / f"root-{INFO['target']}"


def default_bin_dir() -> Path:
    return TOP / "bin" / "targets" / INFO["target"] / INFO["subtarget"]


def err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def args(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for a in argv:
        k, _, v = a.partition("=")
        out[k] = v
    return out


def sanitize(s: str) -> str:
    # include/image.mk: sanitize = tolower, spaces and "_" to "-"
    return s.lower().replace(" ", "-").replace("_", "-")


def img_prefix(extra: str) -> str:
    vernum = f"{INFO['version']}-" if INFO.get("version_filenames", True) else ""
    extra_p = f"{sanitize(extra)}-" if extra else ""
    return f"openwrt-{vernum}{extra_p}{INFO['target']}-{INFO['subtarget']}"


def packages_index() -> dict[str, dict[str, object]]:
    """The shipped index, plus packages dropped into packages/ (an SDK's output): like
    package_reload, which regenerates the index when packages/ has newer files."""
    idx = json.loads((TOP / "packages" / "index.json").read_text())
    known = {p["file"] for p in idx}
    local = [f for f in sorted((TOP / "packages").glob("*.apk")) if f.name not in known]
    if local:
        print("Package list missing or not up-to-date, generating it.", file=sys.stderr)
    for f in local:
        with tarfile.open(f) as tar:
            member = tar.extractfile(".PKGINFO")
            if member is None:
                continue
            meta = json.loads(member.read())
        idx.append({**meta, "file": f.name})
    return {p["name"]: p for p in idx}


def build_packages(profile: str, user: list[str]) -> list[str]:
    """BUILD_PACKAGES exactly as the ImageBuilder Makefile computes it."""

    def filter_out(pkgs: list[str]) -> list[str]:
        removed = {p[1:] for p in pkgs if p.startswith("-")}
        drop = removed | {f"-{r}" for r in removed}
        return [p for p in pkgs if p not in drop]

    prof = INFO["profiles"][profile]
    base = sorted(set(INFO["default_packages"] + prof["device_packages"] + ["kernel"]))
    base = filter_out(base)
    out = filter_out(user + base)
    seen: list[str] = []
    for p in out:
        if p not in seen:
            seen.append(p)
    return seen


def resolve(world: list[str]) -> list[dict[str, object]]:
    """apk add's selection: the closure over depends; apk's messages on failure."""
    idx = packages_index()
    provides: dict[str, str] = {}
    for name, p in idx.items():
        for v in p.get("provides", []):  # type: ignore[union-attr]
            provides.setdefault(str(v), name)
    missing: list[str] = []
    chosen: dict[str, str] = {}  # name -> what required it
    todo = [(w, "world") for w in world]
    while todo:
        want, by = todo.pop(0)
        name = want if want in idx else provides.get(want)
        if name is None:
            if want not in missing:
                missing.append(want)
                err_by = f"world[{want}]" if by == "world" else f"{by}[{want}]"
                chosen.setdefault(f"!missing:{want}", err_by)
            continue
        if name in chosen:
            continue
        chosen[name] = f"world[{want}]" if by == "world" else f"{by}[{want}]"
        for d in idx[name].get("depends", []):  # type: ignore[union-attr]
            todo.append((str(d), f"{name}-{idx[name]['version']}"))
    lines: list[str] = []
    for m in missing:
        lines += [f"  {m} (no such package):", f"    required by: {chosen[f'!missing:{m}']}"]
    names = [n for n in chosen if not n.startswith("!")]
    for n in names:
        p = idx[n]
        for c in p.get("conflicts", []):  # type: ignore[union-attr]
            other = str(c) if str(c) in idx else provides.get(str(c))
            if other in names and other != n:
                o = idx[other]  # type: ignore[index]
                lines += [
                    f"  {n}-{p['version']}:",
                    f"    conflicts: {other}-{o['version']}[{c}]",
                    f"    satisfies: {chosen[n]}",
                ]
    if lines:
        err("ERROR: unable to select packages:")
        for line in lines:
            err(line)
        raise SystemExit(1)
    return [idx[n] for n in names]


def cmd_help() -> None:
    print("Available Commands:")
    for t in ("help", "info", "clean", "image", "manifest", "package_list"):
        print(f"\t{t}")


def cmd_info() -> None:
    print(f'Current Target: "{INFO["target"]}/{INFO["subtarget"]}"')
    print(f'Current Architecture: "{INFO["arch"]}"')
    print(f'Current Revision: "{INFO["version_code"]}"')
    print(f"Default Packages: {' '.join(INFO['default_packages'])}")
    print("Available Profiles:")
    print()
    for pid, p in INFO["profiles"].items():
        print(f"{pid}:")
        print(f"    {p['title']}")
        print(f"    Packages: {' '.join(p['device_packages'])}")
        print("    hasImageMetadata: 1")
        print(f"    SupportedDevices: {' '.join(p['supported_devices'])}")


def check_profile(profile: str) -> None:
    if profile and profile not in INFO["profiles"]:
        print(f'Profile "{profile}" does not exist!')
        print('Use "make info" to get a list of available profile names.')
        raise SystemExit(1)


def user_profile(a: dict[str, str]) -> str:
    return a.get("PROFILE") or next(iter(INFO["profiles"]))


def install(pkgs: list[dict[str, object]], root: Path) -> None:
    owners: dict[str, str] = {}
    n = len(pkgs)
    for i, p in enumerate(pkgs, 1):
        print(f"({i}/{n}) Installing {p['name']} ({p['version']})", flush=True)
        with tarfile.open(TOP / "packages" / str(p["file"])) as tar:
            members = [m for m in tar.getmembers() if m.name != ".PKGINFO"]
            for m in members:
                if m.isfile() and m.name in owners:
                    err(
                        f"ERROR: {p['name']}-{p['version']}: trying to overwrite "
                        f"{m.name} owned by {owners[m.name]}."
                    )
                    raise SystemExit(1)
                owners[m.name] = f"{p['name']}-{p['version']}"
            try:
                tar.extractall(root, members, filter="tar")
            except TypeError:  # Python without extraction filters
                tar.extractall(root, members)


def cmd_manifest(a: dict[str, str]) -> None:
    profile = user_profile(a)
    check_profile(profile)
    pkgs = resolve(build_packages(profile, a.get("PACKAGES", "").split()))
    for p in sorted(pkgs, key=lambda p: str(p["name"])):
        print(f"{p['name']} - {p['version']}")


def run(argv: list[str]) -> None:
    print(" ".join(argv), flush=True)
    subprocess.run(argv, check=True)


def mksquashfs(root: Path, out: Path, block: int) -> None:
    # OpenWrt's own mksquashfs4 adds -Xpreset 9 -Xe -Xlc 0 -Xlp 2 -Xpb 2; Debian's 4.5 does
    # not know those xz options, so the stand-in uses plain xz.
    run(
        [
            "mksquashfs",
            str(root),
            str(out),
            "-nopad",
            "-noappend",
            "-root-owned",
            "-comp",
            "xz",
            "-b",
            f"{block // 1024}k",
            "-p",
            "/dev d 755 0 0",
            "-p",
            "/dev/console c 600 0 0 5 1",
            "-no-xattrs",
            "-processors",
            "1",
            "-quiet",
            "-no-progress",
        ]
    )


def pad_to(path: Path, n: int) -> None:
    # Build/pad-to: dd bs=N conv=sync (zero-fills the last block)
    size = path.stat().st_size
    want = -(-size // n) * n
    with path.open("ab") as f:
        f.write(b"\0" * (want - size))


def pad_rootfs(path: Path, block: int) -> None:
    # Build/pad-rootfs (padjffs2): 0xff to the next erase block, then the JFFS2 end marker
    size = path.stat().st_size
    want = -(-size // block) * block
    with path.open("ab") as f:
        f.write(b"\xff" * (want - size))
        f.write(b"\xde\xad\xc0\xde")


def append_metadata(path: Path, profile: str) -> None:
    # Build/append-metadata: fwtool's metadata chunk: an 8-byte header and the JSON, then the
    # 16-byte trailer "FWx0" | crc32 of the file so far (seeded 0xffffffff, not inverted) |
    # type 1 | 3 pad | chunk size
    meta = {
        "metadata_version": "1.1",
        "compat_version": "1.0",
        "supported_devices": INFO["profiles"][profile]["supported_devices"],
        "version": {
            "dist": "OpenWrt",
            "version": INFO["version"],
            "revision": INFO["version_code"],
            "target": f"{INFO['target']}/{INFO['subtarget']}",
            "board": profile,
        },
    }
    chunk = bytes(8) + json.dumps(meta, separators=(",", ":")).encode()
    with path.open("ab") as f:
        f.write(chunk)
    crc = zlib.crc32(path.read_bytes()) ^ 0xFFFFFFFF
    with path.open("ab") as f:
        f.write(struct.pack(">4sIB3xI", b"FWx0", crc, 1, len(chunk) + 16))


def check_size(path: Path, limit: int) -> bool:
    size = path.stat().st_size
    if limit >= size:
        return True
    err(f"    WARNING: Image file {path} is too big: {size} > {limit}")
    path.unlink()
    return False


def tool_failed(out: Path) -> None:
    """A firmware tool exited 1 inside the image recipe: make removes the half-made target,
    stops, and `make image` fails (the ImageBuilder runs the image Makefile without -k)."""
    out.unlink(missing_ok=True)
    err(f"make[3]: *** [Makefile: {out}] Error 1")
    err("make[2]: *** [Makefile: build_image] Error 2")
    raise SystemExit(2)


def assemble(profile: str, kernel: Path, rootfs: Path, out: Path) -> bool:
    prof = INFO["profiles"][profile]
    recipe = prof["recipe"]
    bs = prof["blocksize"]
    if recipe == "ath79-default":
        # append-kernel | pad-to $(BLOCKSIZE) | append-rootfs | pad-rootfs | check-size
        # | append-metadata
        shutil.copyfile(kernel, out)
        pad_to(out, bs)
        with out.open("ab") as f:
            f.write(rootfs.read_bytes())
        pad_rootfs(out, bs)
    elif recipe == "tplink-safeloader":
        # append-rootfs | tplink-safeloader sysupgrade: the file-system partition starts right
        # after the kernel inside the firmware partition, is 64 KiB aligned at its absolute
        # address and ends with the JFFS2 marker; os-image then file-system, no header
        k, r = kernel.read_bytes(), rootfs.read_bytes()
        fw_ofs, fw_size = prof["firmware_partition"]
        fs_base = fw_ofs + len(k)
        fs_len = -(-(len(r) + fs_base) // 0x10000) * 0x10000 + 4 - fs_base
        fs_max = fw_size - fs_base
        if fs_len > fs_max:
            err(f"tplink-safeloader: file-system partition too big (more than {fs_max} bytes)")
            tool_failed(out)
        with out.open("wb") as f:
            f.write(k + r + b"\xff" * (fs_len - 4 - len(r)) + b"\xde\xad\xc0\xde")
    elif recipe == "tplink-v2":
        # tplink-v2-image -s -e (mktplinkfw2 -a 0x4 -j): 512-byte header, kernel, rootfs at
        # a 4-byte boundary, JFFS2 markers at the 4 KiB then 64 KiB boundary while room is left
        k, r = kernel.read_bytes(), rootfs.read_bytes()
        fw_max = prof["fw_max_len"]
        exceed = 0x200 + len(k) + len(r) - fw_max
        if exceed > 0:
            err(f"[mktplinkfw2] *** error: images are too big by {exceed} bytes")
            tool_failed(out)
        ofs = -(-(0x200 + len(k)) // 4) * 4
        body = bytearray(bytes(0x200) + k + bytes(ofs - 0x200 - len(k)) + r)
        masks = [4096, 65536]
        while len(body) < fw_max and masks:
            m = min(masks)
            body += b"\xff" * (-len(body) % m)
            masks = [x for x in masks if len(body) % x]
            body += b"\xde\xad\xc0\xde"
        # mktplinkfw2's header: -T version, fw version, hw id/rev/add, 0x55aa and 0xa5 marks,
        # kernel_la, kernel_ep, fw_length, kernel_ofs/len, rootfs_ofs/len; MD5 at 0x40 over
        # the whole image with the salt in its place
        body[0] = prof["tplink_hversion"]
        body[4:14] = b"ver. 2.0.0"
        struct.pack_into(
            ">III", body, 0x34, prof["tplink_hwid"], prof["tplink_hwrev"], prof["tplink_hwrevadd"]
        )
        body[0x8C:0x8E] = b"\x55\xaa"
        body[0x90] = 0xA5
        struct.pack_into(
            ">7I", body, 0x68, 0x80000000, 0x80000000, len(body), 0x200, len(k), ofs, len(r)
        )
        salt = bytes.fromhex("dcd73aa5c39598fbdcf9e7f40eae4737")
        body[0x40:0x50] = hashlib.md5(bytes(body[:0x40]) + salt + bytes(body[0x50:])).digest()
        out.write_bytes(bytes(body))
    else:
        err(f"stand-in: no recipe {recipe}")
        raise SystemExit(2)
    if not check_size(out, prof["image_size"]):
        return False
    append_metadata(out, profile)
    return True


def json_info(profile: str, name: str, path: Path, prefix: str) -> dict[str, object]:
    prof = INFO["profiles"][profile]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    limits = {"image": prof["image_size"]}
    if prof.get("kernel_size"):
        limits["kernel"] = prof["kernel_size"]
    return {
        "image_prefix": prefix,
        "images": [
            {
                "type": "sysupgrade",
                "name": name,
                "sha256": digest,
                "sha256_unsigned": digest,
                "size": path.stat().st_size,
                "filesystem": "squashfs",
            }
        ],
        "device_packages": prof["device_packages"],
        "supported_devices": prof["supported_devices"],
        "titles": [{"vendor": prof["vendor"], "model": prof["model"], "variant": prof["variant"]}],
        "file_size_limits": limits,
    }


def sha256sums(bin_dir: Path) -> None:
    lines = []
    for f in sorted(p for p in bin_dir.iterdir() if p.is_file() and p.name != "sha256sums"):
        lines.append(f"{hashlib.sha256(f.read_bytes()).hexdigest()} *{f.name}\n")
    (bin_dir / "sha256sums").write_text("".join(lines))


def cmd_image(a: dict[str, str]) -> None:
    profile = user_profile(a)
    check_profile(profile)
    prof = INFO["profiles"][profile]
    bp = build_packages(profile, a.get("PACKAGES", "").split())
    bin_dir = Path(a.get("BIN_DIR") or default_bin_dir())
    print(f"Building images for {INFO['target']} - {prof['title']}")
    print(f"Packages: {' '.join(bp)}")
    print()
    root = target_dir()
    shutil.rmtree(root, ignore_errors=True)
    for d in (root, bin_dir, TOP / "tmp", TOP / "dl"):
        d.mkdir(parents=True, exist_ok=True)
    print()
    print("Installing packages...")
    pkgs = resolve(bp)
    install(pkgs, root)
    print()
    print("Finalizing root filesystem...")
    if a.get("FILES"):
        shutil.copytree(a["FILES"], root, dirs_exist_ok=True, symlinks=True)
    for svc in a.get("DISABLED_SERVICES", "").split():
        for link in (root / "etc" / "rc.d").glob(f"[SK]??{svc}"):
            link.unlink()
    print()
    print("Building images...")
    k = kdir()
    (k / "tmp").mkdir(parents=True, exist_ok=True)
    for old in k.glob("root.*"):
        old.unlink()
    rootfs = k / "root.squashfs"
    mksquashfs(root, rootfs, prof["squashfs_block"])
    prefix = f"{img_prefix(a.get('EXTRA_IMAGE_NAME', ''))}-{profile}"
    name = f"{prefix}-squashfs-sysupgrade.bin"
    tmp_img = k / "tmp" / name
    tmp_img.unlink(missing_ok=True)
    kernel = k / f"{profile}-kernel.bin"
    profiles_json = bin_dir / "profiles.json"
    if assemble(profile, kernel, rootfs, tmp_img):
        shutil.copyfile(tmp_img, bin_dir / name)
        overview = {
            "metadata_version": 1,
            "target": f"{INFO['target']}/{INFO['subtarget']}",
            "version_code": INFO["version_code"],
            "version_number": INFO["version"],
            "source_date_epoch": INFO["source_date_epoch"],
            "profiles": {},
        }
        if profiles_json.is_file():
            old = json.loads(profiles_json.read_text())
            if old.get("version_code") == INFO["version_code"]:
                overview = old
        overview["profiles"][profile] = json_info(profile, name, bin_dir / name, prefix)
        overview["arch_packages"] = INFO["arch_packages"]
        overview["default_packages"] = sorted(INFO["default_packages"])
        overview["linux_kernel"] = INFO["linux_kernel"]
        profiles_json.write_text(json.dumps(overview, sort_keys=True, separators=(",", ":")))
    manifest = bin_dir / f"{prefix}.manifest"
    manifest.write_text(
        "".join(
            f"{p['name']} - {p['version']}\n" for p in sorted(pkgs, key=lambda p: str(p["name"]))
        )
    )
    print()
    print("Calculating checksums...")
    sha256sums(bin_dir)
    # a knob for tests: make a build last long enough to be interrupted
    delay = float(os.environ.get("STANDIN_IMAGE_DELAY", "0"))
    if delay:
        time.sleep(delay)


def cmd_package_list() -> None:
    for p in packages_index().values():
        size = (TOP / "packages" / str(p["file"])).stat().st_size
        print(f"{p['name']}-{p['version']} {INFO['arch_packages']} {{{p['name']}}} ({size})")


def cmd_prereq() -> None:
    absent = [t for t in PREREQ if shutil.which(t) is None]
    for t in absent:
        print(f"Checking '{t}'... failed.")
    if absent:
        raise SystemExit(1)


def main() -> None:
    cmd, a = sys.argv[1], args(sys.argv[2:])
    if cmd == "help":
        cmd_help()
    elif cmd == "info":
        cmd_info()
    elif cmd == "prereq":
        cmd_prereq()
    elif cmd == "manifest":
        cmd_manifest(a)
    elif cmd == "image":
        cmd_image(a)
    elif cmd == "package_list":
        cmd_package_list()
    else:
        err(f"make: *** No rule to make target '{cmd}'.  Stop.")
        raise SystemExit(2)


if __name__ == "__main__":
    main()
