"""The queue's address: ``redis://[:PASSWORD@]HOST:PORT/DB[#NAME]``.

NAME picks the queue: ``builds`` (the default) for the build matrix, or the name of a router or
VM host, whose worker runs that hardware's measurements one at a time. The URL may carry
Redis's password (in the URL or as ``?password=``): only ``shown()`` is ever printed, every
line printed is scrubbed of it (secrets.py), and nothing of the URL goes into records."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import redis

from ..errors import WolfError
from ..trust import secrets

BUILDS = "builds"
ENV = "OPENWRT_WOLF_QUEUE"  # keeps a password off the command line (and out of `ps`)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_SCHEMES = ("redis", "rediss")
# the URL parameters we pass on to redis-py (any other would reach its connection class)
_PARAMS = {"password", "username", "ssl_cert_reqs"}
_CERT_REQS = ("none", "optional", "required")
HINT = "redis://[:PASSWORD@]HOST:PORT/DB[#QUEUE], e.g. redis://10.0.0.5:6379/0"


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
        secrets.one_token(text, "--queue")  # its password is never printed from here on
        shown = secrets.shown(text)  # echoed in errors: up to a space or control character
        try:
            u = urlsplit(text)
        except ValueError:  # "redis://[::1": the bracket is not closed
            raise WolfError(f"--queue {shown}: not a URL (bad host)", hint=HINT) from None
        if "@" in text.split("://", 1)[-1] and "@" not in u.netloc:
            raise WolfError(
                f"--queue {shown}: the password holds '#', '/', '?' or '@'",
                hint="percent-encode them in the URL (%23 %2F %3F %40), or use ?password=",
            )
        try:
            host, _port = u.hostname, u.port  # a bad port raises here
        except ValueError:
            raise WolfError(f"--queue {shown}: bad port") from None
        base = urlunsplit((u.scheme, u.netloc, u.path, u.query, ""))
        if u.scheme not in _SCHEMES or not host:
            raise WolfError(f"--queue {shown}: not a redis:// URL", hint=HINT)
        if u.path not in ("", "/") and not re.fullmatch(r"/\d{1,2}", u.path):
            raise WolfError(f"--queue {shown}: the path is the database number, e.g. /0")
        _check_query(u.query, u.scheme, shown)
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
        except (redis.RedisError, OSError, ValueError, TypeError) as e:
            raise WolfError(
                f"cannot reach the queue at {redact(self.url)}: {scrub(str(e), self.url)}",
                hint="is redis-server running there, and are the address and password right?",
            ) from None
        return conn


def _check_query(query: str, scheme: str, shown: str) -> None:
    """Only the parameters we know reach redis-py (another would be a TypeError there)."""
    for k, v in parse_qsl(query, keep_blank_values=True):
        if k not in _PARAMS:
            raise WolfError(
                f"--queue {shown}: unknown URL parameter {k[:40]!r}",
                hint=f"known: {', '.join(sorted(_PARAMS))}",
            )
        if k == "ssl_cert_reqs" and (scheme != "rediss" or v not in _CERT_REQS):
            raise WolfError(
                f"--queue {shown}: ssl_cert_reqs={v[:20]!r}",
                hint=f"with rediss:// only, one of: {', '.join(_CERT_REQS)}",
            )


def redact(url: str) -> str:
    """URL with any password (user field, password, ?password=) replaced by ***."""
    return secrets.redact(url)


def scrub(text: str, url: str) -> str:
    """Text (an error message, a log line) with the URL's password removed."""
    secrets.remember(url)
    return secrets.scrub(text)
