"""`invoke sources` (build/sources/dl.py): an OpenWrt tree's dl/ filled from a local git
repository and from Debian's source archive, each file checked against OpenWrt's own pins.

Oracles: OpenWrt's PKG_MIRROR_HASH / PKG_HASH as the v25.12.5 tree states them, and the tree's
own make (`make -C <dir> var.PKG_SOURCE` etc.) reading the edited Makefiles back. Each test's
tree is a hard-linked copy of one copy of the snapshot: edits replace files (temp + rename), so
neither is ever changed."""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard

from openwrt_wolf.build.sources import dl as sources
from openwrt_wolf.build.sources import listing, pack
from openwrt_wolf.build.sources.listing import Needed
from openwrt_wolf.errors import WolfError
from openwrt_wolf.host import upstream
from tests.conftest import need_tools, unavailable
from tests.standin.server import serve

UHTTPD = "package/network/services/uhttpd"
USTREAM = "package/libs/ustream-ssl"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tree_here(openwrt_tree_25125: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the snapshot on the tests' own file system (a CI machine's /tmp is a tmpfs,
    where hard links into the cache cannot reach), for the tests to hard-link from."""
    here = tmp_path_factory.mktemp("snapshot") / "openwrt"
    subprocess.run(["cp", "-a", str(openwrt_tree_25125), str(here)], check=True)
    return here


@pytest.fixture
def tree(tree_here: Path, tmp_path: Path) -> Path:
    need_tools("make", "git", "tar", "gawk")
    t = tmp_path / "openwrt"
    subprocess.run(["cp", "-al", str(tree_here), str(t)], check=True)
    for stale in ("dl", "tmp", ".wolf-sources", sources.SUBSTITUTIONS):
        p = t / stale
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    return t


def _var(tree: Path, d: str, var: str) -> str:
    """The tree's own make reading a variable of a package directory."""
    return listing.pkg_vars(tree, d).get(var, "") if var in listing.PKG_VARS else ""


def _repo_from_snapshot(name: str, dest: Path) -> Path:
    """A git repository holding a shared snapshot (tests/standin/sources_kit.py)."""
    from tests.standin.sources_kit import repo_from_snapshot

    try:
        upstream.tarball(name)
    except WolfError as e:
        unavailable(f"needs the shared {name} snapshot: {e}")
        raise
    dest.mkdir(parents=True, exist_ok=True)
    return repo_from_snapshot(name, dest / "work" / name)


def _needed(tree: Path, d: str) -> Needed:
    """What the tree's make says the directory downloads (its PKG_* variables)."""
    v = listing.pkg_vars(tree, d)
    git = v.get("PKG_SOURCE_PROTO") == "git"
    return Needed(
        file=v["PKG_SOURCE"], hash=v["PKG_MIRROR_HASH" if git else "PKG_HASH"], dirs=(d,),
        name=v["PKG_NAME"], version=v["PKG_VERSION"], proto=v.get("PKG_SOURCE_PROTO", ""),
        git_url=v.get("PKG_SOURCE_URL", ""), commit=v.get("PKG_SOURCE_VERSION", ""),
        source_date=v.get("PKG_SOURCE_DATE", ""),
    )  # fmt: skip


def test_git_pack_gives_openwrt_mirror_hash(tree: Path, tmp_path: Path) -> None:
    """uhttpd at its pinned content, packed as OpenWrt's rawgit method packs a checkout,
    is byte for byte the tarball OpenWrt's PKG_MIRROR_HASH names."""
    repo = _repo_from_snapshot("uhttpd", tmp_path / "uhttpd")
    n = _needed(tree, UHTTPD)
    out = tmp_path / n.file
    pack.git_pack(repo, "HEAD", pack.stem(n.file), out)
    assert _sha(out) == n.hash


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_DATE": "@1700000000 +0000", "GIT_COMMITTER_DATE": "@1700000000 +0000",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}  # fmt: skip
    return subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd,
                          check=True, capture_output=True, text=True, env=env).stdout  # fmt: skip


def _listing(top: Path) -> dict[str, tuple[str, int, bytes]]:
    out = {}
    for p in sorted(top.rglob("*")):
        kind = "l" if p.is_symlink() else "d" if p.is_dir() else "f"
        data = os.readlink(p).encode() if kind == "l" else p.read_bytes() if kind == "f" else b""
        out[str(p.relative_to(top))] = (kind, p.lstat().st_mode & 0o111, data)
    return out


