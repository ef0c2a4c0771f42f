#!/usr/bin/env python3
"""The work behind the stand-in ImageBuilder's Makefile (openwrt-wolf tests only).

Mirrors what OpenWrt's ImageBuilder does and prints, in OpenWrt's words:
- `make info`: _call_info's "Current Target / Default Packages / Available Profiles" text;
- the BUILD_PACKAGES arithmetic of target/imagebuilder/files/Makefile ("-pkg" removes);
- apk's resolver errors ("unable to select packages", "no such package", "conflicts:",
  "trying to overwrite ... owned by ...");
- `make manifest`: "name - version" lines (make-index-json.py --manifest);
- `make image`: root.squashfs in $(KDIR) made by OpenWrt's mksquashfs4 with include/image.mk's
  options, then each of the device's IMAGES (sysupgrade.bin, factory.bin) in $(KDIR)/tmp by
  OpenWrt's own recipe: include/standin-image.mk runs the device's IMAGE/* pipeline with the
  tree's include/image-commands.mk and OpenWrt's host tools in staging_dir/host/bin, so the
  tool messages, check-size's WARNING and the deletions are OpenWrt's; cp to BIN_DIR (a
  deleted image is skipped, as .IGNORE does), profiles.json as
  json_add_image_info.py/json_overview_image_info.py write it, sha256sums as rules.mk's
  sha256sums writes it ("<hash> *<name>").
The kernel pieces in $(KDIR) were made by the device's KERNEL recipe when the stand-in tree was
generated (tests/standin/make_standin.py), as OpenWrt's ImageBuilder ships them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

TOP = Path(os.environ.get("TOPDIR") or Path(__file__).resolve().parent.parent)
INFO = json.loads((TOP / ".standin.json").read_text())
# a few of prereq-build.mk's checks; the image tools themselves ship in staging_dir/host/bin
PREREQ = ("make", "dd", "gawk")
HOST_BIN = TOP / "staging_dir" / "host" / "bin"


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
    # include/image.mk's Image/mkfs/squashfs-common with SQUASHFSCOMP (CONFIG_SQUASHFS_XZ, no
    # BCJ filter on MIPS) and SQUASHFSOPT (block size, devices, no xattrs, 4+4 readers)
    run(
        [
            str(HOST_BIN / "mksquashfs4"),
            str(root),
            str(out),
            "-nopad",
            "-noappend",
            "-root-owned",
            "-comp",
            "xz",
            "-Xpreset",
            "9",
            "-Xe",
            "-Xlc",
            "0",
            "-Xlp",
            "2",
            "-Xpb",
            "2",
            "-b",
            f"{block // 1024}k",
            "-p",
            "/dev d 755 0 0",
            "-p",
            "/dev/console c 600 0 0 5 1",
            "-no-xattrs",
            "-block-readers",
            "4",
            "-small-readers",
            "4",
            "-quiet",
            "-no-progress",
        ]
    )


def run_recipe(profile: str, image: str, out: Path) -> bool:
    """Device/Build/image: the device's IMAGE/<image> pipeline, run by make with OpenWrt's
    Build/* definitions. Like OpenWrt's image Makefile, a failing step that the recipe
    tolerates (tplink-safeloader, mktplinkfw2, check-size) leaves no file and no error."""
    out.unlink(missing_ok=True)
    p = subprocess.run(
        ["make", "--no-print-directory", "-f", str(TOP / "include" / "standin-image.mk"),
         f"TOPDIR={TOP}", f"DEVICE={profile}", f"IMAGE={image}", f"OUT={out}", str(out)],
        check=False,
    )  # fmt: skip
    if p.returncode != 0:
        err(f"make[3]: *** [Makefile: {out}] Error {p.returncode}")
        err("make[2]: *** [Makefile: build_image] Error 2")
        raise SystemExit(2)
    return out.is_file()


def json_info(profile: str, images: list[tuple[str, Path]], prefix: str) -> dict[str, object]:
    prof = INFO["profiles"][profile]
    limits = {"image": prof["image_size"]}
    if prof.get("kernel_size"):
        limits["kernel"] = prof["kernel_size"]
    return {
        "image_prefix": prefix,
        "images": [
            {
                "type": kind,
                "name": path.name,
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                "sha256_unsigned": hashlib.sha256(path.read_bytes()).hexdigest(),
                "size": path.stat().st_size,
                "filesystem": "squashfs",
            }
            for kind, path in images
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
    os.environ["SOURCE_DATE_EPOCH"] = str(INFO["source_date_epoch"])  # rules.mk exports it
    k = kdir()
    (k / "tmp").mkdir(parents=True, exist_ok=True)
    for old in k.glob("root.*"):
        old.unlink()
    rootfs = k / "root.squashfs"
    mksquashfs(root, rootfs, prof["squashfs_block"])
    prefix = f"{img_prefix(a.get('EXTRA_IMAGE_NAME', ''))}-{profile}"
    kept: list[tuple[str, Path]] = []
    for image in prof["images"]:  # IMAGES, in the device's order
        name = f"{prefix}-squashfs-{image}"
        if run_recipe(profile, image, k / "tmp" / name):
            shutil.copyfile(k / "tmp" / name, bin_dir / name)
            kept.append((image.removesuffix(".bin"), bin_dir / name))
    profiles_json = bin_dir / "profiles.json"
    if kept:
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
        overview["profiles"][profile] = json_info(profile, kept, prefix)
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
