"""Values that reach make, config files and feeds are OpenWrt names (catalogue/names.py):
`--packages '$(shell touch FILE)'` made GNU make run the shell command, a newline in
--packages added a config line, one in --feed a feed line.

Oracles: a sentinel file the make code would create (GNU make itself runs the Makefile of a
minimal ImageBuilder that expands $(PACKAGES) and $(FILES) as OpenWrt's does), the config and
feeds.conf lines read back with scripts/feeds' own pattern."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from openwrt_wolf.catalogue import names
from openwrt_wolf.errors import WolfError
from tests.build import mini_ib as mini_ib_kit
from tests.conftest import need_tools

ROOT = Path(__file__).resolve().parent.parent.parent


def invoke(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENWRT_WOLF_CACHE": str(tmp / "cache"),
           "OPENWRT_WOLF_STORE": str(tmp / "store")}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.fixture
def mini_ib(tmp_path: Path) -> Path:
    need_tools("make")
    return mini_ib_kit.make(tmp_path / "ib")


def _one_error(p: subprocess.CompletedProcess[str]) -> str:
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert len(errors) == 1, p.stderr
    return errors[0]


def test_the_minimal_imagebuilder_runs_make_with_packages(mini_ib: Path, tmp_path: Path) -> None:
    """The oracle works: a good value reaches make's manifest and image steps."""
    p = invoke("build", "--no-report", "-f", "wolfssl", "--stock", "-d", "tl-wr902ac",
               "--imagebuilder", str(mini_ib), "--packages", "luci-ssl,-ppp", "--files",
               str(tmp_path), tmp=tmp_path)  # fmt: skip
    assert p.returncode == 2, p.stderr  # the stand-in's make image fails, as it is told to
    saw = (mini_ib / "manifest-saw").read_text().split()
    assert "luci-ssl" in saw and "-ppp" in saw
    assert str(tmp_path) in (mini_ib / "image-saw").read_text()


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "link-out"])
def test_a_crafted_repositories_file_is_one_line_and_nothing_outside_changes(
    kind: str, mini_ib: Path, tmp_path: Path
) -> None:
    """--mirror rewrites the ImageBuilder's `repositories` for the run: a crafted one (a link
    to /dev/zero, a FIFO, a link to a file outside) is one line or replaced, never read
    without bound nor written through."""
    own = mini_ib / "repositories"
    victim = tmp_path / "victim"
    victim.write_text(
        "https://downloads.openwrt.org/releases/25.12.5/packages/x/base/packages.adb\n"
    )
    if kind == "dev-zero":
        own.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(own)
    else:
        own.symlink_to(victim)
    mirror = tmp_path / "mirror"
    feed = mirror / "releases/25.12.5/packages/mips_24kc/base/packages.adb"
    feed.parent.mkdir(parents=True)
    feed.write_bytes(b"")
    p = invoke("build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--imagebuilder",
               str(mini_ib), "--mirror", str(mirror), tmp=tmp_path)  # fmt: skip
    line = _one_error(p)
    assert victim.read_text().startswith("https://downloads.openwrt.org/"), "written through"
    if kind != "link-out":
        assert "repositories" in line, line
    else:  # read (bounded) and put back as a file; the mini ImageBuilder's make image fails
        assert "make image" in line, line
        assert not own.is_symlink() and own.read_text() == victim.read_text()


MAKE_CODE = [
    "$(shell touch {s})", "`touch {s}`", "$$(shell touch {s})", "${{shell touch {s}}}",
    "foo;touch {s}", "foo $(shell touch {s})", "luci,$(shell touch {s})",
    "$(file >{s},x)", "-$(shell touch {s})", "foo\n\ttouch {s}",
]  # fmt: skip


@pytest.mark.parametrize("template", MAKE_CODE)
@pytest.mark.parametrize("option", ["--packages", "--files"])
def test_make_code_in_an_option_never_runs(
    template: str, option: str, mini_ib: Path, tmp_path: Path
) -> None:
    sentinel = tmp_path / "PWNED"
    value = template.format(s=sentinel)
    p = invoke("build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--imagebuilder",
               str(mini_ib), option, value, tmp=tmp_path)  # fmt: skip
    assert not sentinel.exists(), "make ran code from the option"
    line = _one_error(p)
    assert "not an OpenWrt package name" in line or "not a plain path or word for make" in line
    assert not (mini_ib / "manifest-saw").exists()  # refused before any make


@pytest.mark.parametrize("what", ["packages", "diffconfig", "buildroot"])
@pytest.mark.parametrize("value", ["foo\nCONFIG_EVIL=y", "foo\r\nCONFIG_EVIL=y", "CONFIG_EVIL=y",
                                   "foo\u2028CONFIG_EVIL=y", "a b", "foo#x"])  # fmt: skip
def test_a_newline_in_packages_adds_no_config_line(what: str, value: str, tmp_path: Path) -> None:
    p = invoke("build-config", "-f", "wolfssl", "-d", "tl-wr902ac", "--what", what,
               "--packages", value, tmp=tmp_path)  # fmt: skip
    assert not [ln for ln in p.stdout.splitlines() if ln.startswith("CONFIG_EVIL")]
    assert "not an OpenWrt package name" in _one_error(p)


