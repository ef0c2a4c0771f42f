"""Upstream sources: the pin table, the fetcher (mirror directory, cache, mirror URL, public
URL over real HTTP), the tree digest against the shell command docs/sources.md documents, and
extraction once (also by two processes at once)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.files.hashing import file_sha256
from openwrt_wolf.host import treedigest, upstream
from tests.conftest import need_tools, offline_upstream, unavailable
from tests.standin.server import serve
from tests.upstream_mirror import github_top, repack

ROOT = Path(__file__).resolve().parents[2]
FW = "fwtool"


def _shell_oracle() -> str:
    """The shell block docs/sources.md gives to compute tree-sha256 without this project."""
    doc = (ROOT / "docs" / "sources.md").read_text()
    m = re.search(r"<!-- tree-sha256\.sh -->\n```sh\n(.*?)```", doc, re.S)
    assert m, "docs/sources.md lost its tree-sha256.sh block"
    return m.group(1)


def shell_tree_sha256(archive: Path) -> str:
    need_tools("tar", "find", "sort", "sha256sum", "readlink", "realpath")
    p = subprocess.run(["sh", "-c", _shell_oracle(), "tree-sha256.sh", str(archive)],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.fixture(scope="module")
def real_fwtool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned fwtool archive as this machine gets it (mirror, cache or download), copied."""
    try:
        got = upstream.tarball(FW)
    except upstream.Unavailable as e:
        unavailable(str(e))
    dest = tmp_path_factory.mktemp("fwtool") / upstream.pin(FW).file
    shutil.copy(got, dest)
    return dest


@pytest.fixture
def private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No mirror, no network, a private cache (tests/conftest.py offline_upstream)."""
    offline_upstream(monkeypatch, tmp_path / "cache")
    return tmp_path


def _github_form(src: Path, dest_dir: Path, **kw: object) -> Path:
    pin = upstream.pin(FW)
    dest = dest_dir / pin.file
    dest_dir.mkdir(parents=True, exist_ok=True)
    top = github_top({"project": pin.project, "commit": pin.commit})
    repack(src, dest, top, comment=pin.commit, **kw)  # type: ignore[arg-type]
    return dest


def _use_pin_urls(monkeypatch: pytest.MonkeyPatch, base: str) -> None:
    """Every pin's public URL moved onto a local server, its path kept."""
    import dataclasses

    pins = {n: dataclasses.replace(p, urls=tuple(f"{base}/{u.split('/', 3)[3]}" for u in p.urls))
            for n, p in upstream.pins().items()}  # fmt: skip
    monkeypatch.setattr(upstream, "pins", lambda: pins)


# --- the tree digest ------------------------------------------------------------------------


def test_tree_digest_is_the_pin_for_another_packing(real_fwtool: Path, tmp_path: Path) -> None:
    """GitHub's form (other top folder, gzip, modes, owner, times): other bytes, same tree,
    the pinned tree-sha256; and the documented shell command agrees with our code."""
    gh = _github_form(real_fwtool, tmp_path / "gh")
    pin = upstream.pin(FW)
    assert file_sha256(gh) not in (pin.sha256, file_sha256(real_fwtool))
    with tarfile.open(gh) as t:
        assert t.getnames()[0] == f"fwtool-{pin.commit}"
    assert treedigest.tree_sha256(gh) == shell_tree_sha256(gh) == pin.tree
    assert shell_tree_sha256(real_fwtool) == pin.tree