def test_git_pack_checks_out_submodules_as_git_does(tmp_path: Path) -> None:
    """A project with a submodule (which has its own): packed as rawgit packs it, the
    submodules' files are what `git submodule update --init --recursive` writes (checkout, so
    no export-subst) with its one-line .git files, as git itself leaves them (urngd's
    jitterentropy-rngd: without it OpenWrt's urngd has no sources to compile)."""
    need_tools("git", "tar")
    repos = {}
    for name in ("inner", "lib", "super"):
        r = tmp_path / name
        r.mkdir()
        _git(r, "init", "-q", "-b", "main")
        repos[name] = r
    (repos["inner"] / "x.c").write_text("int x;\n")
    (repos["lib"] / "v.txt").write_text("$Format:%H$\n")
    (repos["lib"] / ".gitattributes").write_text("v.txt export-subst\n")
    (repos["lib"] / "run.sh").write_text("#!/bin/sh\n")
    (repos["lib"] / "run.sh").chmod(0o755)
    (repos["super"] / "main.c").write_text("int main;\n")
    for name, subs in (("inner", []), ("lib", [("inner", "deps/x")]),
                       ("super", [("lib", "3rdparty/lib")])):  # fmt: skip
        r = repos[name]
        for sub, path in subs:
            _git(r, "submodule", "add", "-q", str(repos[sub]), path)
        _git(r, "add", "-A")
        _git(r, "commit", "-q", "-m", name)
    head = _git(repos["super"], "rev-parse", "HEAD").strip()

    out = tmp_path / "super-1.tar.zst"
    pack.git_pack(repos["super"] / ".git", head, "super-1", out, submodules="",
                     find=lambda url: Path(url) / ".git")  # fmt: skip
    ours = tmp_path / "ours"
    ours.mkdir()
    subprocess.run(["tar", "--zstd", "-xf", str(out), "-C", str(ours)], check=True)

    # the oracle: git's own clone and submodule update, then rawgit's `rm -rf .git .gitmodules`
    theirs = tmp_path / "theirs"
    _git(tmp_path, "clone", "-q", str(repos["super"]), str(theirs))
    _git(theirs, "submodule", "update", "-q", "--init", "--recursive")
    shutil.rmtree(theirs / ".git")
    (theirs / ".gitmodules").unlink()
    got, want = _listing(ours / "super-1"), _listing(theirs)
    assert got == want
    assert want["3rdparty/lib/v.txt"][2] == b"$Format:%H$\n"  # checked out, not archived
    assert want["3rdparty/lib/deps/x/.git"][2].startswith(b"gitdir: ../../../../.git/modules/")
    pack.git_pack(repos["super"] / ".git", head, "super-1", tmp_path / "skip.tar.zst",
                     submodules="skip")  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(zstandard.decompress(
            (tmp_path / "skip.tar.zst").read_bytes(), max_output_size=1 << 20))) as tf:  # fmt: skip
        assert "super-1/3rdparty/lib/v.txt" not in tf.getnames()
    with pytest.raises(WolfError, match="no git repository of"):
        pack.git_pack(repos["super"] / ".git", head, "super-1", tmp_path / "n.tar.zst",
                         submodules="", find=lambda url: None)  # fmt: skip


def test_a_repack_is_the_same_bytes_every_time(tmp_path: Path) -> None:
    """A repacked tarball (Debian's orig under OpenWrt's name) is packed at the newest time of
    its files: a symbolic link, whose time the unpacker leaves at "now", made each repack
    differ, and two packages asking for one file name then asked with two hashes (e2fsprogs,
    tools/ and package/utils/). The oracle: GNU tar writes the original, tar -tv reads back."""
    src = tmp_path / "src" / "pkg-1.0"
    (src / "sub").mkdir(parents=True)
    (src / "a").write_text("hi\n")
    (src / "link").symlink_to("a")
    for p in (src / "a", src / "sub", src):
        os.utime(p, (1_577_836_800, 1_577_836_800))  # 2020-01-01
    orig = tmp_path / "pkg_1.0.orig.tar.gz"
    subprocess.run(["tar", "-C", src.parent, "-czf", orig, "pkg-1.0"], check=True, timeout=60)
    outs = []
    for n in (1, 2):
        out = tmp_path / f"{n}" / "pkg-2.0.tar.xz"
        out.parent.mkdir()
        pack.repack(orig, out, "pkg-2.0")
        outs.append(out.read_bytes())
        os.utime(src / "a")  # time moves on between the two
    assert outs[0] == outs[1]
    back = tmp_path / "1" / "pkg-2.0.tar.xz"
    tv = subprocess.run(["tar", "-tvJf", back], capture_output=True, text=True, check=True,
                        timeout=60).stdout  # fmt: skip
    assert "pkg-2.0/link -> a" in tv and tv.count("2020-01-01") == 4, tv


