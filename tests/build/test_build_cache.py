"""The build's caches under faults: two first builds at once, a damaged unpacked ImageBuilder,
a cached image replaced on disk, a full results store, a hung `make info`, the mirror gone.
Oracles: the stand-in server's sha256sums, hashlib over the files, /proc, a full tmpfs."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from openwrt_wolf.build import download
from tests.build.test_build import V1, mirror_dir, slow_checksums, tree  # noqa: F401
from tests.conftest import need_tools, unavailable
from tests.standin.server import serve

ROOT = Path(__file__).resolve().parent.parent.parent
IB_DIR = "releases/25.12.5/targets/ath79/generic"


def build(
    *args: str, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", "build", "--flavour", "mbedtls", "--device", V1,
         "--no-report", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **env},
    )  # fmt: skip


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def published(mirror: Path) -> dict[str, str]:
    """The stand-in server's own sha256sums (what OpenWrt's side published)."""
    out = {}
    for line in (mirror / IB_DIR / "sha256sums").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        out[name.lstrip("*")] = digest
    return out


def the_record(store: Path) -> dict[str, Any]:
    (path,) = (store / "build").glob("*.json")
    data: dict[str, Any] = json.loads(path.read_text())["data"]
    return data


def image_of(rec: dict[str, Any]) -> Path:
    (img,) = [a for a in rec["artifacts"] if a["type"] == "sysupgrade"]
    return Path(img["path"])


class _Slow(SimpleHTTPRequestHandler):
    """Sends the archive in small pieces, so two downloads surely overlap."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def copyfile(self, source: Any, outputfile: Any) -> None:
        while chunk := source.read(256 * 1024):
            outputfile.write(chunk)
            time.sleep(0.05)


@contextlib.contextmanager
def slow_server(root: Path) -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Slow, directory=str(root)))
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def leftovers(cache: Path) -> list[str]:
    return sorted(
        str(p.relative_to(cache))
        for p in cache.rglob("*")
        if p.name.endswith((".part", ".unpacking", ".copying", ".tmp"))
    )


def test_two_first_builds_at_once(mirror_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    cache = tmp_path / "cache"
    with slow_server(mirror_dir) as url:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "invoke",
                    "build",
                    "--flavour",
                    "mbedtls",
                    "--device",
                    V1,
                    "--no-report",
                    "--mirror",
                    url,
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={
                    **os.environ,
                    "OPENWRT_WOLF_CACHE": str(cache),
                    "OPENWRT_WOLF_STORE": str(tmp_path / f"store{i}"),
                },
            )
            for i in range(2)
        ]
        outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
        assert "Traceback" not in err
    (archive,) = (cache / "downloads").rglob("*.tar.zst")
    assert sha256(archive) == published(mirror_dir)[archive.name]
    assert leftovers(cache) == []
    for i in range(2):  # both measured the same image, byte for byte
        rec = the_record(tmp_path / f"store{i}")
        assert rec["builder_sha256"] == published(mirror_dir)[archive.name]
        assert sha256(image_of(rec)) == next(
            a["sha256"] for a in rec["artifacts"] if a["type"] == "sysupgrade"
        )


