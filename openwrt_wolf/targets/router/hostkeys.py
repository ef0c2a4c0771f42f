"""The router's host key against a known_hosts file: fingerprints, the policy for a key not in
it (refused, or appended with --accept-new), and adding or removing one entry (atomically)
without touching the other lines."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import paramiko
import paramiko.auth_strategy

from ...errors import WolfError
from ...results.store import write_atomic

log = logging.getLogger("openwrt_wolf.targets.router")


class HostKeyChanged(WolfError):
    """The router offers a different host key than known_hosts has for it."""

    def __init__(self, message: str, *, hint: str, offered: paramiko.PKey) -> None:
        super().__init__(message, hint=hint)
        self.offered = offered


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's SHA256 fingerprint, as `ssh-keygen -l` prints it."""
    return f"{key.get_name()} {key.fingerprint}"


def load_known(path: Path) -> paramiko.HostKeys:
    keys = paramiko.HostKeys()
    if path.exists():
        try:
            keys.load(str(path))
        except (OSError, paramiko.SSHException) as e:
            raise WolfError(f"cannot read known_hosts {path}: {e}") from None
        except (UnicodeDecodeError, ValueError) as e:  # a binary or mangled file
            raise WolfError(
                f"known_hosts {path} is not a known_hosts file ({type(e).__name__} in it)",
                hint="give --known-hosts the file ssh uses (one 'host keytype base64' a line)",
            ) from None
    return keys


def _read_known(path: Path) -> str:
    try:
        return path.read_text() if path.exists() else ""
    except UnicodeDecodeError:
        raise WolfError(f"known_hosts {path} is not a known_hosts file (not text)") from None
    except OSError as e:
        raise WolfError(f"cannot read known_hosts {path}: {e.strerror or e}") from None


def forget_host(path: Path, entry: str) -> None:
    """Drop every known_hosts line for ``entry`` (hashed or not), keeping all others verbatim."""
    if not path.exists():
        return
    kept = []
    for line in _read_known(path).splitlines(keepends=True):
        parsed = None
        if line.strip() and not line.lstrip().startswith("#"):
            with contextlib.suppress(Exception):
                parsed = paramiko.hostkeys.HostKeyEntry.from_line(line)
        if parsed is not None and _entry_matches(parsed.hostnames, entry):
            continue
        kept.append(line)
    write_atomic(path, "".join(kept))


def _entry_matches(names: list[str], entry: str) -> bool:
    for name in names:
        if name.startswith("|1|"):
            salt = name.split("|")[2]
            if paramiko.HostKeys.hash_host(entry, salt) == name:
                return True
        elif name == entry:
            return True
    return False


def remember_host(path: Path, entry: str, key: paramiko.PKey) -> None:
    """Append one known_hosts line (what `ssh -o StrictHostKeyChecking=accept-new` does)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = _read_known(path)
    if old and not old.endswith("\n"):
        old += "\n"
    write_atomic(path, f"{old}{entry} {key.get_name()} {key.get_base64()}\n")


class UnknownHostKey(Exception):
    """The router's key is not in known_hosts and --accept-new was not given."""

    def __init__(self, key: paramiko.PKey) -> None:
        self.key = key


class NewKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Unknown key: remember it with accept_new, else refuse (paramiko calls this only for
    hosts absent from known_hosts; a changed key raises BadHostKeyException instead)."""

    def __init__(self, known_hosts: Path, entry: str, *, accept_new: bool) -> None:
        self.known_hosts, self.entry, self.accept_new = known_hosts, entry, accept_new

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        if not self.accept_new:
            raise UnknownHostKey(key)
        remember_host(self.known_hosts, self.entry, key)
        log.info("added %s (%s) to %s", hostname, fingerprint(key), self.known_hosts)