def test_fill_git_exact_and_substitute(tree: Path, tmp_path: Path) -> None:
    """--from with git repositories: uhttpd's pinned content is exact; ustream-ssl's snapshot
    is an older commit, refused until --allow substitute, then placed under the name the
    edited Makefile gives and with its hash, and listed in the substitutions file.

    The repositories are made here from the snapshots, so their commit ids are not upstream's:
    uhttpd's file is asked for by this repository's commit (same content and time, so the
    same bytes), ustream-ssl's by OpenWrt's pin, which this repository does not have."""
    local = tmp_path / "git"
    repos = {}
    for name in ("uhttpd", "ustream-ssl"):
        repo = _repo_from_snapshot(name, tmp_path / f"src-{name}")
        repos[name] = local / f"openwrt+{name}" / "repo"
        shutil.copytree(repo, repos[name])
    ours = pack.resolve_commit(repos["uhttpd"], "HEAD")
    needed = [dataclasses.replace(_needed(tree, UHTTPD), commit=ours), _needed(tree, USTREAM)]
    log = tmp_path / "log"

    subs = sources.fill(tree, needed, local=[local], allow=(), debian=False, log=log)
    by = {f["file"]: f for f in subs.files}
    assert by[needed[0].file]["class"] == "exact"
    assert _sha(tree / "dl" / needed[0].file) == needed[0].hash
    assert by[needed[1].file]["class"] == "missing"
    assert "--allow substitute" in by[needed[1].file]["note"]
    assert _var(tree, USTREAM, "PKG_SOURCE") == needed[1].file  # nothing edited yet

    subs = sources.fill(tree, needed, local=[local], allow=("substitute",), debian=False, log=log)
    f = {f["file"]: f for f in subs.files}[needed[1].file]
    assert f["class"] == "substitute"
    after = listing.pkg_vars(tree, USTREAM)  # OpenWrt's make reads the edited Makefile
    assert after["PKG_SOURCE"] == f["placed"] != needed[1].file
    assert after["PKG_MIRROR_HASH"] == _sha(tree / "dl" / f["placed"])
    assert after["PKG_SOURCE_VERSION"] != needed[1].commit
    raw = tmp_path / "placed.tar"
    pack.decompress(tree / "dl" / f["placed"], raw)  # zstd: not a tarfile compression
    with tarfile.open(raw) as tf:
        tops = {m.name.split("/")[0] for m in tf.getmembers()}
    assert tops == {pack.stem(after["PKG_SOURCE"])}
    saved = json.loads((tree / sources.SUBSTITUTIONS).read_text())
    assert saved["counts"] == {"exact": 1, "same-version": 0, "substitute": 1, "missing": 0}
    assert {e["what"] for e in f["edits"]} >= {"PKG_SOURCE_VERSION", "hash"}
    assert saved["env"].get("CMAKE_POLICY_VERSION_MINIMUM") == "3.5"


def test_fill_from_debian(tree: Path, tmp_path: Path) -> None:
    """Debian's source archive: Mbed TLS 3.6.6 is OpenWrt's exact file; zstd's +dfsg
    tarball is the same version with other bytes (hash overridden); bc 1.08.1 only exists as
    1.07.1 (version and hash overridden). Each placed file has the hash the tree's make now
    names, and its top directory is the one the tree unpacks into."""
    need_tools("apt-get")
    dirs = ["package/libs/mbedtls", "tools/zstd", "tools/bc"]
    needed = [_needed(tree, d) for d in dirs]
    log = tmp_path / "log"
    try:
        subs = sources.fill(tree, needed, local=[], allow=("same-version", "substitute"),
                            debian=True, log=log)  # fmt: skip
    except WolfError as e:
        unavailable(f"Debian's archive is not reachable: {e}")
        raise
    by = {f["file"]: f for f in subs.files}
    assert [by[n.file]["class"] for n in needed] == ["exact", "same-version", "substitute"]
    assert _sha(tree / "dl" / needed[0].file) == needed[0].hash
    for d in dirs:
        v = listing.pkg_vars(tree, d)
        placed = tree / "dl" / v["PKG_SOURCE"]
        assert _sha(placed) == v["PKG_HASH"], d
        with tarfile.open(placed) as tf:
            tops = {m.name.split("/")[0] for m in tf.getmembers()}
        build = v.get("HOST_BUILD_DIR") or v.get("PKG_BUILD_DIR", "")
        assert tops == {Path(build).name}, d
    assert listing.pkg_vars(tree, "tools/bc")["PKG_VERSION"] != needed[2].version
    assert "dfsg" in by[needed[1].file]["version"]


