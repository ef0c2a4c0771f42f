"""A stand-in for the public archive URLs of data/upstream.toml: an HTTP server on 127.0.0.1
holding every pinned file by name, made from a folder of the pinned files (../shared/openwrt),
either as they are (--form shared) or repacked the way GitHub's archive packs a commit (--form
github: top folder <repo>-<commit>, another gzip, other modes and owners, so only the tree
digest can verify them), and offline/dl's tarballs as they are (OpenWrt's source mirror). It
runs a command with the project's ../shared hidden ($OPENWRT_WOLF_SHARED pointing at an empty
folder) and $OPENWRT_WOLF_SOURCES_URL at the server:

    python3 tests/upstream_mirror.py --form github -- bash .ci/run

Standard library only: it runs before ./wolf has made .venv. The tests use repack() too."""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

PINS = ROOT / "openwrt_wolf" / "data" / "upstream.toml"
COMMAND_TIMEOUT = 3 * 3600.0


def repack(
    src: Path,
    dest: Path,
    top: str,
    *,
    change: Callable[[tarfile.TarInfo, bytes | None], tuple[tarfile.TarInfo, bytes | None]]
    | None = None,
    comment: str = "",
    shift: int = 3600,
) -> None:
    """Write src's tree to dest as another packer would: another top folder, gzip -6 with a
    time stamp, modes 0644/0755, another owner, times moved by ``shift`` seconds, a pax comment
    naming the commit.
    ``change`` may alter a member (and its content) on the way, to make a tampered copy."""
    with tarfile.open(src, "r:*") as tin:
        members = [(m, tin.extractfile(m).read() if m.isreg() else None) for m in tin]  # type: ignore[union-attr]
    raw = dest.with_name(dest.name + ".tar")
    with tarfile.open(raw, "w", format=tarfile.PAX_FORMAT, pax_headers={"comment": comment}) as t:
        for m, data in members:
            n = tarfile.TarInfo(top + m.name[m.name.index("/") :] if "/" in m.name else top)
            n.type, n.linkname, n.mtime = m.type, m.linkname, m.mtime + shift
            n.mode = 0o755 if m.isdir() or m.mode & 0o111 else 0o644
            n.uid = n.gid = 1000
            n.uname = n.gname = "runner"
            if change is not None:
                n, data = change(n, data)
            n.size = len(data) if data is not None else 0
            t.addfile(n, None if data is None else io.BytesIO(data))
    with raw.open("rb") as fi, gzip.GzipFile(dest, "wb", compresslevel=6, mtime=1) as fo:
        while chunk := fi.read(1 << 20):
            fo.write(chunk)
    raw.unlink()


def github_top(pin: dict[str, Any]) -> str:
    """GitHub's top folder: <repo>-<commit>, or <repo>-<tag> for a tag archive."""
    return f"{pin['project'].split('/')[1]}-{pin['commit']}"


def make_mirror(shared: Path, into: Path, form: str) -> list[str]:
    pins = tomllib.loads(PINS.read_text())["pin"]
    names = []
    for pin in pins.values():
        src = shared / pin["file"]
        if not src.is_file():
            raise SystemExit(f"upstream_mirror: {src} is missing (give --from DIR)")
        dest = into / pin["file"]
        if form == "shared":
            shutil.copyfile(src, dest)
        else:
            # GitHub's archive is `git archive`: every entry carries the commit's time
            repack(src, dest, github_top(pin), comment=pin["commit"], shift=0)
        names.append(pin["file"])
    # OpenWrt's source mirror (sources.openwrt.org) holds download.pl's tarballs by name, the
    # same bytes as offline/dl: hostapd's for the Wi-Fi lab (footprint/wpad.py)
    dl = shared / "offline" / "dl"
    for f in sorted(dl.iterdir()) if dl.is_dir() else []:
        if f.is_file():
            shutil.copyfile(f, into / f.name)
            names.append(f.name)
    return names


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))  # run as a script: the tests' own download server
    from tests.standin.server import serve

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--form", choices=("github", "shared"), default="github")
    ap.add_argument("--from", dest="src", default=str(ROOT.parent / "shared" / "openwrt"))
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND (default: bash .ci/run)")
    args = ap.parse_args(argv)
    cmd = [c for c in args.command if c != "--"] or ["bash", ".ci/run"]
    with tempfile.TemporaryDirectory(prefix="upstream-mirror.") as tmp:
        files, empty = Path(tmp) / "files", Path(tmp) / "no-shared"
        files.mkdir()
        empty.mkdir()
        names = make_mirror(Path(args.src), files, args.form)
        with serve(files) as (url, srv):
            env = {**os.environ, "OPENWRT_WOLF_SHARED": str(empty), "OPENWRT_WOLF_SOURCES_URL": url}
            print(
                f"upstream_mirror: {len(names)} files ({args.form} form) at {url}; "
                f"OPENWRT_WOLF_SHARED={empty} (../shared hidden); running {' '.join(cmd)}",
                file=sys.stderr,
            )
            p = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
            try:
                return p.wait(timeout=COMMAND_TIMEOUT)
            except subprocess.TimeoutExpired:
                print(f"upstream_mirror: {cmd} timed out", file=sys.stderr)
                return 124
            finally:  # nothing the command started outlives the server
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=30)
                got = sorted({path for path, _ in srv.requests})
                print(f"upstream_mirror: served {len(got)} of {len(names)} files: {got}",
                      file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
