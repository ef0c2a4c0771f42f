"""Connecting to a router and logging in (paramiko): the host key checked against known_hosts
(hostkeys.py), then the key, password, ssh-agent or a fresh OpenWrt's blank root; every
failure one WolfError line that says what to check."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import paramiko
import paramiko.auth_strategy

from ...errors import WolfError
from .failures import AuthFailed
from .hostkeys import HostKeyChanged, NewKeyPolicy, UnknownHostKey, fingerprint, load_known
from .login import Login, how

# paramiko logs every refused probe with a traceback; our own lines say what happened
logging.getLogger("paramiko").setLevel(logging.CRITICAL)


class _BlankRoot(paramiko.auth_strategy.AuthStrategy):
    """A new or wiped OpenWrt: root has no password. dropbear then lets it in with the "none"
    method (OpenWrt runs it with blank passwords allowed), some setups with an empty one."""

    def __init__(self, user: str) -> None:
        super().__init__(ssh_config=paramiko.SSHConfig())
        self.user = user

    def get_sources(self) -> Iterator[paramiko.auth_strategy.AuthSource]:
        yield paramiko.auth_strategy.NoneAuth(self.user)
        yield paramiko.auth_strategy.Password(self.user, lambda: "")


def open_client(login: Login) -> paramiko.SSHClient:
    """Connect and authenticate, or raise one clear WolfError."""
    kh = login.known_hosts_path()
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(
        NewKeyPolicy(kh, login.host_entry, accept_new=login.accept_new)
    )
    known = load_known(kh)
    for name, keys in known.items():  # HostKeys of the client: not saved back by paramiko
        for ktype, key in keys.items():
            client.get_host_keys().add(name, ktype, key)
    t = login.connect_timeout
    blank = login.password == "" and login.key is None
    try:
        client.connect(
            login.host,
            port=login.port,
            username=login.user,
            key_filename=str(login.key) if login.key else None,
            password=login.password,
            timeout=t,
            banner_timeout=t,
            auth_timeout=t,
            channel_timeout=t,
            # an explicit key or password means exactly that; otherwise behave like ssh
            allow_agent=login.key is None and login.password is None,
            look_for_keys=login.key is None and login.password is None,
            auth_strategy=_BlankRoot(login.user) if blank else None,
        )
    except UnknownHostKey as e:
        client.close()
        raise WolfError(
            f"host key of {login.host_entry} is not in {kh} (it offers {fingerprint(e.key)})",
            hint="check the fingerprint on the router (dropbearkey -y -f "
            "/etc/dropbear/dropbear_ed25519_host_key) and re-run with --accept-new",
        ) from None
    except paramiko.BadHostKeyException as e:
        client.close()
        raise HostKeyChanged(
            f"host key of {login.host_entry} changed: {kh} has {fingerprint(e.expected_key)}, "
            f"the router offers {fingerprint(e.key)}; refusing to connect",
            hint="if the router was reflashed or reset, remove the old key with "
            f"ssh-keygen -f {kh} -R '{login.host_entry}'",
            offered=e.key,
        ) from None
    except paramiko.AuthenticationException:
        client.close()
        raise AuthFailed(
            f"authentication failed for {login.where} with {how(login)}",
            hint="check --user, --key or --password (a fresh OpenWrt has no root password: "
            "--password and an empty answer)",
        ) from None
    except paramiko.ssh_exception.NoValidConnectionsError as e:
        client.close()
        raise WolfError(
            f"connection refused by {login.host}:{login.port}",
            hint="is the router up and is SSH (dropbear) listening on that port?",
        ) from e
    except TimeoutError:
        client.close()
        raise WolfError(
            f"no answer from {login.host}:{login.port} within {t:g} s",
            hint="check the address, the cable and that you are on the router's LAN",
        ) from None
    except paramiko.SSHException as e:
        client.close()
        if "No authentication methods available" in str(e):
            raise AuthFailed(
                f"no key or password to log in to {login.where} with",
                hint="give --key PATH or --password (an ssh-agent or ~/.ssh keys work too)",
            ) from None
        raise WolfError(f"SSH handshake with {login.host}:{login.port} failed: {e}") from None
    except OSError as e:
        client.close()
        raise WolfError(f"cannot connect to {login.host}:{login.port}: {e.strerror or e}") from None
    return client