def test_a_file_debians_index_lists_but_its_pool_lacks_is_named_so(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mirror of Debian's archive may list an orig tarball in its Sources index and serve
    404 for it (here libmnl, libnftnl and nftables: the firewall's libraries). The file stays
    missing, and its note names the files the real index lists, not "not in Debian's source
    archive". The pool's answer is simulated (every HEAD a 404); the index is Debian's."""
    need_tools("apt-get")
    from openwrt_wolf.build.sources import from_debian

    monkeypatch.setattr(from_debian.Archive, "exists", lambda self, o: False)
    n = _needed(tree, "package/libs/libmnl")
    try:
        subs = sources.fill(tree, [n], local=[], allow=("same-version", "substitute"),
                            debian=True, log=tmp_path / "log")  # fmt: skip
    except WolfError as e:
        unavailable(f"Debian's archive is not reachable: {e}")
        raise
    (f,) = subs.files
    assert f["class"] == "missing"
    assert "HTTP 404" in f["note"] and re.search(r"libmnl_[\d.]+\.orig\.tar\.bz2", f["note"])
    assert not (tree / "dl" / n.file).exists()


def test_listing_is_what_make_downloads(tree: Path, tmp_path: Path) -> None:
    """The recorder sees what OpenWrt's download step asks for, with the hash the Makefile
    names; an unselected package that make compiles anyway is found by the dry run."""
    seed = "CONFIG_TARGET_malta=y\nCONFIG_TARGET_malta_be=y\nCONFIG_SDK=y\n"
    (tree / ".config").write_text(seed)
    subprocess.run(["make", "defconfig"], cwd=tree, check=True, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})  # fmt: skip
    empty = tmp_path / "dl-empty"
    empty.mkdir()
    selinux = "package/libs/libselinux"
    assert listing.downloads_when_compiled(tree, selinux, empty)
    assert not listing.downloads_when_compiled(tree, "package/firmware/linux-firmware", empty)
    # a file an earlier run placed in the tree's dl/ is still needed: the dry run does not
    # look there (with the tree's dl/, make would not download it and ppp's linux-atm, compiled
    # though nobody selects it, dropped out of a later run's list)
    from openwrt_wolf.build.sources import edit

    atm = "package/network/utils/linux-atm"
    (tree / "dl").mkdir(exist_ok=True)
    placed = tree / "dl" / listing.pkg_vars(tree, atm)["PKG_SOURCE"]
    placed.write_bytes(b"placed")  # with a matching PKG_HASH, as a substitute is placed
    edit.set_hash(tree, (atm,), _needed(tree, atm).hash, _sha(placed))
    assert listing.downloads_when_compiled(tree, atm, empty)
    assert not listing.downloads_when_compiled(tree, atm, tree / "dl")  # what went wrong
    # with CONFIG_SDK tools/Makefile builds lzop, whose compile needs liblzo: not in tools-y
    selected, added = listing.compile_closure(tree, tmp_path / "log", tools=True)
    assert "lzop" in selected and "liblzo" in added and "liblzo" not in selected
    selected, added = listing.compile_closure(tree, tmp_path / "log")
    assert "utils/busybox" in selected and "libs/libselinux" in added
    got = listing.list_needed(tree, tmp_path / "log", targets=("tools/bison/download",))
    (n,) = got
    assert (n.file, n.hash, n.dirs) == ("bison-3.8.2.tar.gz", _needed(tree, "tools/bison").hash,
                                        ("tools/bison",))  # fmt: skip


def test_a_built_host_tool_is_still_listed(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a host tool is built, the tree's `make download` no longer asks for its source
    (seen on the real ath79 tree: a rerun of `sources` after tools/install listed u-boot for
    package/boot/uboot-tools only, and put back tools/mkimage's edit: the build then
    downloaded u-boot 2025.10). Every tool make builds is asked on its own, so the file keeps
    all its directories. Here make's whole-tree download asks for no host tool at all."""
    real = listing._make

    def no_tools(tree_: Path, args: list[str], log: Path, env: dict[str, str]) -> object:
        done = real(tree_, args, log, env)
        if args[:1] == ["download"]:  # as after tools/install: drop what tools/ asked for
            rec = Path(env["WOLF_DL_RECORD"])
            kept = [ln for ln in rec.read_text().splitlines()
                    if "/tools/" not in ln.split("\t", 1)[0] + "/"]  # fmt: skip
            rec.write_text("".join(f"{ln}\n" for ln in kept))
        return done

    monkeypatch.setattr(listing, "_make", no_tools)
    (tree / ".config").write_text("CONFIG_TARGET_ath79=y\nCONFIG_TARGET_ath79_generic=y\n")
    from openwrt_wolf.build.buildroot import Tree

    Tree(tree).defconfig((tree / ".config").read_text(), tmp_path / "log")
    got = {n.file: n for n in listing.list_needed(tree, tmp_path / "log")}
    uboot = next(n for f, n in got.items() if f.startswith("u-boot-"))
    assert "tools/mkimage" in uboot.dirs, uboot.dirs
    assert "tools/bison" in got[_needed(tree, "tools/bison").file].dirs


def test_closest_version() -> None:
    assert sources.closest("2.7.3", ["2.5.0", "2.8.2", "2.8.3", "2.9.0"]) == "2.8.2"
    assert sources.closest("1.18.1", ["1.17"]) == "1.17"
    assert sources.closest("2023.02.20", ["20220903", "20241016"]) == "20241016"
    assert sources.closest("1.0", []) is None


def test_bad_substitutions_file(tmp_path: Path) -> None:
    (tmp_path / sources.SUBSTITUTIONS).write_text("{not json")
    with pytest.raises(WolfError, match=r"substitutions file .*: not JSON"):
        sources.read_substitutions(tmp_path)
    (tmp_path / sources.SUBSTITUTIONS).write_text(json.dumps({"schema": 99, "files": []}))
    with pytest.raises(WolfError, match="schema"):
        sources.read_substitutions(tmp_path)
    with pytest.raises(WolfError, match="unknown class"):
        sources.parse_allow("exact,substitute")


EDIT = {"path": "tools/bc/Makefile", "what": "PKG_VERSION", "old": "1.08.1", "new": "1.07.1"}
GOOD_FILE = {
    "file": "bc-1.08.1.tar.xz", "expected": "0" * 64, "dirs": ["tools/bc"], "class": "substitute",
    "origin": "http://deb.debian.org/x", "placed": "bc-1.07.1.tar.xz", "sha256": "1" * 64,
    "version": "1.07.1", "note": "n",
    "edits": [EDIT],
}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"edits": [{**EDIT, "path": "../../etc/passwd"}]}, "path inside"),
        ({"edits": [{**EDIT, "path": "/etc/passwd"}]}, "path inside"),
        ({"dirs": ["tools/../../x"]}, "path inside"),
        ({"placed": "../dl/x.tar.gz"}, "not a file name"),
        ({"class": "trusted"}, "class"),
        ({"sha256": 5}, r"files\[0\]\.sha256"),
        ({"edits": "x"}, r"files\[0\]\.edits"),
    ],
)
def test_substitutions_file_is_read_as_untrusted(
    tmp_path: Path, change: dict[str, object], field: str
) -> None:
    """--redo/--revert write where an edit's path points and make reads `env`: a file that
    points out of the tree or smuggles make code is one error line, before anything is used."""
    doc = {"schema": 1, "tree": str(tmp_path), "created": "x", "allow": [],
           "files": [{**GOOD_FILE, **change}], "env": {}}  # fmt: skip
    (tmp_path / sources.SUBSTITUTIONS).write_text(json.dumps(doc))
    with pytest.raises(WolfError, match=field):
        sources.read_substitutions(tmp_path)
    doc["files"] = [GOOD_FILE]
    (tmp_path / sources.SUBSTITUTIONS).write_text(json.dumps(doc))
    assert sources.read_substitutions(tmp_path) is not None  # the good file reads
    doc["env"] = {"CMAKE_POLICY_VERSION_MINIMUM": "$(shell touch /tmp/x)"}
    (tmp_path / sources.SUBSTITUTIONS).write_text(json.dumps(doc))
    with pytest.raises(WolfError, match="not a plain path or word for make"):
        sources.read_substitutions(tmp_path)


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real HTTP server on 127.0.0.1 serving a directory, laid out as OpenWrt's sources
    mirror (files by name)."""
    root = tmp_path / "mirror"
    root.mkdir()
    with serve(root) as (url, _srv):
        yield url, root


def test_fill_from_a_mirror_url(tmp_path: Path, mirror: tuple[str, Path]) -> None:
    """--sources-url: a file under OpenWrt's name with the pinned hash is exact; other bytes
    under that name are not used (never silent, never placed); an unreachable mirror is a
    missing file, not a traceback."""
    from openwrt_wolf.build.sources.dl import Filler

    url, root = mirror
    tree = tmp_path / "tree"
    (tree / "dl").mkdir(parents=True)
    (root / "good-1.0.tar.gz").write_bytes(b"the pinned bytes\n")
    (root / "other-1.0.tar.gz").write_bytes(b"other bytes\n")
    good = Needed(file="good-1.0.tar.gz", hash=hashlib.sha256(b"the pinned bytes\n").hexdigest(),
                  dirs=("tools/good",), name="good", version="1.0")  # fmt: skip
    other = dataclasses.replace(good, file="other-1.0.tar.gz", dirs=("tools/other",))
    f = Filler(tree, local=[], allow=(), archive=None, log=tmp_path / "log", urls=[url])
    r = f.resolve(good)
    assert (r.cls, r.origin) == ("exact", f"{url}/good-1.0.tar.gz")
    assert _sha(tree / "dl" / "good-1.0.tar.gz") == good.hash
    assert f.resolve(other).cls == "missing"
    assert not (tree / "dl" / "other-1.0.tar.gz").exists()
    assert not [p for p in (tree / "dl").iterdir() if p.name.endswith(".part")]
    dead = Filler(tree, local=[], allow=(), archive=None, log=tmp_path / "log",
                  urls=["http://127.0.0.1:9"])  # fmt: skip
    assert dead.resolve(dataclasses.replace(good, file="good-2.0.tar.gz")).cls == "missing"


def test_one_task_two_modes() -> None:
    """`sources` without --tree is the pin table; tree options without --tree, or pin
    options with it, are one error line; the help names both modes."""
    wolf = [str(Path(__file__).resolve().parents[2] / "wolf")]
    p = subprocess.run([*wolf, "sources", "--allow", "substitute"], capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert p.returncode != 0
    assert "--allow: only with --tree" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([*wolf, "sources", "--tree", "/nonexistent", "--fetch", "all"],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode != 0 and "not with --tree" in p.stderr
    h = subprocess.run([*wolf, "--help", "sources"], capture_output=True, text=True, timeout=120)
    assert h.returncode == 0
    for opt in ("--tree", "--fetch", "--digest", "--sources-url", "--allow", "--redo"):
        assert opt in h.stdout, opt


def test_tree_edits_are_kept_and_undone(tree: Path, openwrt_tree_25125: Path) -> None:
    """The edits a substitute needs change what the tree's make reads and nothing else, and
    --revert / --redo put back OpenWrt's own files byte for byte."""
    from openwrt_wolf.build.sources import edit

    bison = _needed(tree, "tools/bison")
    atm = "package/network/utils/linux-atm/patches/200-no_libfl.patch"
    aa = "tools/autoconf-archive/patches/001-AX_CXX_COMPILE_STDCXX-Add-C-23-support.patch"
    edits = [
        *edit.set_hash(tree, bison.dirs, bison.hash, "0" * 64),
        *edit.set_var(tree, ("tools/bc",), "PKG_VERSION", "1.08.1", "1.07.1"),
        *edit.drop_hunks(tree, atm, "src/qgen/Makefile.in"),
        *edit.remove_file(tree, aa, "contained in the substitute"),
    ]
    added = "toolchain/gcc/patches-14.x/995-openwrt-wolf-test.patch"
    edits += edit.add_file(tree, added, "a patch\n", "a substitute needs it")
    assert (tree / added).read_text() == "a patch\n"
    with pytest.raises(WolfError, match="already in the tree"):
        edit.add_file(tree, "tools/bc/Makefile", "x", "an existing file is not added")
    assert [e.what for e in edits] == ["hash", "PKG_VERSION", "patch hunks", "removed", "added"]
    assert listing.pkg_vars(tree, "tools/bison")["PKG_HASH"] == "0" * 64
    assert listing.pkg_vars(tree, "tools/bc")["PKG_SOURCE"] == "bc-1.07.1.tar.xz"
    text = (tree / atm).read_text()
    assert "src/qgen/Makefile.in" not in text and "src/qgen/Makefile.am" in text
    assert not (tree / aa).exists()
    # the same edit again writes nothing (OpenWrt's stamps hash mtimes)
    before = (tree / "tools/bison/Makefile").stat().st_mtime_ns
    edit.set_hash(tree, bison.dirs, bison.hash, "0" * 64)
    assert (tree / "tools/bison/Makefile").stat().st_mtime_ns == before
    restored = edit.revert(tree)
    assert sorted(restored) == sorted({e.path for e in edits})
    assert not (tree / added).exists()  # not OpenWrt's: removed again
    for rel in set(restored) - {added}:
        assert (tree / rel).read_bytes() == (openwrt_tree_25125 / rel).read_bytes(), rel


