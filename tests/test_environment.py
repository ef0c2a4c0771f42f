"""The environment and option values as a user (or a CI job) sets them (issue 32, part C):
every bad value is one `error:` line and exit 2 before any work — no traceback, no command
run (stderr holds no `$ ` line), nothing written outside the test's directories."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import unavailable
from tests.trust.test_untrusted import NO_DAC

ROOT = Path(__file__).resolve().parent.parent


def invoke(
    *args: str, env: dict[str, str], cwd: Path = ROOT, drop: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    for name in drop:
        full.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "invoke", "--search-root", str(ROOT), *args],
        cwd=cwd, capture_output=True, text=True, timeout=300, env=full,
    )  # fmt: skip


def one_error_line(p: subprocess.CompletedProcess[str], names: str) -> None:
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and names in lines[0], p.stderr
    ran = [ln for ln in p.stderr.splitlines() if ln.startswith("$ ")]
    assert ran == [], p.stderr  # refused before any command ran


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, str]:
    return {"OPENWRT_WOLF_STORE": str(tmp_path / "s"), "OPENWRT_WOLF_CACHE": str(tmp_path / "c")}


VARIABLES = [
    ({"COLUMNS": "abc"}, "$COLUMNS 'abc'"),
    ({"COLUMNS": "0"}, "$COLUMNS 0"),
    ({"COLUMNS": "9" * 40}, "$COLUMNS"),
    ({"OPENWRT_WOLF_PROGRESS_EVERY": "abc"}, "$OPENWRT_WOLF_PROGRESS_EVERY 'abc'"),
    ({"OPENWRT_WOLF_PROGRESS_EVERY": "nan"}, "$OPENWRT_WOLF_PROGRESS_EVERY 'nan'"),
    ({"OPENWRT_WOLF_PROGRESS_EVERY": "1e300"}, "$OPENWRT_WOLF_PROGRESS_EVERY 1e+300"),
    ({"OPENWRT_WOLF_PROGRESS_EVERY": "0"}, "$OPENWRT_WOLF_PROGRESS_EVERY 0"),
]


@pytest.mark.parametrize(("env", "names"), VARIABLES, ids=[str(e) for e, _ in VARIABLES])
def test_bad_variable_is_one_line(env: dict[str, str], names: str, dirs: dict[str, str]) -> None:
    # term.py read them with int()/float() at import: a traceback before any task ran
    one_error_line(invoke("devices", env={**dirs, **env}), names)


def test_ascii_output_shows_what_it_cannot_encode(dirs: dict[str, str]) -> None:
    # the catalogue's en dash was a UnicodeEncodeError in rich with PYTHONIOENCODING=ascii
    p = invoke("devices", env={**dirs, "PYTHONIOENCODING": "ascii", "COLUMNS": "200"})
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "\\u2013" in p.stdout and "malta-be" in p.stdout


def _ib_dir(tmp_path: Path) -> str:
    """An ImageBuilder whose `make info` fails: build-config --imagebuilder logs it into the
    cache, so it is a task that writes to the cache at once and ends."""
    ib = tmp_path / "ib"
    ib.mkdir(exist_ok=True)
    (ib / "Makefile").write_text("info:\n\t@exit 3\n")
    return str(ib)


def _build_config(tmp_path: Path) -> list[str]:
    return ["build-config", "-f", "wolfssl", "-d", "tl-wr902ac", "--imagebuilder",
            _ib_dir(tmp_path)]  # fmt: skip


@pytest.mark.parametrize("kind", ["file", "FIFO", "/dev/full", "a link to /dev/full", "no user"])
def test_cache_that_is_no_directory_is_one_line(kind: str, tmp_path: Path) -> None:
    at = tmp_path / "cache"
    if kind == "file":
        at.write_text("")
    elif kind == "FIFO":
        os.mkfifo(at)
    elif kind == "/dev/full":
        at = Path("/dev/full")
    elif kind == "a link to /dev/full":
        at.symlink_to("/dev/full")
    env = {"OPENWRT_WOLF_STORE": str(tmp_path / "s"), "OPENWRT_WOLF_CACHE": str(at)}
    if kind == "no user":
        env["OPENWRT_WOLF_CACHE"] = "~nosuchuser/cache"
    want = "there is no user 'nosuchuser'" if kind == "no user" else "not a directory"
    one_error_line(invoke(*_build_config(tmp_path), env=env), want)


def test_cache_that_links_to_a_directory_is_used(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cache").symlink_to(tmp_path / "elsewhere")
    env = {"OPENWRT_WOLF_STORE": str(tmp_path / "s"), "OPENWRT_WOLF_CACHE": str(tmp_path / "cache")}
    p = invoke(*_build_config(tmp_path), env=env)
    assert "Traceback" not in p.stderr, p.stderr
    assert [x.name for x in (tmp_path / "elsewhere").iterdir()] == ["make-info.log"]
    assert (tmp_path / "cache").is_symlink()


@pytest.mark.parametrize("home", ["", "relative/home"])
def test_home_not_absolute_writes_nothing_here(home: str, tmp_path: Path) -> None:
    # Path.home() took HOME="" as "/" and a relative one under the current directory:
    # ~/.cache/openwrt-wolf was made there
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    p = invoke(*_build_config(tmp_path), env={"HOME": home, "OPENWRT_WOLF_STORE": str(tmp_path)},
               cwd=cwd, drop=("OPENWRT_WOLF_CACHE", "XDG_CACHE_HOME"))  # fmt: skip
    one_error_line(p, "$HOME")
    assert list(cwd.iterdir()) == []


def test_store_variable_of_no_user_is_one_line(tmp_path: Path) -> None:
    p = invoke("size-report", env={"OPENWRT_WOLF_STORE": "~nosuchuser/results",
                                   "OPENWRT_WOLF_CACHE": str(tmp_path / "c")})  # fmt: skip
    one_error_line(p, "$OPENWRT_WOLF_STORE '~nosuchuser/results': there is no user")


FOOTPRINT = ["footprint", "--library", "wolfssl", "--config", "minimal"]
BEFORE_WORK = [
    # the lab installed cross compilers and ran them before it looked at these
    ([*FOOTPRINT, "--version", "wolfssl=../../x"], "wolfSSL ../../x: no known sha256"),
    (["footprint", "--library", "nosuch"], "unknown library 'nosuch'"),
    (["footprint", "--library", "wolfssl", "--config", "small"], "has no config 'small'"),
    ([*FOOTPRINT, "--toolchain", "/nonexistent"], "--toolchain /nonexistent"),
    ([*FOOTPRINT, "--version", "wolfssl=5.9.2", "--store", "/dev/full"], "not a directory"),
]


@pytest.mark.parametrize(("args", "names"), BEFORE_WORK, ids=[" ".join(a) for a, _ in BEFORE_WORK])
def test_option_checked_before_any_work(args: list[str], names: str, dirs: dict[str, str]) -> None:
    one_error_line(invoke(*args, env=dirs), names)


NO_USER = "~nosuchuser/x"
PATH_OPTIONS = [
    ["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--tree", NO_USER],
    ["patch", "--tree", NO_USER],
    ["wolfssl-symbols", "--lib", NO_USER],
    ["size-report", "--store", NO_USER],
    ["worker", "--queue", "redis://127.0.0.1:9/0", "--key", NO_USER],
    ["footprint", "--toolchain", NO_USER],
    ["flash", "--device", "tl-wr902ac", "--host", "127.0.0.1", "--key", NO_USER],
    ["sources", "--fetch", "all", "--sources", f"/tmp,{NO_USER}"],
    ["perf", "--target", "qemu", "--toolchain", NO_USER],
]


@pytest.mark.parametrize("args", PATH_OPTIONS, ids=[" ".join(a) for a in PATH_OPTIONS])
def test_path_of_no_user_is_one_line(args: list[str], dirs: dict[str, str]) -> None:
    # pathlib's expanduser raised RuntimeError deep inside the task
    one_error_line(invoke(*args, env=dirs), "there is no user 'nosuchuser'")


def test_path_longer_than_the_kernel_takes_is_one_line(dirs: dict[str, str]) -> None:
    long = "/tmp/" + "x" * 300
    p = invoke("build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--tree", long,
               env=dirs)  # fmt: skip
    one_error_line(p, "longer than a path may be")


# --- invoke's own configuration files: .venv's `invoke` and ./wolf (cli.main) ---------------


def venv_invoke() -> list[list[str]]:
    if not (ROOT / ".venv" / "bin" / "invoke").exists():
        unavailable("./wolf has made no .venv here (run ./wolf --list once)")
    return [[str(ROOT / ".venv" / "bin" / "invoke"), "--search-root", str(ROOT)],
            [str(ROOT / "wolf")]]  # fmt: skip


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {
        k: v for k, v in os.environ.items() if k not in ("OPENWRT_WOLF_CACHE", "XDG_CACHE_HOME")
    }
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**full, **env})  # fmt: skip


def test_home_a_file(tmp_path: Path) -> None:
    # invoke's config loader opened ~/.invoke.yaml under it: NotADirectoryError, a traceback
    # before any task; now the file is not there, and the cache under it is one line
    (tmp_path / "home").write_text("")
    env = {"HOME": str(tmp_path / "home"), "OPENWRT_WOLF_STORE": str(tmp_path / "s")}
    for prefix in venv_invoke():
        one_error_line(run([*prefix, *_build_config(tmp_path)], env), "Not a directory")
        p = run([*prefix, "devices"], {**env, "COLUMNS": "200"})  # needs no cache: it runs
        assert p.returncode == 0 and "malta-be" in p.stdout, p.stderr


@pytest.mark.parametrize("kind", ["directory", "FIFO", "bad YAML", "unreadable"])
def test_invoke_configuration_file_is_read_as_untrusted(kind: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    conf = home / ".invoke.yaml"
    if kind == "directory":
        conf.mkdir()
    elif kind == "FIFO":
        os.mkfifo(conf)  # invoke's open() waited for a writer
    elif kind == "bad YAML":
        conf.write_text("a: [\n")
    else:
        conf.write_text("a: 1\n")
        conf.chmod(0)
    # root reads a chmod 000 file: as root, without CAP_DAC_OVERRIDE (as tests/trust do)
    no_dac = NO_DAC if kind == "unreadable" and os.geteuid() == 0 else []
    if no_dac and not shutil.which("setpriv"):
        unavailable("needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
    for prefix in venv_invoke():
        p = run([*no_dac, *prefix, "devices"], {"HOME": str(home)})
        one_error_line(p, f"invoke's configuration file {conf}")


def test_c_locale_reads_the_project_data_as_utf8() -> None:
    for prefix in venv_invoke():
        p = run([*prefix, "devices"], {"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0",
                                       "COLUMNS": "200"})  # fmt: skip
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        assert "malta-be" in p.stdout


SECRET = "SeCrEt-5e1f0c"
UPSTREAM = [
    # pathlib's RuntimeError, an IndexError from the URL's host part, a password with a space
    ({"OPENWRT_WOLF_SOURCES": "~nosuchuser/dl"}, "$OPENWRT_WOLF_SOURCES '~nosuchuser/dl'"),
    ({"OPENWRT_WOLF_SHARED": "~nosuchuser"}, "$OPENWRT_WOLF_SHARED '~nosuchuser'"),
    ({"OPENWRT_WOLF_SOURCES_URL": "no-url"}, "no-url is not an http:// or https:// URL"),
    ({"OPENWRT_WOLF_SOURCES_URL": f"http://u:a b{SECRET}@127.0.0.1:9/"}, "no whitespace"),
    ({"OPENWRT_WOLF_SOURCES_URL": "http://127.0.0.1:9/\nAFTER"}, "http://127.0.0.1:9/…"),
]


@pytest.mark.parametrize(("env", "names"), UPSTREAM, ids=[str(e) for e, _ in UPSTREAM])
def test_upstream_variables_are_one_line(
    env: dict[str, str], names: str, dirs: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "no-shared" / "openwrt").mkdir(parents=True)
    shared = {"OPENWRT_WOLF_SHARED": str(tmp_path / "no-shared")}
    p = invoke("sources", "--fetch", "json-c", env={**dirs, **shared, **env})
    one_error_line(p, names)
    assert SECRET not in p.stdout + p.stderr and "AFTER" not in p.stderr


def test_tree_variable_of_no_user_is_one_line(dirs: dict[str, str]) -> None:
    p = invoke("openwrt-tools", env={**dirs, "OPENWRT_TREE": "~nosuchuser/openwrt"})
    one_error_line(p, "$OPENWRT_TREE '~nosuchuser/openwrt': there is no user")
