"""`invoke flash`: put a sysupgrade image on a router and check it came back with it.

An explicit state machine, one named state per step, each with its own timeout:

  connect → identify → check-space → copy → verify-checksum → test-image → upgrade
  → wait-down → wait-up → reconnect → verify → done

Nothing is written to flash before `upgrade`: every failure until then says "nothing was
flashed". From `upgrade` on the connection is expected to drop; we wait (bounded, with
progress) for the router to go away and come back, then check what it runs."""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path

import paramiko
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ... import term
from ...catalogue import devices
from ...catalogue.releases import parse_openwrt_release
from ...errors import WolfError
from ...results import key_policy
from ...results.flash import KIND, FlashResult, StateLog
from ...results.store import FileStore, Record, now_utc
from . import hostkeys, installed, ssh, sysupgrade
from .board import board
from .failures import AuthFailed, CommandTimeout, ConnectionLost
from .login import Login, how
from .reachable import wait_down, wait_up


class State(StrEnum):
    CONNECT = "connect"
    IDENTIFY = "identify"
    CHECK_SPACE = "check-space"
    COPY = "copy"
    VERIFY_CHECKSUM = "verify-checksum"
    TEST_IMAGE = "test-image"
    UPGRADE = "upgrade"
    WAIT_DOWN = "wait-down"
    WAIT_UP = "wait-up"
    RECONNECT = "reconnect"
    VERIFY = "verify"
    DONE = "done"


ORDER = list(State)
BEFORE_FLASH = set(ORDER[: ORDER.index(State.UPGRADE)])


@dataclass(frozen=True)
class Timeouts:
    """Seconds each state may take (the copy scales with the image: routers write /tmp to RAM,
    but a slow 100 Mbit link or a busy CPU doing SSH crypto is a few MB/s at best)."""

    connect: float = 15.0
    command: float = 60.0  # identify, check-space, verify-checksum, verify
    copy: float = 600.0
    test_image: float = 120.0
    upgrade: float = 180.0  # until sysupgrade drops the connection
    wait_down: float = 120.0
    wait_up: float = 300.0  # flashing 8-16 MiB of NOR plus a first boot
    poll: float = 2.0  # seconds between probes while waiting


TMP_MARGIN = 512 * 1024  # sysupgrade's config backup and stage2 need some room beside the image


def parse_df_available(output: str) -> int:
    """Available bytes from `df -k PATH` (busybox wraps long device names onto a 2nd line)."""
    lines = [ln for ln in output.splitlines() if ln.strip()]
    if len(lines) < 2 or not lines[0].lower().startswith("filesystem"):
        raise WolfError(f"cannot read df output: {output.strip()[-200:]!r}")
    tokens = " ".join(lines[1:]).split()
    try:
        return int(tokens[-3]) * 1024  # ... 1K-blocks Used Available Use% Mounted-on
    except (IndexError, ValueError):
        raise WolfError(f"cannot read df output: {output.strip()[-200:]!r}") from None


_UPGRADE_PREFIX = re.compile(r"^.*? upgrade: ")  # `v` in lib/upgrade/common.sh: "$(date) upgrade: "


def _oneline(output: str) -> str:
    lines = [_UPGRADE_PREFIX.sub("", ln).strip() for ln in output.splitlines()]
    return " | ".join(ln for ln in lines if ln) or "(no output)"


@dataclass
class FlashRequest:
    login: Login
    device: devices.Device
    image: sysupgrade.FlashImage
    flavour: str | None
    keep_settings: bool = False
    timeouts: Timeouts = field(default_factory=Timeouts)
    # prefix of the router's own files (/etc/openwrt_release, /tmp): "" on a real router;
    # the stand-in tests point it at the fake router's root directory
    sysroot: str = ""
    # after sysupgrade -n: take the router's new host key (and, when the key login is refused,
    # a fresh install's blank root password) without asking. Off: a machine in the middle
    # during the reboot would otherwise be trusted.
    trust_new_key_after_wipe: bool = False