def test_damaged_unpacked_imagebuilder_is_unpacked_again(
    mirror_dir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "OPENWRT_WOLF_STORE": str(tmp_path / "s")}
    first = build("--mirror", str(mirror_dir), env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    (makefile,) = (tmp_path / "c" / "imagebuilder").glob("25.12.5/ath79-generic/*/Makefile")
    makefile.unlink()  # a half-deleted cache, a killed rm -r, a full disk during an earlier run
    again = build("--mirror", str(mirror_dir), "--force", env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "unpacking it again" in again.stderr
    assert makefile.is_file()


def test_replaced_artifact_is_not_served_from_the_cache(
    mirror_dir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "OPENWRT_WOLF_STORE": str(tmp_path / "s")}
    assert build("--imagebuilder", str(tree(mirror_dir)), env=env).returncode == 0
    img = image_of(the_record(tmp_path / "s"))
    with img.open("ab") as fh:
        fh.write(b"not what was measured")
    again = build("--imagebuilder", str(tree(mirror_dir)), env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "was changed (sha256 differs)" in again.stderr
    rec = the_record(tmp_path / "s")
    stored = next(a["sha256"] for a in rec["artifacts"] if a["type"] == "sysupgrade")
    assert stored == sha256(image_of(rec))


def test_full_results_store_keeps_the_build(mirror_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    need_tools("unshare")
    if subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30).returncode:
        unavailable("cannot make a mount namespace here (unshare -m needs root)")
    store = tmp_path / "store"
    store.mkdir()
    cache = tmp_path / "cache"
    cmd = (f"{sys.executable} -m invoke build --flavour mbedtls --device {V1} --no-report "
           f"--imagebuilder {tree(mirror_dir)}")  # fmt: skip
    full = subprocess.run(
        ["unshare", "-m", "sh", "-c",
         f"mount -t tmpfs -o size=64k tmpfs {store} && "
         f"(dd if=/dev/zero of={store}/fill bs=4k count=64 2>/dev/null; true) && exec {cmd}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "OPENWRT_WOLF_CACHE": str(cache), "OPENWRT_WOLF_STORE": str(store)},
    )  # fmt: skip
    errors = [ln for ln in full.stderr.splitlines() if ln.startswith("error:")]
    assert full.returncode == 2 and "Traceback" not in full.stderr, full.stderr[-3000:]
    assert len(errors) == 1 and "was built, but its result record was not stored" in errors[0]
    assert "disk full" in errors[0]
    # the store is on the host's disk again: the re-run writes the record without make
    env = {"OPENWRT_WOLF_CACHE": str(cache), "OPENWRT_WOLF_STORE": str(store)}
    again = build("--imagebuilder", str(tree(mirror_dir)), env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "record restored" in again.stderr
    assert not [ln for ln in again.stderr.splitlines() if ln.startswith("$ make")]
    rec = the_record(store)
    stored = next(a["sha256"] for a in rec["artifacts"] if a["type"] == "sysupgrade")
    assert stored == sha256(image_of(rec))


def test_hung_make_info_is_stopped_by_its_own_timeout(tmp_path: Path) -> None:
    need_tools("make")
    ib = tmp_path / "ib"
    ib.mkdir()
    (ib / "Makefile").write_text("info:\n\tsleep 3600\n")
    env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "OPENWRT_WOLF_STORE": str(tmp_path / "s"),
           "OPENWRT_WOLF_TIMEOUT_INFO": "2"}  # fmt: skip
    p = build("--imagebuilder", str(ib), env=env, timeout=300)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2, p.stderr[-3000:]
    assert len(errors) == 1 and "make info did not finish within 2 s" in errors[0]
    assert "OPENWRT_WOLF_TIMEOUT_INFO" in errors[0]
    for pid in filter(str.isdigit, os.listdir("/proc")):  # make and its sleep are gone
        with contextlib.suppress(OSError):
            assert not os.readlink(f"/proc/{pid}/cwd").startswith(str(ib)), pid


def test_warm_cache_and_mirror_down_builds_offline(mirror_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "OPENWRT_WOLF_STORE": str(tmp_path / "s")}
    with serve(mirror_dir) as (url, _srv):
        assert build("--mirror", url, env=env).returncode == 0
    # the server is gone now: nothing listens on its port
    p = build("--mirror", url, "--force", env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    said = " ".join(p.stderr.split())
    assert "unreachable" in said and "building offline from the cached" in said
    assert "sha256sums could not be refreshed" in said
    rec = the_record(tmp_path / "s")
    assert rec["builder_sha256"] == published(mirror_dir)[rec["builder"]]


def test_cold_cache_and_mirror_down_is_one_line(tmp_path: Path) -> None:
    env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "OPENWRT_WOLF_STORE": str(tmp_path / "s")}
    p = build("--mirror", "http://127.0.0.1:9", env=env)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(errors) == 1 and "unreachable" in errors[0], p.stderr


def test_extract_stamp_names_archive_and_files(mirror_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    archive = next((mirror_dir / IB_DIR).glob("*.tar.zst"))
    top = download.extract(archive, tmp_path / "ib", "abc")
    listed = (tmp_path / "ib" / download.FILES_MARK).read_text().split()
    tar = subprocess.run(["tar", "--zstd", "-tf", str(archive)], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()  # fmt: skip
    assert sorted(n.rstrip("/") for n in tar if not n.endswith("/")) == listed
    assert top.name == listed[0].split("/")[0]


def test_sighup_during_make_image_stops_make(mirror_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    """A closed terminal (SIGHUP) cleans up like Ctrl-C: make and its children stop, the lock
    is released with nothing running in the tree, no record is stored."""
    ib = tmp_path / "ib"
    shutil.copytree(tree(mirror_dir), ib, symlinks=True)
    slow_checksums(ib)
    store = tmp_path / "s"
    p = subprocess.Popen(
        [sys.executable, "-m", "invoke", "build", "--flavour", "wolfssl", "--stock", "--device",
         V1, "--imagebuilder", str(ib), "--no-report"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "STANDIN_IMAGE_DELAY": "60", "OPENWRT_WOLF_STORE": str(store),
             "OPENWRT_WOLF_CACHE": str(tmp_path / "c")},
    )  # fmt: skip
    assert p.stderr is not None
    seen = []
    for line in p.stderr:
        seen.append(line)
        if "Calculating checksums..." in line:  # make image is running, nearly done
            break
    p.send_signal(signal.SIGHUP)
    rest = p.communicate(timeout=60)[1]
    assert p.returncode == 129 and "error: interrupted by SIGHUP" in rest, "".join(seen) + rest
    assert not list(store.rglob("*.json"))
    for pid in filter(str.isdigit, os.listdir("/proc")):  # nothing runs in the tree any more
        with contextlib.suppress(OSError):
            assert not os.readlink(f"/proc/{pid}/cwd").startswith(str(ib)), pid
