"""The queue's address: ``redis://[:PASSWORD@]HOST:PORT/DB[#NAME]``.

NAME picks the queue: ``builds`` (the default) for the build matrix, or the name of a router or
VM host, whose worker runs that hardware's measurements one at a time. The URL may carry
Redis's password: only ``shown()`` is ever printed, and nothing of the URL goes into records."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

import redis

from ..errors import WolfError

BUILDS = "builds"
ENV = "OPENWRT_WOLF_QUEUE"  # keeps a password off the command line (and out of `ps`)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_SCHEMES = ("redis", "rediss")


@dataclass(frozen=True)
class QueueURL:
    url: str  # without the #NAME; may hold the password, never print it
    name: str

    @classmethod
    def parse(cls, text: str | None) -> QueueURL:
        if text in (None, "", "env"):  # the URL from the environment, out of `ps`
            text = os.environ.get(ENV, "")
        text = text.strip()
        if not text:
            raise WolfError(
                "no queue given", hint=f"--queue redis://HOST:PORT/DB, or ${ENV} with --queue env"
            )
        u = urlsplit(text)
        base = urlunsplit((u.scheme, u.netloc, u.path, u.query, ""))
        if u.scheme not in _SCHEMES or not u.hostname:
            raise WolfError(
                f"--queue {redact(text)}: not a redis:// URL",
                hint="redis://[:PASSWORD@]HOST:PORT/DB[#QUEUE], e.g. redis://10.0.0.5:6379/0",
            )
        try:
            u.port  # noqa: B018 - a bad port raises here
        except ValueError:
            raise WolfError(f"--queue {redact(text)}: bad port") from None
        if u.path not in ("", "/") and not re.fullmatch(r"/\d{1,2}", u.path):
            raise WolfError(f"--queue {redact(text)}: the path is the database number, e.g. /0")
        name = u.fragment or BUILDS
        if not _NAME.match(name):
            raise WolfError(
                f"--queue ...#{name}: not a queue name",
                hint="letters, digits, '.', '_' and '-', e.g. #router-lab-1",
            )
        return cls(base, name)

    def shown(self) -> str:
        """The URL as printed: the password replaced, the queue name kept."""
        return f"{redact(self.url)}#{self.name}"

    def connect(self) -> redis.Redis:
        """A connection that answered PING, else one error line naming the URL."""
        try:
            conn = redis.Redis.from_url(
                self.url, socket_connect_timeout=10, health_check_interval=30
            )
            conn.ping()
        except (redis.RedisError, OSError, ValueError) as e:
            raise WolfError(
                f"cannot reach the queue at {redact(self.url)}: {scrub(str(e), self.url)}",
                hint="is redis-server running there, and are the address and password right?",
            ) from None
        return conn


def redact(url: str) -> str:
    """URL with any password replaced by ***."""
    u = urlsplit(url)
    if u.password is None:
        return url
    user = u.username or ""
    host = u.netloc.rsplit("@", 1)[1]
    return urlunsplit((u.scheme, f"{user}:***@{host}", u.path, u.query, u.fragment))


def scrub(text: str, url: str) -> str:
    """Text (an error message, a log line) with the URL's password removed."""
    pw = urlsplit(url).password
    for p in {pw, unquote(pw)} if pw else ():  # as written in the URL, and as sent to Redis
        text = text.replace(p, "***")
    return text
