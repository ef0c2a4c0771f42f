"""The host side of the network tests: certificates, the HTTPS client (data/perf/tlsprobe.c
against the footprint lab's OpenSSL 3.5 for the host), `openssl s_client -brief` as the
session's independent witness, and `openssl s_server -HTTP` behind a WAN-like relay as the
download server."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import proc, signals
from ..errors import WolfError
from ..files import outputs
from ..files.locks import locked
from ..footprint import lab as fp_lab
from ..footprint import spec, toolchain
from . import programs
from .crypto import settings
from .ports import free_port, wait_listening

TIMEOUT = 120.0
HOST_OPENSSL = ("openssl", "openwrt")  # the probe's library: footprint lab, x86_64
# the group names of `openssl s_client -groups` and of the probe (-g): the same OpenSSL names
GROUPS = {"x25519": "X25519", "p256": "P-256", "x25519mlkem768": "X25519MLKEM768"}
DOWNLOAD = "download.http"  # the download as s_server -HTTP serves it (pki.www)
SIGALG = "ecdsa_secp256r1_sha256"  # the server's P-256 certificate signs every handshake


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path
    cert: Path  # P-256 ECDSA, CN and SAN localhost
    key: Path
    www: Path  # uhttpd's document root and s_server -HTTP's directory


def _openssl(args: list[str], cwd: Path) -> None:
    proc.run(["openssl", *args], cwd=cwd, timeout=60)


def make_pki(d: Path, page_bytes: int, download_bytes: int) -> Pki:
    """A CA and a P-256 server certificate for localhost; a page and a download file."""
    d.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    _openssl(["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "30",
              "-subj", "/CN=openwrt-wolf perf CA"], d)  # fmt: skip
    _openssl(["req", *ec, "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=localhost"], d)
    (d / "ext").write_text("subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n")
    sign = ["-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-extfile", "ext"]
    _openssl(["x509", "-req", "-in", "srv.csr", *sign, "-out", "srv.crt", "-days", "30"], d)
    www = d / "www"
    www.mkdir(exist_ok=True)
    # deterministic, incompressible-looking content; its size is what matters
    (www / "page").write_bytes(bytes((i * 131 + 7) % 251 for i in range(page_bytes)))
    body = bytes((i * 61 + 3) % 253 for i in range(download_bytes))
    (www / "download").write_bytes(body)
    # s_server -HTTP sends the file as the whole response; with a length uclient-fetch knows
    # where the body ends (-WWW sends none and closes, which uclient reports as a reset)
    head = f"HTTP/1.0 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    (www / DOWNLOAD).write_bytes(head.encode() + body)
    return Pki(d, d / "ca.crt", d / "srv.crt", d / "srv.key", www)


def s_server_session(trace: str) -> tuple[str, str] | None:
    """(version, group) from `openssl s_server -trace`'s record of the session: its last
    ServerHello (after a HelloRetryRequest, the real one) and, for TLS 1.2, its
    ServerKeyExchange; None when it sent no ServerHello."""
    if "ServerHello, Length=" not in trace:
        return None
    hello = trace.rsplit("ServerHello, Length=", 1)[1].split("Record\n", 1)[0]
    if m := re.search(r"supported_versions\(43\), length=2\n\s+(TLS 1\.\d)", hello):
        version = m.group(1)
        group = re.search(r"NamedGroup: (\S+)", hello)
    else:
        legacy = re.search(r"server_version=0x[0-9a-f]+ \((TLS 1\.\d)\)", hello)
        if legacy is None:
            return None
        version = legacy.group(1)
        group = re.search(r"named_curve: (\S+)", trace)
    names = {"ecdh_x25519": "X25519", "secp256r1": "P-256"}
    found = group.group(1) if group else "?"
    return version.replace("TLS ", ""), names.get(found, found)


# --- the probe ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    exe: Path
    openssl: str  # the library version it runs against, e.g. "OpenSSL 3.5.7 (footprint lab)"
    app: Path  # that tree's own `openssl` program: s_client for the groups 3.0 lacks
    libdir: Path  # the library build's lib/ (for app)


def probe() -> Probe:
    """tlsprobe.c built natively against the footprint lab's OpenSSL build for the host, and
    that tree's apps/openssl (perf/programs.py, as for `openssl speed` on the target)."""
    arch = spec.get_arch("x86_64")
    tc = toolchain.find(arch)
    bs = spec.resolve(HOST_OPENSSL[0], None, HOST_OPENSSL[1], arch.name, ecc=None,
                      soft_float=False)  # fmt: skip
    fp = fp_lab.build_one(bs, tc, fp_lab.Request(arch=arch.name, libraries=(bs.library,),
                                                 configs=(bs.config,)))  # fmt: skip
    libroot = fp_lab.build_root() / fp.cache_key
    src = programs.data_file("tlsprobe.c")
    key = programs._key("tlsprobe", src.read_bytes().hex(), fp.cache_key, tc.identity)
    out = programs.root() / "tlsprobe" / f"tlsprobe-{key}" / "tlsprobe"
    with locked(out.parent.with_suffix(".lock")):
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(".tmp")
            proc.run([tc.tool("gcc"), "-O2", "-Wall", "-Wextra", "-Werror",
                      f"-I{libroot / 'include'}", "-o", tmp, src, f"-L{libroot / 'lib'}",
                      f"-Wl,-rpath,{libroot / 'lib'}", "-lssl", "-lcrypto", "-pthread"],
                     timeout=programs.COMPILE_TIMEOUT)  # fmt: skip
            outputs.publish(tmp, out)
    app = programs.bench_program(bs, tc, fp, libroot, quick=False,
                                 tool=settings()["tool"]["openssl"]).exes["all"]  # fmt: skip
    return Probe(out, f"OpenSSL {fp.version} ({fp.config} config, footprint lab, x86_64)", app,
                 libroot / "lib")  # fmt: skip