def test_host_binary_substitute_stays_listed(tree: Path, openwrt_tree_25125: Path) -> None:
    """A host tool taken from Debian's binaries: its Makefile is replaced (make no longer
    downloads anything for it, and the replacement links the binary into staging_dir/host), yet
    the substitution stays listed with OpenWrt's original pin, read from the kept Makefile."""
    from openwrt_wolf.build.sources import edit
    from openwrt_wolf.build.sources.dl import Filler

    need_tools("lzma_alone")
    pinned = _needed(tree, "tools/lzma")
    f = Filler(tree, local=[], allow=("substitute",), archive=None, log=tree / "log")
    r = f.resolve(pinned)
    assert (r.cls, r.origin) == ("substitute", "debian-binary:lzma-alone")
    assert "PKG_SOURCE" not in listing.pkg_vars(tree, "tools/lzma")  # no download any more
    text = (tree / "tools/lzma/Makefile").read_text()
    assert "ln -s /usr/bin/lzma_alone $(STAGING_DIR_HOST)/bin/lzma" in text
    (again,) = listing.replaced_by_us(tree, tree / edit.ORIG_DIR, "# openwrt-wolf: ")
    assert (again.file, again.hash) == (pinned.file, pinned.hash)
    assert pinned.hash == _needed(openwrt_tree_25125, "tools/lzma").hash