class Flasher:
    """Runs the states in order; each handler returns the next state."""

    def __init__(self, req: FlashRequest, *, console: Console | None = None) -> None:
        self.req = req
        self.out = console or term.console(stderr=True)
        img = req.image
        self.result = FlashResult(
            device=req.device.profile,
            host=req.login.host,
            port=req.login.port,
            image=str(img.path),
            image_sha256=img.sha256,
            image_size=img.size,
            devices_from=img.devices_from,
            flavour=req.flavour,
            keep_settings=req.keep_settings,
        )
        self.target: ssh.SSHTarget | None = None
        self.remote = f"{req.sysroot}/tmp/{img.path.name}"
        self.on_router = False  # our copy is in the router's /tmp (RAM) and not yet flashed
        self.handlers: dict[State, Callable[[], State]] = {
            State.CONNECT: self.connect,
            State.IDENTIFY: self.identify,
            State.CHECK_SPACE: self.check_space,
            State.COPY: self.copy,
            State.VERIFY_CHECKSUM: self.verify_checksum,
            State.TEST_IMAGE: self.test_image,
            State.UPGRADE: self.upgrade,
            State.WAIT_DOWN: self.wait_down,
            State.WAIT_UP: self.wait_up,
            State.RECONNECT: self.reconnect,
            State.VERIFY: self.verify,
        }
        self.note = ""

    # -- driver --------------------------------------------------------------------------

    def run(self) -> FlashResult:
        state = State.CONNECT
        try:
            while state is not State.DONE:
                started, t0 = now_utc(), time.monotonic()
                self.note = ""
                self.out.print(f"[bold cyan]{state}[/]")
                try:
                    nxt = self.handlers[state]()
                except ConnectionLost as e:
                    if state in BEFORE_FLASH:
                        raise WolfError(
                            f"{state}: connection to {self.req.login.host_entry} dropped before "
                            f"sysupgrade started ({e.message}); nothing was flashed",
                            hint="check the router is up and re-run",
                        ) from None
                    raise WolfError(f"{state}: {e.message}", hint=e.hint) from None
                except WolfError as e:
                    if not e.message.startswith(f"{state}: "):
                        e = WolfError(f"{state}: {e.message}", hint=e.hint)
                    raise e from None
                except (paramiko.SSHException, OSError, EOFError) as e:
                    # anything the SSH layer did not name itself: still one line
                    raise WolfError(
                        f"{state}: SSH error talking to {self.req.login.host_entry}: "
                        f"{e or type(e).__name__}"
                    ) from None
                finally:
                    secs = round(time.monotonic() - t0, 2)
                    self.result.states.append(StateLog(str(state), started, secs, self.note))
                state = nxt
            self.result.ok = True
            self.out.print(f"[bold green]done[/]: {escape(self._summary())}")
            return self.result
        except WolfError as e:
            self.result.error = str(e)
            raise
        finally:
            if self.on_router:  # failed, dropped, Ctrl-C or SIGTERM between copy and flash
                self._remove_copy()
            self._keep_log()
            if self.target is not None:
                self.target.close()
            self._table()

    def _remove_copy(self) -> None:
        """Take our (partial) image out of the router's /tmp: it is RAM there. Over the
        session when it still works, else over a new one while the router is reachable."""
        q = shlex.quote(self.remote)
        deadline = time.monotonic() + max(self.req.timeouts.connect, 10.0)
        target = self.target
        while True:
            try:
                if target is None:
                    target = ssh.SSHTarget(self.req.login)
                res = target.run(f"rm -f {q}", timeout=self.req.timeouts.command)
                if res.exit_status == 0:
                    self.on_router = False
                    self.out.print(f"  removed {self.remote} from the router", markup=False)
                    return
            except (WolfError, paramiko.SSHException, OSError, EOFError):
                pass
            finally:
                if target is not None and target is not self.target:
                    target.close()
            target = None
            if time.monotonic() > deadline:
                break
            time.sleep(self.req.timeouts.poll)
        self.out.print(
            f"  [yellow]warning[/]: could not remove {escape(self.remote)} from the router; "
            f"it takes RAM until the next reboot: ssh {escape(self.req.login.where)} rm -f {q}"
        )

    def _keep_log(self) -> None:
        if self.target is not None:
            self.result.session_log += self.target.console_log()[-300:]

    def _table(self) -> None:
        title = f"flash {self.req.device.profile} at {self.req.login.host_entry}"
        table = Table(title=escape(title))
        for col in ("state", "seconds", "note"):
            table.add_column(col, justify="right" if col == "seconds" else "left")
        for s in self.result.states:
            table.add_row(s.state, f"{s.seconds:.1f}", escape(s.note))
        self.out.print(table)

    def _summary(self) -> str:
        a = self.result.after
        tls = ", ".join(self.result.tls_packages) or "not checked"
        return (
            f"{self.result.board_name} runs {a.get('DISTRIB_ID', 'OpenWrt')} "
            f"{a.get('DISTRIB_RELEASE', '?')} {a.get('DISTRIB_REVISION', '')}; TLS packages: {tls}"
        )

    def _run(self, command: str, timeout: float) -> tuple[int, str]:
        assert self.target is not None
        res = self.target.run(command, timeout=timeout)
        return res.exit_status, res.output

    # -- states --------------------------------------------------------------------------

    def connect(self) -> State:
        self.target = ssh.SSHTarget(self.req.login)
        return State.IDENTIFY

    def identify(self) -> State:
        t = self.req.timeouts.command
        b = board(self.target, timeout=t)  # type: ignore[arg-type]
        self.result.board_name = name = b.board_name
        self.result.model = b.model
        self.result.before = self._release()
        img = self.req.image
        if not sysupgrade.board_supported(img, name):
            raise WolfError(
                f"the router is a {name} ({self.result.model}); {img.path.name} is for "
                f"{', '.join(img.supported_devices)} (from {img.devices_from}); "
                "refusing before copying anything",
                hint="check --host and --device, or pick the image built for this router",
            )
        self.note = f"{name}, runs {self.result.before.get('DISTRIB_RELEASE', '?')}"
        self.out.print(f"  {self.note}", markup=False)
        return State.CHECK_SPACE

    def check_space(self) -> State:
        tmp = f"{self.req.sysroot}/tmp"
        status, out = self._run(f"df -k {shlex.quote(tmp)}", self.req.timeouts.command)
        if status != 0:
            raise WolfError(f"`df -k {tmp}` failed (exit {status}): {_oneline(out)[:200]}")
        avail = parse_df_available(out)
        need = self.req.image.size + TMP_MARGIN
        self.note = f"{avail // 1024} KiB free in /tmp"
        if avail < need:
            raise WolfError(
                f"not enough space in /tmp on the router: {avail // 1024:,} KiB free, the image "
                f"needs {self.req.image.size // 1024:,} KiB + {TMP_MARGIN // 1024} KiB; "
                "nothing was copied",
                hint="free RAM (remove files from /tmp, stop services) or reboot the router first",
            )
        return State.COPY

    def copy(self) -> State:
        assert self.target is not None
        size = self.req.image.size
        timeout = max(self.req.timeouts.copy, size / (256 * 1024))  # never below 256 KiB/s
        with Progress(
            TextColumn("  copy"),
            BarColumn(),
            DownloadColumn(),
            TimeElapsedColumn(),
            console=self.out,
            transient=True,
            disable=not self.out.is_terminal,  # off a terminal: plain lines instead
        ) as bar:
            task = bar.add_task("copy", total=size)
            self.on_router = True  # from the first byte on
            self.target.put(
                self.req.image.path,
                self.remote,
                timeout=timeout,
                progress=lambda done, total: bar.update(task, completed=done),
            )
        method = self.result.copy_method = self.note = self.target.copy_method
        self.out.print(f"  {size:,} bytes to {self.remote} via {method}", markup=False)
        return State.VERIFY_CHECKSUM

    def verify_checksum(self) -> State:
        q = shlex.quote(self.remote)
        status, out = self._run(f"sha256sum {q}", self.req.timeouts.command)
        got = out.split()[0] if status == 0 and out.split() else ""
        want = self.req.image.sha256
        if got != want:
            self._run(f"rm -f {q}", self.req.timeouts.command)
            raise WolfError(
                f"checksum mismatch after copy: the router has {got[:16] or '(no sha256sum)'}…, "
                f"the image is {want[:16]}…; removed the copy, nothing was flashed",
                hint="the transfer or the router's RAM corrupted it: re-run; if it repeats, "
                "reboot the router",
            )
        self.note = want
        return State.TEST_IMAGE

    def _sysupgrade_args(self) -> str:
        return "" if self.req.keep_settings else "-n "

    def test_image(self) -> State:
        q = shlex.quote(self.remote)
        cmd = f"sysupgrade -T {self._sysupgrade_args()}{q}"
        status, out = self._run(cmd, self.req.timeouts.test_image)
        self.result.sysupgrade_test_output = out
        if status != 0:
            self._run(f"rm -f {q}", self.req.timeouts.command)
            raise WolfError(
                f"`sysupgrade -T` rejected the image (exit {status}), nothing was flashed: "
                f"{_oneline(out)}",
                hint="-F would force it: don't, unless you know why the check is wrong",
            )
        return State.UPGRADE

    def upgrade(self) -> State:
        assert self.target is not None
        cmd = f"sysupgrade {self._sysupgrade_args()}-v {shlex.quote(self.remote)}"
        seen: list[str] = []
        self.on_router = False  # sysupgrade owns the file from here (and reboots the router)

        def show(line: str) -> None:
            seen.append(line)
            self.out.print(f"  [dim]{escape(_UPGRADE_PREFIX.sub('', line))}[/]")

        note = "connection dropped"
        try:
            res = self.target.run(cmd, timeout=self.req.timeouts.upgrade, on_line=show)
        except ConnectionLost:
            self.result.sysupgrade_output = "\n".join(seen)
            if not any("Commencing upgrade" in s for s in seen):
                note += " before 'Commencing upgrade'"
            self.note = note
            return State.WAIT_DOWN
        except CommandTimeout:
            raise WolfError(
                f"sysupgrade still running after {self.req.timeouts.upgrade:g} s and the "
                "connection is still up",
                hint="the router may be writing flash: do not power it off; look at it with "
                "`logread` over SSH",
            ) from None
        self.result.sysupgrade_output = "\n".join(seen)
        if res.exit_status == -1:  # killed by a signal: procd ending every session
            self.note = "sysupgrade was killed (sessions closed)"
            return State.WAIT_DOWN
        if res.exit_status != 0:
            raise WolfError(
                f"sysupgrade failed (exit {res.exit_status}) before flashing: "
                f"{_oneline(res.output)}"
            )
        self.note = "sysupgrade returned; waiting for the connection to drop"
        return State.WAIT_DOWN

    def _waiting(self, what: str, timeout: float, fn: Callable[..., str]) -> str:
        with Progress(
            TextColumn(f"  {what}"),
            BarColumn(),
            TextColumn("{task.completed:.0f}/{task.total:.0f} s  {task.description}"),
            console=self.out,
            transient=True,
            disable=not self.out.is_terminal,  # off a terminal: plain lines instead
        ) as bar:
            task = bar.add_task("", total=timeout)

            said = [-1.0]

            def poll(elapsed: float, seen: str) -> None:
                bar.update(task, completed=min(elapsed, timeout), description=seen)
                if not self.out.is_terminal and elapsed - said[0] >= 10:
                    said[0] = elapsed  # logs and pipes get a line every 10 s instead of a bar
                    msg = f"  {what}: {elapsed:.0f}/{timeout:.0f} s, {seen}"
                    self.out.print(msg, markup=False)

            return fn(
                self.req.login, timeout=timeout, interval=self.req.timeouts.poll, on_poll=poll
            )

    def wait_down(self) -> State:
        if self.target is not None:
            self._keep_log()
            self.target.close()
            self.target = None
        self.note = self._waiting("router going down", self.req.timeouts.wait_down, wait_down)
        self.out.print(f"  down ({self.note})", markup=False)
        return State.WAIT_UP

    def wait_up(self) -> State:
        self.note = self._waiting("router coming back", self.req.timeouts.wait_up, wait_up)
        self.out.print(f"  up: {self.note}", markup=False)
        return State.RECONNECT

    def reconnect(self) -> State:
        login = self.req.login
        deadline = time.monotonic() + max(self.req.timeouts.connect, 30.0)
        while True:
            try:
                self.target = ssh.SSHTarget(login)
                return State.VERIFY
            except hostkeys.HostKeyChanged as e:
                if self.req.keep_settings:
                    raise  # settings (and dropbear's keys) were kept: a new key is not ours
                # sysupgrade -n wiped /etc, so dropbear made new host keys on first boot:
                # expected, but only taken when asked, since anyone in the middle could offer it
                kh = login.known_hosts_path()
                if not self.req.trust_new_key_after_wipe:
                    raise WolfError(
                        f"{login.host_entry} offers a new host key after the settings were "
                        f"wiped (sysupgrade -n): {hostkeys.fingerprint(e.offered)}; not trusted",
                        hint="if the router's console shows that fingerprint (dropbearkey -y -f "
                        "/etc/dropbear/dropbear_ed25519_host_key), accept it with: ssh-keygen "
                        f"-f {shlex.quote(str(kh))} -R {shlex.quote(login.host_entry)} && ssh "
                        f"-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile="
                        f"{shlex.quote(str(kh))} -p {login.port} {login.user}@{login.host} true"
                        "; or flash with --trust-new-key-after-wipe",
                    ) from None
                msg = (
                    f"{login.host_entry} has a new host key after the settings were wiped "
                    f"(sysupgrade -n): {hostkeys.fingerprint(e.offered)}; "
                    f"replacing the old one in {kh}"
                )
                self.out.print(f"  [yellow]warning[/]: {escape(msg)}")
                hostkeys.forget_host(kh, login.host_entry)
                hostkeys.remember_host(kh, login.host_entry, e.offered)
                self.result.host_key_changed = True
            except AuthFailed:
                if self.req.keep_settings or login.password == "":
                    raise
                if not self.req.trust_new_key_after_wipe:
                    raise WolfError(
                        f"the router refused {how(login)} after the settings were wiped "
                        "(sysupgrade -n took its authorized_keys); no blank password is tried "
                        "unless asked",
                        hint="log in on its console or web UI to set a key or password; or flash "
                        "with --trust-new-key-after-wipe (takes the new key and a fresh "
                        "install's blank root password)",
                    ) from None
                # asked for: a wiped OpenWrt has no root password and no authorized_keys, so
                # log in as a fresh install allows (empty password)
                self.out.print(
                    "  key refused after the wipe; trying a fresh install's empty password"
                )
                login = replace(login, key=None, password="")
            except WolfError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(self.req.timeouts.poll)

    def verify(self) -> State:
        assert self.target is not None
        img, res = self.req.image, self.result
        res.after = after = self._release()
        got = f"{after.get('DISTRIB_RELEASE', '?')} {after.get('DISTRIB_REVISION', '?')}"
        want = f"{img.version} {img.revision}"
        if (img.version and after.get("DISTRIB_RELEASE") != img.version) or (
            img.revision and after.get("DISTRIB_REVISION") != img.revision
        ):
            raise WolfError(
                f"the router came back with OpenWrt {got}, not the image's {want}",
                hint="it may have rejected the image at boot and kept the old firmware; "
                "see `logread` on the router",
            )
        if self.req.flavour is None:
            self.note = f"runs {got}; flavour unknown, TLS packages not checked"
            self.out.print(f"  {self.note} (pass --flavour)", markup=False)
            return State.DONE
        manager, pkgs = installed.installed(self.target, timeout=self.req.timeouts.command)
        check = installed.check(manager, pkgs, self.req.flavour, img.variant, img.libraries)
        res.package_manager, res.tls_packages = manager, list(check.tls_packages)
        if not check.ok:
            problems = []
            if check.missing:
                problems.append(f"missing {', '.join(check.missing)}")
            if check.unwanted:
                problems.append(f"still installed: {', '.join(check.unwanted)}")
            raise WolfError(
                f"the router runs {got}, but its TLS packages ({manager}) do not match "
                f"{check.flavour}{f' ({img.variant})' if img.variant else ''}: "
                f"{'; '.join(problems)}",
                hint="the image was not built for this flavour; check its build record",
            )
        self.note = f"runs {got}; {manager}: {', '.join(check.tls_packages)}"
        if img.variant == "patch-set" and not img.libraries:
            self.note += " (no build record of the image: the library's build not compared)"
        return State.DONE

    def _release(self) -> dict[str, str]:
        path = f"{self.req.sysroot}/etc/openwrt_release"
        status, out = self._run(f"cat {shlex.quote(path)}", self.req.timeouts.command)
        if status != 0:
            raise WolfError(f"cannot read {path} on the router: {_oneline(out)[:200]}")
        return parse_openwrt_release(out)


def store_result(store: FileStore, device: devices.Device, result: FlashResult) -> Path:
    host = re.sub(r"[^A-Za-z0-9.-]", "-", result.host)
    stamp = now_utc().replace(":", "").replace("-", "")
    key = key_policy.named(device.profile, host, str(result.port), stamp)
    return store.put(
        Record(
            kind=KIND,
            key=key,
            release=device.release,
            device=device.profile,
            flavour=result.flavour,
            data=asdict(result),
        )
    )
