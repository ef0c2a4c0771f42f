"""OpenWrt's SDK, driven through its own interface (target/sdk/files/Makefile,
scripts/feeds): feeds.conf with our local feed, `scripts/feeds update -a`, `scripts/feeds
install -p wolf <names>`, a .config selecting them, `make defconfig`, `make
package/<name>/compile`, and the packages it leaves in bin/packages/<arch>/<feed>/.

The packages are then put where the ImageBuilder takes local packages (its packages/
directory, whose index `make image` regenerates) and the image is assembled there."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from .. import proc
from ..errors import CommandError, WolfError
from . import packages

MAKE_TIMEOUT = 6 * 3600.0
FEED = "wolf"
LOCAL_MARK = ".openwrt-wolf-local"  # in an ImageBuilder's packages/: what we put there


def feed_hash(feed: Path) -> str:
    """The patch-set part of the request hash: every file of the local feed, by path."""
    if not feed.is_dir():
        raise WolfError(
            f"local feed {feed} does not exist",
            hint="give --feed DIR (the patch set's feeds/wolf), or use --backend imagebuilder",
        )
    h = hashlib.sha256()
    for f in sorted(p for p in feed.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(feed)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:32]


class SDK:
    def __init__(self, top: Path) -> None:
        self.top = top
        if not (top / "scripts" / "feeds").is_file() or not (top / "Makefile").is_file():
            raise WolfError(
                f"{top} is not an OpenWrt SDK (no scripts/feeds or Makefile)",
                hint="give the unpacked openwrt-sdk-* directory",
            )

    def _run(self, argv: list[str], log: Path, what: str) -> proc.Completed:
        try:
            return proc.run(argv, cwd=self.top, timeout=MAKE_TIMEOUT, logfile=log,
                            env={"MAKEFLAGS": ""})  # fmt: skip
        except CommandError as e:
            raise CommandError(f"SDK {what} failed", tail=e.tail, log=e.log) from None

    def build(
        self, names: tuple[str, ...], *, release: str, flavour: str, feed: Path, log: Path,
        jobs: int = 1,
    ) -> list[Path]:  # fmt: skip
        """Compile the named packages of the local feed; returns the package files."""
        conf = packages.feeds_conf(release, flavour, feed.resolve())
        (self.top / "feeds.conf").write_text(conf)
        self._run(["./scripts/feeds", "update", "-a"], log, "feeds update")
        self._run(["./scripts/feeds", "install", "-p", FEED, *names], log, "feeds install")
        for n in names:
            if not (self.top / "package" / "feeds" / FEED / n).exists():
                raise WolfError(
                    f"package {n} is not in the local feed {feed}",
                    hint="check data/flavours.toml sdk_luci_https and the feed",
                )
        (self.top / ".config").write_text("".join(f"CONFIG_PACKAGE_{n}=m\n" for n in names))
        self._run(["make", "defconfig"], log, "make defconfig")
        out: list[Path] = []
        for n in names:
            self._run(["make", f"package/{n}/compile", f"-j{jobs}", "V=s"], log,
                      f"make package/{n}/compile")  # fmt: skip
            found = sorted(
                (p for ext in ("apk", "ipk") for p in
                 (self.top / "bin" / "packages").glob(f"*/{FEED}/{n}[-_]*.{ext}")),
                key=lambda p: p.stat().st_mtime,
            )  # fmt: skip
            if not found:
                raise WolfError(
                    f"the SDK built no package file for {n} under bin/packages/*/{FEED}/",
                    hint=f"see the log: {log}",
                )
            out.append(found[-1])
        return out


def put_local_packages(ib_top: Path, files: list[Path]) -> None:
    """Copy packages into an ImageBuilder's packages/ (removing the ones we put there
    before), where `make image` finds them and regenerates its index."""
    pkgdir = ib_top / "packages"
    mark = pkgdir / LOCAL_MARK
    if mark.exists():
        for name in mark.read_text().split():
            (pkgdir / name).unlink(missing_ok=True)
    for f in files:
        shutil.copyfile(f, pkgdir / f.name)
    mark.write_text("".join(f"{f.name}\n" for f in files))