_CONN = re.compile(
    r"^conn i=(?P<i>\d+) ok=1 ms=(?P<ms>[\d.]+) version=(?P<version>\S+) group=(?P<group>\S+) "
    r"sig=(?P<sig>\S+) bytes=(?P<bytes>\d+)(?: cipher=(?P<cipher>\S+))?$"
)
_DONE = re.compile(r"^done ok=(?P<ok>\d+) failed=(?P<failed>\d+)$", re.M)


@dataclass(frozen=True)
class Conn:
    ms: float
    version: str
    group: str
    sig: str
    bytes: int
    cipher: str = "?"  # the negotiated suite, OpenSSL's name


@dataclass(frozen=True)
class ProbeRun:
    conns: list[Conn]
    ok: int
    failed: int
    errors: list[str]
    output: str
    summary: str  # the probe's last line


def parse_probe(text: str) -> ProbeRun:
    conns, errors = [], []
    for line in text.splitlines():
        if m := _CONN.match(line):
            c = Conn(float(m["ms"]), m["version"], m["group"], m["sig"], int(m["bytes"]),
                     m["cipher"] or "?")  # fmt: skip
            conns.append(c)
        elif line.startswith("conn ") and " ok=0 " in line:
            errors.append(line)
    done = _DONE.search(text)
    if not done:
        raise WolfError(f"tlsprobe printed no summary: {text[-500:]}")
    return ProbeRun(conns, int(done["ok"]), int(done["failed"]), errors, text, done.group(0))


def run_probe(
    pr: Probe,
    address: str,
    port: int,
    ca: Path,
    *,
    group: str | None = None,
    count: int = 1,
    jobs: int = 1,
    barrier: bool = False,
    handshake_only: bool = False,
    suites: str | None = None,
    path: str = "/page",
    timeout: float = TIMEOUT,
    on_line: Callable[[str], None] | None = None,
) -> ProbeRun:
    argv: list[str | Path] = [pr.exe, "-h", address, "-p", str(port), "-A", ca, "-s", "localhost",
                              "-n", str(count), "-j", str(jobs), "-r", path]  # fmt: skip
    if group:
        argv += ["-g", GROUPS[group], "-S", SIGALG]
    argv += ["-b"] if barrier else []
    argv += ["-k"] if handshake_only else []
    argv += ["-c", suites] if suites else []
    r = proc.run(argv, timeout=timeout, check=False, on_line=on_line)
    return parse_probe(r.output)


