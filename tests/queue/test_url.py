"""The queue URL: parsing, the queue name, and the password never shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.queue.url import ENV, QueueURL, redact, scrub
from openwrt_wolf.trust import secrets

ROOT = Path(__file__).resolve().parent.parent.parent


def test_name_and_redaction() -> None:
    q = QueueURL.parse("redis://:s3cr%40t@10.0.0.5:6379/2#router-lab-1")
    assert q.name == "router-lab-1" and q.url == "redis://:s3cr%40t@10.0.0.5:6379/2"
    assert q.shown() == "redis://:***@10.0.0.5:6379/2#router-lab-1"
    assert QueueURL.parse("redis://h:6379/0").shown() == "redis://h:6379/0#builds"
    assert redact("redis://user:pw@h/0") == "redis://user:***@h/0"
    assert scrub("AUTH s3cr@t / s3cr%40t failed", q.url) == "AUTH *** / *** failed"


def test_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "redis://:pw@h:1/0")
    assert QueueURL.parse("env").url == "redis://:pw@h:1/0"
    monkeypatch.delenv(ENV)
    with pytest.raises(WolfError, match="no queue given"):
        QueueURL.parse("env")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://:pw@h/0", r"^--queue http://:\*\*\*@h/0: not a redis:// URL"),
        ("redis://:pw@h:99999/0", r"^--queue redis://:\*\*\*@h:99999/0: bad port"),
        ("redis://:pw@h/zero", r"^--queue redis://:\*\*\*@h/zero: the path is the database"),
        ("redis://h/0#lab one", r"^--queue redis://h/0#lab…: a URL holds no whitespace"),
        ("redis://h/0#lab\x1bone", r"^--queue redis://h/0#lab…: a URL holds no whitespace"),
        ("redis://h/0#lab.one!", r"^--queue \.\.\.#lab\.one!: not a queue name"),
    ],
)
def test_bad_urls_never_show_the_password(url: str, message: str) -> None:
    with pytest.raises(WolfError, match=message) as e:
        QueueURL.parse(url)
    assert "pw" not in str(e.value).replace("path", "")


# --- every form a URL can carry a password in (issue 20) ---------------------------------

SECRET = "SeCrEt-7f3a9c"
FORMS = [
    f"redis://:pa#ss-{SECRET}@127.0.0.1:9/0",  # '#': urlsplit reads a fragment
    f"redis://:pa/ss-{SECRET}@127.0.0.1:9/0",  # '/': a path
    f"redis://:pa?ss-{SECRET}@127.0.0.1:9/0",  # '?': a query
    f"redis://:p@ss-{SECRET}@127.0.0.1:9/0",  # '@' in the password
    f"redis://127.0.0.1:9/0?password={SECRET}",  # redis-py reads it
    f"redis://{SECRET}@127.0.0.1:9/0",  # the user field alone
    f"redis://user:{SECRET}@127.0.0.1:9/0",
    f"redis://:{SECRET}@[::1/0",
    f"rediss://:{SECRET}@127.0.0.1:9/0?ssl_cert_reqs=bogus",
    f"redis://:{SECRET}@127.0.0.1:99999/0",
    f"redis://:{SECRET}@127.0.0.1:9/0?db=x",
    f"redis://:{SECRET}%40x@127.0.0.1:9/0",
    f"http://user:{SECRET}@127.0.0.1:9/",
    # whitespace ended redact's URL before the @: the password was printed whole
    f"redis://u:pa ss-{SECRET}@127.0.0.1:9/0",
    f"redis://:pa\tss-{SECRET}@127.0.0.1:9/0",
    f"redis://:pa\nss-{SECRET}@127.0.0.1:9/0",
]


@pytest.mark.parametrize("url", FORMS)
def test_no_form_shows_the_password(url: str) -> None:
    assert SECRET not in secrets.shown(url)  # the value as an error line echoes it
    if not re.search(r"\s", url):  # in free text whitespace ends a URL
        assert SECRET not in redact(url)
    try:
        q = QueueURL.parse(url)
    except WolfError as e:
        assert SECRET not in str(e)
    else:
        assert SECRET not in q.shown()


@pytest.mark.parametrize("url", FORMS)
def test_no_task_prints_the_password(url: str, tmp_path: Path) -> None:
    """Through the CLI: nothing on stdout or stderr holds it, whatever the task says."""
    task = [["worker", "--burst"], ["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac"],
            ["measure-memory", "--host", "192.0.2.1"]][FORMS.index(url) % 3]  # fmt: skip
    p = subprocess.run(
        [sys.executable, "-m", "invoke", *task, "--queue", url],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "OPENWRT_WOLF_CACHE": str(tmp_path / "c"),
             "OPENWRT_WOLF_STORE": str(tmp_path / "s")},
    )  # fmt: skip
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert SECRET not in p.stdout + p.stderr
    assert len([ln for ln in p.stderr.splitlines() if ln.startswith("error:")]) == 1


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://[::1", "not a URL (bad host)"),
        ("rediss://h:1/0?ssl_cert_reqs=bogus", "ssl_cert_reqs='bogus'"),
        ("redis://h:1/0?ssl_cert_reqs=none", "ssl_cert_reqs='none'"),  # rediss:// only
        ("redis://h:1/0?socket_timeout=abc", "unknown URL parameter 'socket_timeout'"),
    ],
)
def test_bad_url_parts_are_one_line(url: str, says: str) -> None:
    with pytest.raises(WolfError, match=re.escape(says)):
        QueueURL.parse(url)


def test_scrub_takes_a_remembered_password_out_of_any_text() -> None:
    secrets.remember("redis://:s3cr%2Ft-xyz@h/0")
    assert secrets.scrub("AUTH failed for s3cr/t-xyz and s3cr%2Ft-xyz") == (
        "AUTH failed for *** and ***"
    )


@pytest.mark.parametrize("beat", ["99999999999999999999", "1" + "0" * 400, "0", "-5", "abc"])
def test_heartbeat_out_of_range_is_one_line(beat: str, tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "worker", "--burst", "--queue",
         f"redis://:{SECRET}@127.0.0.1:9/0", "--heartbeat", beat],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=dict(os.environ),
    )  # fmt: skip
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(errors) == 1 and "--heartbeat" in errors[0], p.stderr
    assert SECRET not in p.stdout + p.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--mirror",
         f"http://u:pa ss-{SECRET}@127.0.0.1:9/"],
        ["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--mirror",
         f"http://u:pa\nss-{SECRET}@127.0.0.1:9/"],
        ["worker", "--burst", "--queue", "redis://127.0.0.1:9/0", "--artifacts",
         f"http://u:pa ss-{SECRET}@127.0.0.1:9/"],
    ],
)  # fmt: skip
def test_mirror_password_with_whitespace_is_not_printed(argv: list[str], tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "invoke", *argv], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "OPENWRT_WOLF_CACHE": str(tmp_path / "c"),
                          "OPENWRT_WOLF_STORE": str(tmp_path / "s")},
    )  # fmt: skip
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(errors) == 1 and "Traceback" not in p.stderr, p.stderr
    assert SECRET not in p.stdout + p.stderr and "ss-" not in p.stdout + p.stderr


@pytest.mark.parametrize("task", [["worker", "--burst"], ["measure-memory", "--host", "x"]])
def test_what_follows_a_newline_is_not_echoed(task: list[str], tmp_path: Path) -> None:
    # the malformed URL was echoed whole: `\n` and whatever the value held after it
    after = "NOT-FOR-THE-LOG-81f2"
    p = subprocess.run(
        [sys.executable, "-m", "invoke", *task, "--queue", f"redis://127.0.0.1:9/0\n{after}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "OPENWRT_WOLF_CACHE": str(tmp_path / "c"),
             "OPENWRT_WOLF_STORE": str(tmp_path / "s")},
    )  # fmt: skip
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2 and len(errors) == 1, p.stderr
    assert after not in p.stdout + p.stderr
    assert "redis://127.0.0.1:9/0…" in errors[0]


def test_shown_hides_the_userinfo_of_a_value_and_stops_at_whitespace() -> None:
    assert secrets.shown("redis://u:a b@h/0") == "redis://u:***@h/0"
    assert secrets.shown("redis://:a\nb@h/0") == "redis://:***@h/0"
    assert secrets.shown("redis://h/0\nmore") == "redis://h/0…"
    assert secrets.shown("redis://h/0#" + "x" * 300).endswith("…")