def test_host_tool_no_source_and_no_binary_is_not_built_and_stays_listed(tree: Path) -> None:
    """ath79 builds tools/lzma-old and squashfs3-lzma for every device (tools/Makefile), though
    only Netgear images call mksquashfs3-lzma; neither source is reachable here. The tool's
    Makefile then installs nothing: OpenWrt's make still evaluates it (no download, no
    compile), the substitution stays listed with its pin, and a recipe calling the tool would
    find no program in staging_dir/host/bin."""
    from openwrt_wolf.build.sources import edit
    from openwrt_wolf.build.sources.dl import Filler

    # the oracle for "only Netgear": every caller of mksquashfs3-lzma in the target's images
    callers = sorted(
        str(p.relative_to(tree)) for p in (tree / "target/linux/ath79/image").glob("*.mk")
        if "mksquashfs3-lzma" in p.read_text()
    )  # fmt: skip
    assert callers == ["target/linux/ath79/image/common-netgear.mk"]
    for tool in ("lzma-old", "squashfs3-lzma"):
        pinned = _needed(tree, f"tools/{tool}")
        f = Filler(tree, local=[], allow=("substitute",), archive=None, log=tree / "log")
        r = f.resolve(pinned)
        assert (r.cls, r.origin) == ("substitute", "not-built"), r
        assert "Netgear" in r.note
        assert "PKG_SOURCE" not in listing.pkg_vars(tree, f"tools/{tool}")
        text = (tree / f"tools/{tool}/Makefile").read_text()
        assert "ln -s" not in text and "STAGING_DIR_HOST)/bin" not in text
        (again,) = [
            n for n in listing.replaced_by_us(tree, tree / edit.ORIG_DIR, "# openwrt-wolf: ")
            if n.dirs == (f"tools/{tool}",)
        ]  # fmt: skip
        assert (again.file, again.hash) == (pinned.file, pinned.hash)
    edit.revert(tree)


