"""A git repository given as a source (`sources --sources DIR`) is data: packing it runs
nothing it names (filter drivers, hooks, fsmonitor, a promisor remote's sshCommand), reads
no file its config or .gitmodules includes, and one whose git directory or objects are
elsewhere is refused in one line (build/sources/gitrepo.py).

Oracles: a marker file that only the repository's command would create (created with
today's git when the repository is opened as a repository: checked by
test_the_marker_is_what_git_runs); what the commit holds, read by the test's own git as
objects (ls-tree, cat-file); GNU tar reading the tarball back; the pytest-timeout hang
detector."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from openwrt_wolf.build.sources import dl, pack
from openwrt_wolf.errors import WolfError
from tests.build import git_kit
from tests.conftest import need_tools

ROOT = Path(__file__).resolve().parents[2]


def _unpack(tarball: Path, into: Path) -> Path:
    into.mkdir()
    subprocess.run(["tar", "--zstd", "-xf", str(tarball), "-C", str(into)], check=True,
                   timeout=60)  # fmt: skip
    (top,) = list(into.iterdir())
    return top


def _repo_dir(sources: Path, kind: str) -> Path:
    return sources / ("x.git" if kind == "bare repository" else "x")


def _gitdir(top: Path) -> Path:
    return top / ".git" if (top / ".git").is_dir() else top


@pytest.fixture
def tools() -> None:
    need_tools("git", "tar", "zstd")


@pytest.mark.parametrize("kind", sorted(git_kit.HOSTILE))
def test_the_marker_is_what_git_runs(tools: None, tmp_path: Path, kind: str) -> None:
    """The oracle works: git run in the repository, as the packing ran it before (`git
    archive`; read-tree and checkout-index for a submodule), creates the marker."""
    marker = tmp_path / "marker"
    top = git_kit.HOSTILE[kind](_repo_dir(tmp_path / "sources", kind), marker)
    if kind == "submodule fsmonitor":
        lib = top.parent / "lib"
        git_kit.git(lib, "read-tree", "HEAD")
        git_kit.git(lib, "checkout-index", "-a", "-f")
    else:
        git_kit.git(top, "archive", "HEAD", check=False)
    assert marker.exists()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", sorted(git_kit.HOSTILE))
def test_a_source_repository_runs_nothing(tools: None, tmp_path: Path, kind: str) -> None:
    """Packed as rawgit packs a checkout: no marker, and the tarball holds what the commit
    holds (a submodule's files too; a blob the partial clone lacks is left out, said)."""
    marker, sources = tmp_path / "marker", tmp_path / "sources"
    top = git_kit.HOSTILE[kind](_repo_dir(sources, kind), marker)
    gitdir = _gitdir(top)
    asked: list[str] = []

    def find(url: str) -> Path | None:
        asked.append(url)
        return sources / url.rsplit("/", 1)[-1] / ".git"

    out = tmp_path / "x-1.tar.zst"
    left_out = pack.git_pack(gitdir, "HEAD", "x-1", out, submodules="", find=find)
    assert not marker.exists(), f"{kind}: the repository's command ran"
    got = git_kit.unpacked(_unpack(out, tmp_path / "unpacked"))
    lacking = ("big.bin",) if kind == "promisor sshCommand" else ()
    want = git_kit.committed(gitdir, lacking=lacking)
    want.pop(".gitmodules", None)  # rawgit removes it
    assert left_out == list(lacking)
    if kind == "submodule fsmonitor":
        assert asked == [str(sources / "lib")]
        lib = git_kit.committed(sources / "lib" / ".git")
        want |= {f"deps/lib/{p}": v for p, v in lib.items()}
        want["deps/lib/.git"] = ("f", b"gitdir: ../../.git/modules/deps/lib\n")
    assert got == want


@pytest.mark.timeout(120)
def test_export_attributes_as_openwrt_applies_them(tools: None, tmp_path: Path) -> None:
    """A committed .gitattributes' export-subst and export-ignore still apply, as OpenWrt's
    rawgit applies them (the tarball's bytes are PKG_MIRROR_HASH's): the oracle is rawgit's
    own steps run here on a fresh clone (`git config core.abbrev 8`, `git archive HEAD`), no
    config of this machine. The source's config names a signature program (for %G?) and a
    smudge filter: neither runs."""
    marker = tmp_path / "marker"
    attrs = b"v.txt export-subst\nignored export-ignore\n* filter=x\n"
    fmt = b"$Format:%H %h %ct %an %s %G?$\n"
    top = git_kit.plain(tmp_path / "x", {".gitattributes": attrs, "v.txt": fmt,
                                         "ignored/y.txt": b"y\n"})  # fmt: skip
    git_kit.git(top, "config", "gpg.program", str(git_kit.hook_script(tmp_path, marker)))
    git_kit.git(top, "config", "filter.x.smudge", f"touch {marker}; cat")
    git_kit.sign_head(top)
    pack.git_pack(top / ".git", "HEAD", "x-1", tmp_path / "x-1.tar.zst")
    assert not marker.exists()
    got = git_kit.unpacked(_unpack(tmp_path / "x-1.tar.zst", tmp_path / "ours"))

    clone = tmp_path / "clone"
    git_kit.git(tmp_path, "clone", "-q", "--no-local", str(top), str(clone))
    git_kit.git(clone, "config", "core.abbrev", "8")
    archive = git_kit.git(clone, "archive", "--format=tar", "HEAD", binary=True)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    subprocess.run(["tar", "-x", "-C", str(theirs)], input=archive, check=True, timeout=60)
    assert got == git_kit.unpacked(theirs)
    assert "ignored/y.txt" not in got
    head = git_kit.git(top, "rev-parse", "HEAD").strip()
    assert got["v.txt"] == ("f", f"{head} {head[:8]} {git_kit.WHEN} t files N\n".encode())
    git_kit.git(top, "log", "-1", "--format=%G?")  # the oracle: git verifying runs it
    assert marker.exists()


@pytest.mark.timeout(120)
def test_gitmodules_reads_no_file_of_this_machine(tools: None, tmp_path: Path) -> None:
    """A committed .gitmodules that includes a file of this machine (include.path): the
    submodule's URL is the committed one, the included file's never seen (git config
    --blob followed includes: a FIFO there waited for ever, a config file's values were
    taken)."""
    sources = tmp_path / "sources"
    lib = git_kit.plain(sources / "lib")
    top = git_kit.plain(sources / "x")
    git_kit.git(top, "submodule", "add", "-q", str(lib), "deps/lib")
    host = tmp_path / "host-config"
    host.write_text('[submodule "deps/lib"]\n\turl = /nonexistent/evil\n')
    with (top / ".gitmodules").open("a") as f:
        f.write(f"[include]\n\tpath = {host}\n")
    git_kit.git(top, "commit", "-q", "-am", "lib")
    asked: list[str] = []

    def find(url: str) -> Path | None:
        asked.append(url)
        return lib / ".git"

    pack.git_pack(top / ".git", "HEAD", "x-1", tmp_path / "x-1.tar.zst", submodules="",
                  find=find)  # fmt: skip
    assert asked == [str(lib)]


REFUSAL = {
    ".git file": ".git is a file, not the repository's own folder",
    ".git link": ".git is a link, not the repository's own folder",
    "objects/info/alternates": "borrows objects from another (objects/info/alternates)",
    "objects folder a link": "is a link, not a folder of its own",
    "FIFO object": "is a FIFO (named pipe), not an object file",
    "FIFO HEAD": "HEAD is a FIFO (named pipe), not a ref file",
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", sorted(git_kit.REFUSED))
def test_a_repository_elsewhere_is_refused(tools: None, tmp_path: Path, kind: str) -> None:
    """Its git directory or objects elsewhere (a .git file or link, objects/info/alternates,
    a link among the objects) or a FIFO where git would wait: one error line naming the
    repository, found as `sources` finds it, before git runs; nothing hangs."""
    sources = tmp_path / "sources"
    sources.mkdir()
    top = git_kit.REFUSED[kind](sources / "x", tmp_path / "elsewhere")
    filler = dl.Filler(tmp_path / "tree", local=[sources], allow=(), archive=None,
                       log=tmp_path / "log")  # fmt: skip
    with pytest.raises(WolfError) as e:
        gitdir = filler._git_repo_of("https://wolf.invalid/x.git")
        assert gitdir is not None
        pack.git_pack(gitdir, "HEAD", "x-1", tmp_path / "x-1.tar.zst")
    assert str(top) in e.value.message and REFUSAL[kind] in e.value.message
    assert not (tmp_path / "x-1.tar.zst").exists()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["info/attributes smudge", "submodule fsmonitor", ".git file"])
def test_sources_tree(tools: None, tmp_path: Path, kind: str) -> None:
    """`sources --tree T --sources DIR --allow same-version,substitute` as a user runs it, on
    a tree whose package is fetched by git: the hostile repository's files are placed in dl/
    (the pinned commit; another commit when the tree pins one it lacks) and nothing ran; a
    repository elsewhere is one `error:` line, exit 2."""
    need_tools("make")
    marker, sources = tmp_path / "marker", tmp_path / "sources"
    sources.mkdir()
    if kind in git_kit.HOSTILE:
        top = git_kit.HOSTILE[kind](sources / "x", marker)
    else:
        top = git_kit.REFUSED[kind](sources / "x", tmp_path / "elsewhere")
    head = git_kit.git(tmp_path / "elsewhere" if kind == ".git file" else top,
                       "rev-parse", "HEAD").strip()  # fmt: skip
    tree = git_kit.mini_tree(tmp_path / "tree", "x", head)
    env = {"OPENWRT_WOLF_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path)}  # fmt: skip
    p = subprocess.run([sys.executable, "-m", "invoke", "sources", "--tree", str(tree),
                        "--sources", str(sources), "--allow", "same-version,substitute",
                        "--no-debian"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=550)  # fmt: skip
    assert not marker.exists()
    assert "Traceback" not in p.stderr
    if kind == ".git file":
        errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
        assert p.returncode == 2 and len(errors) == 1, p.stderr
        assert "elsewhere" in errors[0]
        assert not list((tree / "dl").glob("x-*"))
        return
    assert p.returncode == 0, p.stdout + p.stderr
    (placed,) = list((tree / "dl").glob("x-*.tar.zst"))
    got = git_kit.unpacked(_unpack(placed, tmp_path / "unpacked"))
    assert got["a.txt"] == ("f", b"hello\n") and got["link"] == ("l", b"a.txt")