def test_good_names_still_reach_the_diffconfig(tmp_path: Path) -> None:
    p = invoke("build-config", "-f", "wolfssl", "-d", "tl-wr902ac", "--what", "diffconfig",
               "--packages", "luci-ssl,-ppp,kmod-nf-conntrack6", tmp=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "CONFIG_PACKAGE_luci-ssl=y" in lines and "# CONFIG_PACKAGE_ppp is not set" in lines
    assert "CONFIG_PACKAGE_kmod-nf-conntrack6=y" in lines


# scripts/feeds (v25.12.5) parse_file: the line it accepts
FEEDS_LINE = re.compile(r"^src-([\w\-]+)((?:\s+--\w+(?:=\S+)?)*)\s+(\w+)(?:\s+(\S.*))?$")


@pytest.mark.parametrize(
    "feed",
    ["/tmp/x\nsrc-git evil https://example.com/evil.git", "/tmp/a b", "/tmp/a#b",
     "/tmp/x\rsrc-git evil e", "/tmp/x\tsrc-git evil e", "/tmp/\x1b[2Jx",
     "/tmp/a';touch evil;'"],
)  # fmt: skip
def test_a_feed_path_adds_no_feed_line(feed: str, tmp_path: Path) -> None:
    """A feed path stays one feeds.conf token and one shell word: scripts/feeds puts it in
    single quotes for the shell (`ln -s '%s' '%s'`), so a quote would run the rest."""
    p = invoke("build-config", "-f", "wolfssl", "-d", "tl-wr902ac", "--what", "feeds",
               "--feed", feed, tmp=tmp_path)  # fmt: skip
    assert "evil" not in p.stdout
    assert "not one feeds.conf token" in _one_error(p)


def test_scripts_feeds_quotes_paths_for_the_shell(openwrt_tree_25125: Path) -> None:
    """Why a quote is refused above: the tree's scripts/feeds runs src-link and src-git with
    the path single-quoted inside a shell command line."""
    text = (openwrt_tree_25125 / "scripts" / "feeds").read_text()
    assert "'init'\t\t=> \"ln -s '%s' '%s'\"" in text
    assert "git clone --depth 1 '%s' '%s'" in text


def test_feeds_conf_lines_read_as_scripts_feeds_reads_them(tmp_path: Path) -> None:
    feed = tmp_path / "my-feed"
    feed.mkdir()
    p = invoke("build-config", "-f", "wolfssl", "-d", "tl-wr902ac", "--what", "feeds",
               "--feed", str(feed), tmp=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    feeds = []
    for ln in p.stdout.splitlines():
        body = re.sub(r"#.+$", "", ln)
        if body.strip():
            m = FEEDS_LINE.match(body)
            assert m, ln
            feeds.append((m.group(3), (m.group(4) or "").split()))
    assert feeds[-1] == ("wolf", [str(feed)])
    assert len({n for n, _ in feeds}) == len(feeds)  # no name twice (scripts/feeds dies)


@pytest.mark.parametrize("entry", ["libwolfssl", "-wpad-basic-mbedtls", "kmod-nf-conntrack6",
                                   "libstdcpp6", "python3-cryptography", "g++"])  # fmt: skip
def test_openwrt_package_names_pass(entry: str) -> None:
    assert names.package(entry) == entry


@pytest.mark.parametrize("entry", ["", "-", "--x", "$(x)", "a b", "a\nb", "a;b", "é", "a/b",
                                   ".hidden", "x" * 101])  # fmt: skip
def test_other_words_are_no_package_names(entry: str) -> None:
    with pytest.raises(WolfError, match="not an OpenWrt package name"):
        names.package(entry)


@pytest.mark.parametrize("arg", ["FILES=/a/$(shell x)", "BIN_DIR=/a b", "FILES=/a\nb",
                                 "PROFILE=x#y", "FILES=/a'b", "X", "lower=1"])  # fmt: skip
def test_make_variables_are_plain(arg: str) -> None:
    with pytest.raises(WolfError):
        names.make_variable(arg)


def test_a_group_is_a_packages_word_but_never_a_make_value() -> None:
    """`@https-server` is expanded (build/packages.expand) before anything reaches make: it
    passes --packages and is refused in PACKAGES= itself."""
    assert names.packages("@https-server,-firewall4") == ("@https-server", "-firewall4")
    with pytest.raises(WolfError, match="not an OpenWrt package name"):
        names.package("@$(x)")
    with pytest.raises(WolfError, match="not an OpenWrt package name"):
        names.make_variable("PACKAGES=uhttpd @https-server")


def test_sources_seed_packages_are_checked_before_make(tmp_path: Path) -> None:
    """`sources --tree T --device D --flavour F --packages P` writes the seeds `build --tree`
    would: P is checked as build's --packages is, before make reads a seed."""
    from openwrt_wolf.build.buildroot import Tree

    for need in ("Makefile", "include/target.mk", "config/Config-build.in"):
        (tmp_path / need).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / need).write_text("")
    p = subprocess.run(
        [str(ROOT / "wolf"), "sources", "--tree", str(tmp_path), "--device", "malta-be",
         "--flavour", "wolfssl", "--packages", "uhttpd,x$(shell touch pwned)"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode != 0 and "not an OpenWrt package name" in p.stderr
    assert not list(tmp_path.rglob("pwned")) and not (tmp_path / ".config").exists()
    assert Tree(tmp_path).top == tmp_path.resolve()  # the tree itself was fine