def test_edits_no_substitutions_entry_names_are_put_back(tree: Path) -> None:
    """An edit the substitutions file does not list (its file dropped out of a run's list:
    linux-atm's Makefile kept 2.5.1 while the file said nothing, and the next run read the
    edited Makefile as OpenWrt's pin) is put back; listed edits stay."""
    from openwrt_wolf.build.sources import edit
    from openwrt_wolf.build.sources.substitutions import SUBSTITUTIONS, Substitutions

    bison = _needed(tree, "tools/bison")
    bc_makefile = (tree / "tools/bc/Makefile").read_bytes()
    listed = edit.set_hash(tree, bison.dirs, bison.hash, "0" * 64)
    edit.set_var(tree, ("tools/bc",), "PKG_VERSION", _var(tree, "tools/bc", "PKG_VERSION"),
                    "1.07.1")  # fmt: skip
    edit.add_file(tree, "toolchain/gcc/patches-14.x/995-x.patch", "p\n", "unlisted")
    entry = {"file": bison.file, "expected": bison.hash, "dirs": list(bison.dirs),
             "class": "substitute", "origin": "test", "placed": bison.file, "sha256": "0" * 64,
             "version": bison.version, "note": "",
             "edits": [e.to_dict() for e in listed]}  # fmt: skip
    subs = Substitutions(str(tree), "now", ("substitute",), (entry,))
    (tree / SUBSTITUTIONS).write_text(json.dumps(subs.to_dict()))
    back = sources.put_back_unlisted(tree)
    assert sorted(back) == ["toolchain/gcc/patches-14.x/995-x.patch", "tools/bc/Makefile"]
    assert (tree / "tools/bc/Makefile").read_bytes() == bc_makefile  # OpenWrt's own again
    assert not (tree / "toolchain/gcc/patches-14.x/995-x.patch").exists()
    assert _needed(tree, "tools/bison").hash == "0" * 64  # the listed edit stays
    assert sources.put_back_unlisted(tree) == []


def test_fakeroot_substitute_has_the_library_the_imagebuilder_copies(tree: Path) -> None:
    """fakeroot replaced by Debian's: target/imagebuilder/Makefile copies
    staging_dir/host/lib/libfakeroot* into the ImageBuilder (CONFIG_IB stopped with 'cannot
    stat ... libfakeroot*' when only the commands were linked); the links must match that glob
    with a file that exists."""
    from openwrt_wolf.build.sources.dl import Filler

    need_tools("fakeroot-tcp")
    f = Filler(tree, local=[], allow=("substitute",), archive=None, log=tree / "log")
    r = f.resolve(_needed(tree, "tools/fakeroot"))
    assert (r.cls, r.origin) == ("substitute", "debian-binary:fakeroot")
    makefile = (tree / "tools/fakeroot/Makefile").read_text()
    links = {name: path for path, name in re.findall(r"ln -s (\S+) \$\(STAGING_DIR_HOST\)/(\S+)",
                                                       makefile)}  # fmt: skip
    (glob,) = re.findall(r"staging_dir/host/(lib/libfakeroot\S*)",
                         (tree / "target/imagebuilder/Makefile").read_text())  # fmt: skip
    matched = [n for n in links if fnmatch.fnmatch(n, glob)]
    assert matched and all(Path(links[n]).is_file() for n in matched), (glob, links)