# --- s_client: the session's own report ---------------------------------------------------


def s_client_brief(address: str, port: int, ca: Path, group: str, pr: Probe | None = None) -> str:
    """One TLS 1.3 handshake by `openssl s_client -brief` (the host's; with pr, OpenSSL 3.5's
    own program), offering only `group` and the P-256 ECDSA signature algorithm: its report
    of the session (a failure line instead when the server refuses the group)."""
    openssl = str(pr.app) if pr else "openssl"
    env = {"LD_LIBRARY_PATH": str(pr.libdir)} if pr else None
    r = proc.run([openssl, "s_client", "-connect", f"{address}:{port}", "-servername",
                  "localhost", "-CAfile", ca, "-verify_return_error", "-brief", "-tls1_3",
                  "-groups", GROUPS[group], "-sigalgs", SIGALG],
                 timeout=TIMEOUT, check=False, input=b"", env=env)  # fmt: skip
    return r.output


# --- the download server: s_server -HTTP behind a relay -----------------------------------

WAN_DELAY = 0.5  # s: see relay()


@contextlib.contextmanager
def relay(
    port: int, delay: float = WAN_DELAY, connections: list[threading.Thread] | None = None
) -> Iterator[int]:
    """A TCP relay to 127.0.0.1:port that holds the server's first bytes of every connection
    for `delay` seconds, as a network between a router and a server does. `connections`, if
    given, collects one thread per connection, done once both ends have closed it: joined, it
    says that the server has read everything the client sent.

    Why: upstream's OpenSSL ustream backend (ustream-openssl.c at 99bd3d2, and at OpenWrt's
    pin 99f1c0db) checks the certificate's name against the peer CN that uclient hands over
    only after init_fd() returns. With the server on the same host and the client slowed by
    qemu-user, the server's whole flight is often already queued when init_fd()'s first
    SSL_connect() reads; the handshake completes inside init_fd() with no name to check, and
    uclient-fetch fails with "Failed to send request: Unknown error -1" (8 tries in a row on
    a CI machine). Mbed TLS and our native wolfSSL backend take the name before the
    handshake. The delay makes every run take the path a real network takes."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def pump(src: socket.socket, dst: socket.socket, hold: float) -> None:
        try:
            while data := src.recv(65536):
                time.sleep(hold)
                hold = 0.0
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def serve_one(client: socket.socket) -> None:
        try:
            with client, socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as srv:
                client.settimeout(TIMEOUT)
                up = threading.Thread(target=pump, args=(client, srv, 0.0), daemon=True)
                up.start()
                pump(srv, client, delay)
                up.join(TIMEOUT)
        except OSError:
            pass

    def accept() -> None:
        signals.keep_off_this_thread()  # the connection threads inherit the mask (signals.py)
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            conn = threading.Thread(target=serve_one, args=(client,), daemon=True)
            conn.start()
            if connections is not None:
                connections.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        with contextlib.suppress(OSError):  # wakes the blocked accept() (close alone does not)
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(10)


@contextlib.contextmanager
def download_server(pki: Pki) -> Iterator[int]:
    """`openssl s_server -HTTP` serving pki.www on the host (one connection at a time), behind
    relay(); yields the relay's port."""
    port = free_port()
    argv = ["openssl", "s_server", "-accept", str(port), "-HTTP", "-cert", str(pki.cert),
            "-key", str(pki.key), "-quiet"]  # fmt: skip
    logfile = pki.dir / f"s_server-{port}.log"
    with proc.spawn(argv, cwd=pki.www, output=logfile) as p:
        wait_listening("127.0.0.1", port, TIMEOUT, p)
        with relay(port) as front:
            yield front
