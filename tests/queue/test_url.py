"""The queue URL: parsing, the queue name, and the password never shown."""

from __future__ import annotations

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.queue.url import ENV, QueueURL, redact, scrub


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
        ("redis://h/0#lab one", r"^--queue \.\.\.#lab one: not a queue name"),
    ],
)
def test_bad_urls_never_show_the_password(url: str, message: str) -> None:
    with pytest.raises(WolfError, match=message) as e:
        QueueURL.parse(url)
    assert "pw" not in str(e.value).replace("path", "")