def test_putting_back_never_writes_through_a_link(tree: Path, tmp_path: Path) -> None:
    """Putting originals back (every run now does it for unlisted edits) replaces a tree file
    that became a link instead of writing through it, refuses a folder that leads out of the
    tree, and deletes nothing outside it."""
    from openwrt_wolf.build.sources import edit

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    edit.set_var(tree, ("tools/bc",), "PKG_VERSION", _var(tree, "tools/bc", "PKG_VERSION"),
                    "1.07.1")  # fmt: skip
    (tree / "tools/bc/Makefile").unlink()
    (tree / "tools/bc/Makefile").symlink_to(victim)
    assert sources.put_back_unlisted(tree) == ["tools/bc/Makefile"]
    assert victim.read_text() == "keep me\n"
    assert not (tree / "tools/bc/Makefile").is_symlink()
    assert "PKG_VERSION" in (tree / "tools/bc/Makefile").read_text()
    # an added file whose folder became a link out of the tree: refused, the outside kept
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "995-x.patch").write_text("theirs\n")
    edit.add_file(tree, "toolchain/gcc/patches-14.x/995-x.patch", "p\n", "test")
    shutil.rmtree(tree / "toolchain/gcc/patches-14.x")
    (tree / "toolchain/gcc/patches-14.x").symlink_to(outside)
    with pytest.raises(WolfError, match=r"patches-14\.x is a symbolic link"):
        sources.put_back_unlisted(tree)
    assert (outside / "995-x.patch").read_text() == "theirs\n"


def test_revert_says_what_it_left(tree: Path, tmp_path: Path) -> None:
    """`sources --revert` puts back regular originals and names the rest: a kept "original"
    made a link (to a file outside) is neither followed nor silently skipped."""
    from openwrt_wolf.build.sources import edit

    edit.set_var(tree, ("tools/bc",), "PKG_VERSION", _var(tree, "tools/bc", "PKG_VERSION"),
                    "1.07.1")  # fmt: skip
    edit.set_var(tree, ("tools/bison",), "PKG_VERSION",
                    _var(tree, "tools/bison", "PKG_VERSION"), "3.8.1")  # fmt: skip
    kept = tree / edit.ORIG_DIR / "tools/bison/Makefile"
    outside = tmp_path / "outside.mk"
    outside.write_text("theirs\n")
    kept.unlink()
    kept.symlink_to(outside)
    wolf = [str(Path(__file__).resolve().parents[2] / "wolf")]
    out = subprocess.run([*wolf, "sources", "--tree", str(tree), "--revert"],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "COLUMNS": "1000"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "restored 1 files" in out.stdout
    assert re.search(r"left 1 under .*: tools/bison/Makefile$", out.stdout, re.M), out.stdout
    assert outside.read_text() == "theirs\n"
    assert "1.07.1" not in (tree / "tools/bc/Makefile").read_text()


def test_libressl_substitute_provides_the_openssl_command_the_tree_runs(
    tree: Path, tmp_path: Path
) -> None:
    """LibreSSL replaced by Debian's OpenSSL: the tree's package/Makefile makes the build's apk
    signing key with $(STAGING_DIR_HOST)/bin/openssl (LibreSSL's command); the replacement must
    link a binary there that runs the tree's own command lines (a real build stopped at
    package/compile with 'staging_dir/host/bin/openssl: No such file or directory')."""
    from openwrt_wolf.build.sources.dl import Filler

    need_tools("openssl", "/usr/include/openssl/evp.h")
    f = Filler(tree, local=[], allow=("substitute",), archive=None, log=tree / "log")
    r = f.resolve(_needed(tree, "tools/libressl"))
    assert (r.cls, r.origin) == ("substitute", "debian-binary:libssl-dev")
    makefile = (tree / "tools/libressl/Makefile").read_text()
    links = {
        name: path
        for path, name in re.findall(r"ln -s (\S+) \$\(STAGING_DIR_HOST\)/(\S+)", makefile)
    }
    recipes = re.findall(
        r"^\t\$\(STAGING_DIR_HOST\)/bin/openssl (.+)$",
        (tree / "package/Makefile").read_text(),
        flags=re.M,
    )
    assert len(recipes) == 2, recipes  # the key, then its public half
    env = {
        "BUILD_KEY_APK_SEC": str(tmp_path / "key.pem"),
        "BUILD_KEY_APK_PUB": str(tmp_path / "pub.pem"),
    }
    for recipe in recipes:
        for var, val in env.items():
            recipe = recipe.replace(f"$({var})", val)
        args, _, out = recipe.partition(">")
        done = subprocess.run(
            [links["bin/openssl"], *shlex.split(args)], capture_output=True, check=True, timeout=60
        )
        if out:
            Path(out.strip()).write_bytes(done.stdout)
    assert (tmp_path / "pub.pem").read_text().startswith("-----BEGIN PUBLIC KEY-----")
