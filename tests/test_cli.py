"""Every task shows its help both ways, and bad option values are one error line, never a
traceback. The oracles are invoke's own task list and data/hosttools.toml read here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import unavailable

ROOT = Path(__file__).resolve().parent.parent


def invoke(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def task_names() -> list[str]:
    out = invoke("--list").stdout
    names = re.findall(r"^  ([a-z][a-z0-9-]*)", out, re.M)
    assert len(names) >= 15, out
    return names


def test_invoke_task_help_for_every_task() -> None:
    bad = {}
    for name in task_names():
        p = invoke(name, "--help")
        if p.returncode != 0 or "Usage:" not in p.stdout or "Traceback" in p.stderr:
            bad[name] = (p.stdout + p.stderr)[-300:]
    assert bad == {}


def test_wolf_help_task_for_every_task() -> None:
    if not (ROOT / ".venv" / "bin" / "invoke").exists():
        unavailable("./wolf has made no .venv here (run ./wolf --list once)")
    bad = {}
    for name in task_names():
        p = subprocess.run(
            [str(ROOT / "wolf"), "--help", name], capture_output=True, text=True, timeout=120
        )
        if p.returncode != 0 or "Usage:" not in p.stdout:
            bad[name] = (p.stdout + p.stderr)[-300:]
    assert bad == {}


BAD_VALUES = [
    (["build", "--flavour", "mbedtls", "--device", "tl-wr902ac", "-j", "abc"], "-j 'abc'"),
    (["build", "--flavour", "mbedtls", "--device", "tl-wr902ac", "-j", "0"], "-j 0"),
    (["build", "--device", "tl-wr902ac"], "--flavour is required"),
    (["build-config", "--flavour", "wolfssl"], "--device is required"),
    (["fit", "--image", "x.bin"], "--device is required"),
    (["flash", "--device", "tl-wr902ac"], "--host is required"),
    (["vm"], "--image is required"),
    (["size-report", "--packages", "abc"], "--packages 'abc'"),
    (["measure-memory", "--boots", "abc"], "--boots 'abc'"),
    (["measure-memory", "--idle", "nan"], "--idle 'nan'"),
    (["measure-memory", "--idle", "inf"], "--idle 'inf'"),
    (["measure-memory", "--idle", "-1"], "--idle -1"),
    (["measure-memory", "--host", "127.0.0.1", "--port", "abc"], "--port 'abc'"),
    (["flash", "--device", "tl-wr902ac", "--host", "x", "--port", "abc"], "--port 'abc'"),
    (["flash", "--device", "tl-wr902ac", "--host", "x", "--wait-up", "soon"], "--wait-up"),
    (["hosttools", "--group", "nosuch"], "unknown host tool group 'nosuch'"),
    (["build", "--no-report", "-f", ",", "-d", "tl-wr902ac"], "no flavour in ','"),
    (["build", "--no-report", "-f", "mbedtls", "-d", " , "], "no device in ' , '"),
    (["footprint", "--ecc", "bogus"], "--ecc 'bogus': not an ECC choice"),
    (["footprint", "--library", "wolfssl", "--config", "minimal", "--ecc", ","], "--ecc ','"),
    (["worker", "--queue", "redis://127.0.0.1:9/0", "--name", "x\x1b]0;t\x07"], "--name"),
    (["worker", "--queue", "redis://127.0.0.1:9/0", "--heartbeat", "9" * 40], "--heartbeat"),
    # issue 32 (bench/hostile_env.py, option values): an empty value ran the defaults (every
    # library, case, flavour: an hour's builds), 65536 was tried as a port, 1e300 reached
    # sleep(), other scripts' digits were numbers, a path too long for the kernel a traceback
    (["footprint", "--library", ""], "--library '': an empty value"),
    (["footprint", "--version", " "], "--version ' ': an empty value"),
    (["tls-conformance", "--case", ""], "--case '': an empty value"),
    (["perf", "--target", "qemu", "--flavour", " "], "--flavour ' ': an empty value"),
    (["patch", "--tree", "/tmp", "--release", ""], "--release '': an empty value"),
    (["flash", "--device", "tl-wr902ac", "--host", "x", "--port", "65536"], "at most 65535"),
    (["measure-memory", "--host", "x", "--port", "70000"], "--port 70000: must be at most"),
    (["measure-memory", "--idle", "1e300"], "--idle 1e+300: must be at most"),
    (["build", "--flavour", "mbedtls", "--device", "tl-wr902ac", "-j", "٣"], "-j '٣'"),
    (["size-report", "--from", "/tmp/" + "x" * 5000], "longer than a path may be"),
    (["bench-size", "--size-mb", "65536"], "--size-mb 65536: must be at most 1024"),
    (["bench-size", "--repeat", "65536"], "--repeat 65536: must be at most 100"),
]


@pytest.mark.parametrize(("args", "names"), BAD_VALUES, ids=[" ".join(a) for a, _ in BAD_VALUES])
def test_bad_option_values_are_one_line(args: list[str], names: str, tmp_path: Path) -> None:
    p = invoke(*args, env={"OPENWRT_WOLF_STORE": str(tmp_path / "s"),
                           "OPENWRT_WOLF_CACHE": str(tmp_path / "c")})  # fmt: skip
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    assert len(lines) == 1 and names in lines[0], p.stderr
    assert "\x1b" not in p.stderr  # a name is shown, never sent to the terminal
    assert not (tmp_path / "c" / "footprint").exists()  # refused before any work


def test_hosttools_help_lists_every_group() -> None:
    groups = tomllib.loads((ROOT / "openwrt_wolf/data/hosttools.toml").read_text())["groups"]
    help_text = " ".join(invoke("hosttools", "--help").stdout.split())
    missing = [g for g in groups if not re.search(rf"\b{re.escape(g)}\b", help_text)]
    assert missing == [], help_text


def test_unknown_group_names_the_known_ones() -> None:
    groups = tomllib.loads((ROOT / "openwrt_wolf/data/hosttools.toml").read_text())["groups"]
    p = invoke("hosttools", "--group", "nosuch")
    assert all(g in p.stderr for g in groups), p.stderr


def test_build_config_prints_no_blank_line_for_the_default_flavour() -> None:
    # Mbed TLS is OpenWrt's default: it changes no package, so PACKAGES= is empty
    p = invoke("build-config", "--flavour", "mbedtls", "--device", "tl-wr902ac")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert "PACKAGES= is empty" in p.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["footprint", "--arch", "a" * 100_000],
        ["build", "--no-report", "-f", "mbedtls", "-d", ",".join(f"no{i}" for i in range(10_000))],
        ["tls-conformance", "--case", ",".join(f"c{i}" for i in range(10_000))],
    ],
    ids=["100,000-character arch", "10,000 devices", "10,000 cases"],
)
def test_an_error_line_is_not_a_page(args: list[str], tmp_path: Path) -> None:
    # the error echoed the whole value: a line of 100,000 characters
    p = invoke(*args, env={"OPENWRT_WOLF_STORE": str(tmp_path / "s"),
                           "OPENWRT_WOLF_CACHE": str(tmp_path / "c")})  # fmt: skip
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(lines) == 1, p.stderr[-500:]
    assert len(lines[0]) <= 1000


@pytest.mark.parametrize(
    "env",
    [None, {"PATH": "/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}],
    ids=["inherited", "ci-like"],  # a help shorter than the buffer is written at exit there
)
def test_help_into_a_closed_pipe_is_quiet(env: dict[str, str] | None) -> None:
    """`./wolf --help perf | head -1` once head has gone: the writer ends as a shell tool ends
    on SIGPIPE (141), with nothing on stderr (no BrokenPipeError trace). The pipe's reading
    end is closed before the program starts, so its first write fails, whatever the timing."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([str(ROOT / "wolf"), "--help", "perf"], stdout=w,
                           stderr=subprocess.PIPE, cwd=ROOT, timeout=120,
                           env=env)  # fmt: skip
    finally:
        os.close(w)
    assert p.returncode == 141 and b"Traceback" not in p.stderr, p.stderr.decode(errors="replace")