def _crafted(tmp_path: Path, name: str, **change: object) -> Path:
    """A small tree with a plain file, an executable and a symlink; one thing changed."""
    src = tmp_path / f"src-{name}"
    top = src / "proj-1.0"
    (top / "sub").mkdir(parents=True)
    (top / "README").write_text(str(change.get("text", "hello\n")))
    (top / "sub" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (top / "sub" / "run.sh").chmod(0o644 if change.get("noexec") else 0o755)
    (top / str(change.get("link_name", "latest"))).symlink_to(str(change.get("target", "sub")))
    out = tmp_path / f"{name}.tar.xz" if change.get("xz") else tmp_path / f"{name}.tar.gz"
    with tarfile.open(out, "w:xz" if change.get("xz") else "w:gz") as t:
        t.add(top, arcname=str(change.get("top", "proj-1.0")))
    return out


def test_tree_digest_sees_every_change_and_nothing_else(tmp_path: Path) -> None:
    base = _crafted(tmp_path, "base")
    want = shell_tree_sha256(base)
    assert treedigest.tree_sha256(base) == want
    same = [_crafted(tmp_path, "top", top="other-top"), _crafted(tmp_path, "xz", xz=True)]
    for a in same:  # another top folder or compression: the same tree
        assert treedigest.tree_sha256(a) == shell_tree_sha256(a) == want, a
    changed = [
        _crafted(tmp_path, "text", text="hello!\n"),
        _crafted(tmp_path, "noexec", noexec=True),
        _crafted(tmp_path, "target", target="sub/run.sh"),
        _crafted(tmp_path, "link", link_name="newest"),
    ]
    digests = {treedigest.tree_sha256(a) for a in changed}
    assert want not in digests and len(digests) == len(changed)
    for a in changed:
        assert treedigest.tree_sha256(a) == shell_tree_sha256(a), a


@pytest.mark.parametrize("kind", ["hardlink", "fifo", "dotdot", "absolute", "twice", "two-tops"])
def test_tree_digest_refuses_what_git_archive_never_writes(tmp_path: Path, kind: str) -> None:
    a = tmp_path / "bad.tar"
    with tarfile.open(a, "w") as t:

        def add(name: str, type_: bytes = tarfile.REGTYPE, link: str = "") -> None:
            m = tarfile.TarInfo(name)
            m.type, m.linkname = type_, link
            t.addfile(m, None)

        add("top/a")
        match kind:
            case "hardlink":
                add("top/b", tarfile.LNKTYPE, "top/a")
            case "fifo":
                add("top/b", tarfile.FIFOTYPE)
            case "dotdot":
                add("top/../../etc/x")
            case "absolute":
                add("/etc/x")
            case "twice":
                add("top/a")
            case "two-tops":
                add("other/a")
    with pytest.raises(WolfError) as e:
        treedigest.tree_sha256(a)
    assert str(a) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("what", ["fifo", "zero", "text", "dir"])
def test_digest_of_a_non_archive_is_one_line(tmp_path: Path, what: str) -> None:
    path = {"fifo": tmp_path / "fifo", "zero": Path("/dev/zero"), "text": tmp_path / "t.txt",
            "dir": tmp_path}[what]  # fmt: skip
    if what == "fifo":
        os.mkfifo(path)
    if what == "text":
        path.write_text("not a tar archive\n" * 100)
    p = subprocess.run([str(ROOT / "wolf"), "sources", "--digest", str(path)],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith(f"error: source archive {path}")


# --- the fetcher ----------------------------------------------------------------------------


def test_mirror_directory_first_by_sha256(
    real_fwtool: Path,
    private: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    d = private / "mirror"
    d.mkdir()
    shutil.copy(real_fwtool, d)
    monkeypatch.setenv(upstream.SOURCES_ENV, f"{private / 'nothing'}:{d}")
    with caplog.at_level(logging.INFO, "openwrt_wolf.upstream"):
        assert upstream.tarball(FW) == d / real_fwtool.name
    how = "sha256 is the pinned" if file_sha256(real_fwtool) == upstream.pin(FW).sha256 else "tree"
    assert any(f"from {d}; verified: its {how}" in r.message for r in caplog.records)


def test_public_url_download_is_verified_by_tree(
    real_fwtool: Path,
    private: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No mirror: the pin's public URL (on a local server, path kept) serves GitHub's form;
    it arrives in the cache, is accepted by its tree, extracts to the archive's files."""
    pin = upstream.pin(FW)
    path = pin.urls[0].split("/", 3)[3]  # openwrt/fwtool/archive/<commit>.tar.gz
    gh = _github_form(real_fwtool, private / "www" / Path(path).parent)
    gh.rename(private / "www" / path)
    with serve(private / "www") as (base, srv):
        _use_pin_urls(monkeypatch, base)
        with caplog.at_level(logging.INFO, "openwrt_wolf.upstream"):
            top = upstream.source_dir(FW)
    assert [r for r, _ in srv.requests] == [f"/{path}"]
    cached = upstream.download_dir() / pin.file
    assert file_sha256(cached) == file_sha256(private / "www" / path)
    assert any(
        f"from {base}/{path}; verified: its tree-sha256" in r.message for r in caplog.records
    )
    listing = subprocess.run(["tar", "-tzf", str(cached)], capture_output=True, text=True,
                             check=True, timeout=60).stdout.split()  # fmt: skip
    want = {p.rstrip("/").split("/", 1)[1] for p in listing if "/" in p.rstrip("/")}
    assert {str(p.relative_to(top)) for p in top.rglob("*")} - {upstream.STAMP} == want
    # the cache serves the next call without the server
    assert upstream.tarball(FW) == cached


def test_mirror_url_before_public_url(
    real_fwtool: Path, private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (private / "www").mkdir()
    shutil.copy(real_fwtool, private / "www")
    with serve(private / "www") as (base, srv):
        monkeypatch.setenv(upstream.SOURCES_URL_ENV, f"{base}/")
        assert file_sha256(upstream.tarball(FW)) == file_sha256(real_fwtool)
    assert [r for r, _ in srv.requests] == [f"/{real_fwtool.name}"]


def test_tampered_download_is_refused_and_removed(
    real_fwtool: Path, private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def change(m: tarfile.TarInfo, data: bytes | None) -> tuple[tarfile.TarInfo, bytes | None]:
        if m.name.endswith("/fwtool.c") and data is not None:
            data = data.replace(b"return", b"return ", 1)
        return m, data

    _github_form(real_fwtool, private / "www", change=change)
    with serve(private / "www") as (base, _):
        monkeypatch.setenv(upstream.SOURCES_URL_ENV, base)
        with pytest.raises(WolfError) as e:
            upstream.source_dir(FW)
    assert "neither its sha256 nor its tree-sha256" in str(e.value)
    assert not isinstance(e.value, upstream.Unavailable)  # a failure, never a skip
    assert [p.name for p in upstream.download_dir().iterdir() if p.suffix != ".lock"] == []
    assert not (private / "cache" / "upstream" / FW).exists()


def test_tampered_mirror_file_is_refused(real_fwtool: Path, private: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    def change(m: tarfile.TarInfo, data: bytes | None) -> tuple[tarfile.TarInfo, bytes | None]:
        if m.name.endswith("/fwtool.c"):
            m.mode |= 0o100  # only the execute bit differs
        return m, data

    d = private / "mirror"
    _github_form(real_fwtool, d, change=change)
    monkeypatch.setenv(upstream.SOURCES_ENV, str(d))
    with pytest.raises(WolfError, match=r"neither its sha256 nor its tree-sha256"):
        upstream.source_dir(FW)


def test_neither_mirror_nor_network_is_one_line(private: Path) -> None:
    pin = upstream.pin("uhttpd")
    with pytest.raises(upstream.Unavailable) as e:
        upstream.source_dir("uhttpd")
    line = str(e.value)
    assert "\n" not in line and f"source {pin.file} (openwrt/uhttpd 7b1bec45826b) not found" in line
    assert "--sources DIR" in line and upstream.SOURCES_ENV in line
    assert "allow network access to http://127.0.0.1:" in line and "ConnectionError" in line
    with pytest.raises(upstream.Unavailable, match=r"\$OPENWRT_TREE\b"):
        upstream.openwrt_tree("25.12.5")


def test_neither_through_the_task_is_one_line(tmp_path: Path) -> None:
    """The real public URLs, unreachable: a proxy on a closed port stands for no network."""
    from tests.conftest import free_port

    proxy = f"http://127.0.0.1:{free_port()}"
    drop = ("OPENWRT_", "NO_PROXY", "no_proxy")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env |= {"OPENWRT_WOLF_SHARED": str(tmp_path / "none"), "HTTPS_PROXY": proxy,
            "OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "https_proxy": proxy}  # fmt: skip
    p = subprocess.run([str(ROOT / "wolf"), "sources", "--fetch", FW], env=env,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 2 and "Traceback" not in p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: source {upstream.pin(FW).file}")
    assert f"allow network access to {upstream.pin(FW).urls[0]})" in line
    assert "--sources DIR" in line and str(tmp_path / "none" / "openwrt") in line


def test_two_processes_extract_once(real_fwtool: Path, private: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv(upstream.SOURCES_ENV, str(real_fwtool.parent))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from openwrt_wolf.host import upstream; print(upstream.source_dir('fwtool'))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(ROOT)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs[0] == outs[1] and (Path(outs[0]) / "fwtool.c").is_file()
    leftovers = [p.name for p in Path(outs[0]).parent.iterdir() if p.name.startswith(".fwtool")]
    assert leftovers == []


def test_pin_table_names_every_project_once() -> None:
    pins = upstream.pins()
    assert set(pins) == {"openwrt-25.12.5", "openwrt-24.10.8", "openwrt-snapshot", "firmware-utils",
                         "squashfs-tools",
                         "uhttpd", "libubox", "uclient", "ustream-ssl", "fwtool", "apk-tools",
                         "json-c"}  # fmt: skip
    for p in pins.values():
        assert re.fullmatch(r"[0-9a-f]{64}", p.sha256) and re.fullmatch(r"[0-9a-f]{64}", p.tree)
        assert p.urls and all(u.startswith("https://") for u in p.urls)
        assert p.commit in p.urls[0]
    assert len({p.file for p in pins.values()}) == len(pins)


def test_task_takes_the_sources_option(real_fwtool: Path, tmp_path: Path) -> None:
    """`./wolf sources --fetch fwtool --sources DIR`: taken from DIR and said so (no network)."""
    from tests.conftest import free_port

    proxy = f"http://127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENWRT_")}
    env |= {"OPENWRT_WOLF_SHARED": str(tmp_path / "none"), "HTTPS_PROXY": proxy,
            "OPENWRT_WOLF_CACHE": str(tmp_path / "c"), "https_proxy": proxy}  # fmt: skip
    d = tmp_path / "my mirror"
    d.mkdir()
    shutil.copy(real_fwtool, d)
    p = subprocess.run([str(ROOT / "wolf"), "sources", "--fetch", FW, "--sources", str(d)],
                       env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().split(maxsplit=1) == [FW, str(d / real_fwtool.name)]
    said = [ln for ln in p.stderr.splitlines() if ln.startswith("upstream: ")]
    assert said == [f"upstream: {real_fwtool.name} from {d}; " + said[0].split("; ", 1)[1]]
    assert said[0].split("; ", 1)[1].startswith("verified: its ")


def test_oversized_download_is_cut_off_and_removed(
    real_fwtool: Path, private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (private / "www").mkdir()
    shutil.copy(real_fwtool, private / "www")
    monkeypatch.setattr(upstream, "MAX_DOWNLOAD", 1000)  # the fwtool archive is ~7 KiB
    with serve(private / "www") as (base, _):
        monkeypatch.setenv(upstream.SOURCES_URL_ENV, base)
        with pytest.raises(upstream.Unavailable, match=r"more than 1,000 bytes"):
            upstream.tarball(FW)
    assert [p.name for p in upstream.download_dir().iterdir() if p.suffix != ".lock"] == []
