"""The userland TLS consumers over real HTTPS: uclient-fetch and uhttpd built against each
ustream-ssl backend (Mbed TLS, OpenSSL, our native wolfSSL) talk to the host's OpenSSL
(`openssl s_server` / `s_client`), natively on x86_64 and cross-built for MIPS under qemu-user.

Oracles are the peer's own report of the negotiated session: s_server's -trace of the
ServerHello it sent (supported_versions and key_share for TLS 1.3, server_version and the
ServerKeyExchange curve for TLS 1.2) and s_client -brief ("Protocol version", "Server Temp
Key"); uclient-fetch's own error lines and exit codes for a certificate from an unknown CA and
for a wrong host name; nm -D for what the native backend imports from wolfSSL; the host's
OpenSSL reading px5g's certificate and encrypting what uencrypt encrypts."""

from __future__ import annotations

import contextlib
import functools
import re
import socket
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from openwrt_wolf.footprint import apk, stack, userland
from openwrt_wolf.patchset import symbols
from openwrt_wolf.perf import net as perfnet
from tests.conftest import free_port, need_tools, unavailable, userland_sources

# A cold run builds the libraries (OpenSSL: minutes) inside the first test's fixture, and a
# second xdist worker waits on the same build's lock: pytest's 900 s default is too short then.
pytestmark = pytest.mark.timeout(2700)

HOST_TOOLS = (
    "openssl",
    "cmake",
    "make",
    "patch",
    "pkg-config",
    "gcc",
    "x86_64-linux-gnu-strip",
    "/usr/include/crypt.h",
    "autoreconf",
    "libtoolize",
    "perl",
    "xz",
)
MIPS_TOOLS = (
    "mips-linux-gnu-gcc",
    "mips-linux-gnu-strip",
    "mips-linux-gnu-nm",
    "qemu-mips-static",
    "/usr/mips-linux-gnu/include/stdio.h",
)
GROUPS = ("X25519", "P-256")  # openssl -groups names
VERSIONS = {"1.2": "-tls1_2", "1.3": "-tls1_3"}
FLAVOURS = ("mbedtls", "openssl", "wolfssl")
TIMEOUT = 120  # qemu-user handshakes take seconds; a hang is a failure, not a wait


# --- fixtures: certificates, builds -------------------------------------------------------


def _openssl(*args: str | Path, cwd: Path) -> None:
    subprocess.run(
        ["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True, timeout=60
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for localhost (SAN) signed by it, and an unrelated CA."""
    need_tools("openssl")
    d = tmp_path_factory.mktemp("pki")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "30",
        "-subj",
        "/CN=wolf test CA",
        cwd=d,
    )
    _openssl("req", *ec, "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=localhost", cwd=d)
    (d / "ext").write_text("subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.crt",
        "-days",
        "30",
        "-extfile",
        "ext",
        cwd=d,
    )
    # RSA for uhttpd: in TLS 1.2 an ECDSA certificate's curve must be one the client lists
    # (RFC 8422), and Mbed TLS enforces it; an X25519-only client would get no handshake
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "rsa.key",
        "-out",
        "rsa.csr",
        "-subj",
        "/CN=localhost",
        cwd=d,
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        "rsa.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "rsa.crt",
        "-days",
        "30",
        "-extfile",
        "ext",
        cwd=d,
    )
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "other.key",
        "-out",
        "other.crt",
        "-days",
        "30",
        "-subj",
        "/CN=other CA",
        cwd=d,
    )
    (d / "www").mkdir()
    (d / "www" / "index.html").write_text("served by uhttpd\n")
    return d


def _build(flavour: str, arch: str) -> userland.UserlandBuild:
    need_tools(*HOST_TOOLS, *(MIPS_TOOLS if arch == "mips_24kc" else ()))
    userland_sources()
    return userland.build(flavour, arch=arch)


@pytest.fixture(scope="module", params=FLAVOURS)
def host_build(request: pytest.FixtureRequest) -> userland.UserlandBuild:
    return _build(request.param, "host")


@functools.cache
def _mips(flavour: str) -> userland.UserlandBuild:
    return _build(flavour, "mips_24kc")


# --- peers --------------------------------------------------------------------------------


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            pytest.fail(f"server exited ({proc.returncode}): {out[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    pytest.fail(f"nothing listens on port {port}")


def _stop(proc: subprocess.Popen[bytes], grace: float = 0.0) -> None:
    if grace:  # s_server -naccept 1 ends by itself; a SIGTERM first would cut its -msgfile short
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


PAGE = "HTTP/1.0 200 OK\r\nContent-Length: 20\r\nConnection: close\r\n\r\nserved by s_server!\n"


def _s_server(pki: Path, version: str, group: str, cert: str = "srv") -> Iterator[int]:
    """openssl s_server -HTTP for one connection, one version and one group, tracing the
    handshake (-trace) into pki/trace-<port>.txt: the peer's own record of the session."""
    port = free_port()
    (pki / "page").write_text(PAGE)
    argv = [
        "openssl",
        "s_server",
        "-accept",
        str(port),
        "-HTTP",
        "-naccept",
        "1",
        "-cert",
        f"{cert}.crt",
        "-key",
        f"{cert}.key",
        VERSIONS[version],
        "-groups",
        group,
        "-trace",
        "-msgfile",
        f"trace-{port}.txt",
    ]
    p = subprocess.Popen(argv, cwd=pki, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        _wait_listening_quiet(port, p)
        yield port
    finally:
        _stop(p, grace=5.0)


def server_session(trace: str) -> tuple[str, str]:
    session = perfnet.s_server_session(trace)
    assert session is not None and session[1] != "?", trace[-2000:]
    return session


def _wait_listening_quiet(port: int, proc: subprocess.Popen[bytes]) -> None:
    """s_server -naccept 1 would serve our probe; wait for its ACCEPT line instead."""
    assert proc.stdout is not None
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode(errors="replace")
        if "ACCEPT" in line:
            return
        if not line and proc.poll() is not None:
            pytest.fail(f"openssl s_server exited ({proc.returncode})")
    pytest.fail(f"openssl s_server did not start on port {port}")


def _fetch(
    ub: userland.UserlandBuild, pki: Path, url: str, ca: str = "ca.crt"
) -> subprocess.CompletedProcess[str]:
    try:  # uclient-fetch resolves "localhost" with the C library, from /etc/hosts
        socket.getaddrinfo("localhost", None)
    except OSError:
        unavailable("the name localhost does not resolve here (no /etc/hosts entry)")
    argv = ub.command(ub.uclient_fetch, "--ca-certificate", str(pki / ca), "-O", "-", url)
    return subprocess.run(argv, env=ub.env(), capture_output=True, text=True, timeout=TIMEOUT)


def _served_fetch(
    ub: userland.UserlandBuild,
    pki: Path,
    version: str,
    group: str,
    host: str = "localhost",
    ca: str = "ca.crt",
) -> tuple[subprocess.CompletedProcess[str], str]:
    """uclient-fetch against a fresh s_server behind a WAN-like relay (perf/net.py relay():
    without it the OpenSSL backend fails on the same host); (result, the server's trace)."""
    for port in _s_server(pki, version, group):
        with perfnet.relay(port) as front:
            r = _fetch(ub, pki, f"https://{host}:{front}/page", ca=ca)
    return r, (pki / f"trace-{port}.txt").read_text(errors="replace")


def check_fetch(ub: userland.UserlandBuild, pki: Path, version: str, group: str) -> None:
    r, trace = _served_fetch(ub, pki, version, group)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "served by s_server!\n"
    assert server_session(trace) == (version, group)


def check_untrusted(ub: userland.UserlandBuild, pki: Path) -> None:
    """A server certificate from a CA the client was not given: uclient-fetch's own line."""
    r, _ = _served_fetch(ub, pki, "1.3", "P-256", ca="other.crt")
    assert r.returncode == 5, (r.returncode, r.stderr)
    assert "Connection error: Invalid SSL certificate" in r.stderr
    assert "served by" not in r.stdout  # nothing downloaded


def check_wrong_name(ub: userland.UserlandBuild, pki: Path) -> None:
    """A trusted certificate for localhost, reached as 127.0.0.1."""
    r, _ = _served_fetch(ub, pki, "1.2", "X25519", host="127.0.0.1")
    assert r.returncode == 5, (r.returncode, r.stderr)
    assert "Connection error: Server hostname does not match SSL certificate" in r.stderr
    assert "served by" not in r.stdout


def check_uhttpd(ub: userland.UserlandBuild, pki: Path, version: str, group: str) -> None:
    port = free_port()
    argv = ub.command(
        ub.uhttpd,
        "-f",
        "-h",
        str(pki / "www"),
        "-s",
        f"127.0.0.1:{port}",
        "-C",
        str(pki / "rsa.crt"),
        "-K",
        str(pki / "rsa.key"),
    )
    p = subprocess.Popen(argv, env=ub.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        _wait_listening(port, p)
        client = subprocess.run(
            [
                "openssl",
                "s_client",
                "-connect",
                f"127.0.0.1:{port}",
                "-servername",
                "localhost",
                "-CAfile",
                str(pki / "ca.crt"),
                "-verify_return_error",
                "-brief",
                "-ign_eof",
                VERSIONS[version],
                "-groups",
                group,
            ],
            input="GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n",
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    finally:
        _stop(p)
    # no returncode check: uhttpd closes without close_notify (ustream-ssl's quiet shutdown),
    # which OpenSSL 3's s_client reports as "unexpected eof" after the response
    out = client.stdout + client.stderr
    assert re.search(rf"Protocol version: TLSv{re.escape(version)}\b", out), out
    temp = {"X25519": r"Server Temp Key: X25519", "P-256": r"Server Temp Key: ECDH, prime256v1"}
    assert re.search(temp[group], out), out
    assert "Verification: OK" in out, out
    assert "served by uhttpd" in out, out


# --- x86_64: the full matrix per backend --------------------------------------------------


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("version", list(VERSIONS))
def test_host_uclient_fetch_https(
    host_build: userland.UserlandBuild, pki: Path, version: str, group: str
) -> None:
    check_fetch(host_build, pki, version, group)


def test_host_uclient_fetch_rejects_unknown_ca(
    host_build: userland.UserlandBuild, pki: Path
) -> None:
    check_untrusted(host_build, pki)


def test_host_uclient_fetch_rejects_wrong_name(
    host_build: userland.UserlandBuild, pki: Path
) -> None:
    check_wrong_name(host_build, pki)


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("version", list(VERSIONS))
def test_host_uhttpd_https(
    host_build: userland.UserlandBuild, pki: Path, version: str, group: str
) -> None:
    check_uhttpd(host_build, pki, version, group)


def test_host_programs_use_the_lab_library(host_build: userland.UserlandBuild) -> None:
    """ldd (the host's loader) resolves libustream-ssl's TLS library inside the build's tree,
    not the build host's own libssl."""
    out = subprocess.run(
        ["ldd", str(host_build.libustream_ssl)],
        env=host_build.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    want = {"mbedtls": "libmbedtls", "openssl": "libssl", "wolfssl": "libwolfssl"}
    line = next(x for x in out.splitlines() if want[host_build.flavour] in x)
    assert str(host_build.root / "lib") in line, out


# --- MIPS under qemu-user: a subset (each handshake costs seconds of emulation) ----------
# Native wolfSSL (the new code): both versions x both groups for uclient-fetch, both error
# paths, uhttpd in TLS 1.3/X25519 and TLS 1.2/P-256. Mbed TLS and OpenSSL (unchanged upstream
# code): one uclient-fetch TLS 1.3/X25519, one uhttpd TLS 1.2/P-256, the unknown-CA error.

MIPS_FETCH = [("wolfssl", "1.3", "X25519"), ("wolfssl", "1.2", "P-256"),
              ("wolfssl", "1.3", "P-256"), ("wolfssl", "1.2", "X25519"),
              ("mbedtls", "1.3", "X25519"), ("openssl", "1.3", "X25519")]  # fmt: skip
MIPS_UHTTPD = [("wolfssl", "1.3", "X25519"), ("wolfssl", "1.2", "P-256"),
               ("mbedtls", "1.2", "P-256"), ("openssl", "1.2", "P-256")]  # fmt: skip


@pytest.mark.parametrize(("flavour", "version", "group"), MIPS_FETCH)
def test_mips_uclient_fetch_https(pki: Path, flavour: str, version: str, group: str) -> None:
    check_fetch(_mips(flavour), pki, version, group)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_mips_uclient_fetch_rejects_unknown_ca(pki: Path, flavour: str) -> None:
    check_untrusted(_mips(flavour), pki)


def test_mips_uclient_fetch_rejects_wrong_name(pki: Path) -> None:
    check_wrong_name(_mips("wolfssl"), pki)


@pytest.mark.parametrize(("flavour", "version", "group"), MIPS_UHTTPD)
def test_mips_uhttpd_https(pki: Path, flavour: str, version: str, group: str) -> None:
    check_uhttpd(_mips(flavour), pki, version, group)


# --- the native backend and the minimal export list ---------------------------------------


def _nm_undefined(nm: str, lib: Path) -> set[str]:
    out = subprocess.run(
        [nm, "-D", "--undefined-only", str(lib)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def _nm_defined(nm: str, lib: Path) -> set[str]:
    out = subprocess.run(
        [nm, "-D", "--defined-only", str(lib)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}


def test_native_backend_imports_are_the_consumer_list() -> None:
    """The MIPS libustream-ssl.so's wolfSSL imports (nm -D) are exactly the list the minimal
    library exports for libustream-wolfssl, and none is from the OpenSSL compatibility API."""
    ub = _mips("wolfssl")
    imported = {
        s
        for s in _nm_undefined("mips-linux-gnu-nm", ub.libustream_ssl)
        if s.startswith(("wolfSSL", "wolfTLS", "wc_", "sp_", "mp_", "ecc_"))
    }
    data = tomllib.loads(symbols.CONSUMERS_FILE.read_text())
    assert imported == set(data["consumer"]["libustream-wolfssl"]["symbols"])
    compat = re.compile(r"^wolfSSL_(X509|BIO|ERR_error_string$|CTX_set_options|.*_compat)")
    assert not [s for s in imported if compat.match(s)]
    exported = _nm_defined(
        "mips-linux-gnu-nm", next(p for p in ub.tls_libraries if "libwolfssl" in p.name)
    )
    assert imported <= exported


# --- px5g and uencrypt (host): checked by the host's OpenSSL ------------------------------


def test_host_px5g_certificate_reads_back(
    host_build: userland.UserlandBuild, tmp_path: Path
) -> None:
    if host_build.flavour == "openssl":
        # OpenWrt has no px5g-openssl (uhttpd's init uses /usr/bin/openssl): none is built
        assert host_build.px5g is None
        return
    assert host_build.px5g is not None
    # PEM (px5g's default): px5g-wolfssl writes its certificate as PEM even with -der
    argv = host_build.command(
        host_build.px5g, "selfsigned", "-days", "2", "-newkey", "ec",
        "-pkeyopt", "ec_paramgen_curve:P-256", "-keyout", str(tmp_path / "k.pem"),
        "-out", str(tmp_path / "c.pem"), "-subj", "/CN=wolf.lan",
    )  # fmt: skip
    subprocess.run(argv, env=host_build.env(), check=True, capture_output=True, timeout=TIMEOUT)
    text = subprocess.run(
        ["openssl", "x509", "-in", str(tmp_path / "c.pem"), "-noout", "-text"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert "CN = wolf.lan" in text and "ecdsa-with-SHA256" in text and "prime256v1" in text


def test_host_uencrypt_matches_openssl_enc(host_build: userland.UserlandBuild) -> None:
    if host_build.uencrypt is None:
        pytest.fail(f"uencrypt did not build: {host_build.notes}")
    key, iv = "00112233445566778899aabbccddeeff", "0f0e0d0c0b0a09080706050403020100"
    data = bytes(range(256)) * 5
    ours = subprocess.run(
        host_build.command(host_build.uencrypt, "-e", "-k", key, "-i", iv),
        input=data,
        env=host_build.env(),
        capture_output=True,
        check=True,
        timeout=TIMEOUT,
    ).stdout
    theirs = subprocess.run(
        ["openssl", "enc", "-aes-128-cbc", "-K", key, "-iv", iv],
        input=data,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    assert ours == theirs


# --- the whole TLS stack (footprint --stack) ----------------------------------------------


def test_stack_parts_are_the_installed_files(tmp_path: Path) -> None:
    """Each stack part is the file as installed: its size (stat) and its xz -9e size (the xz
    tool) match, and the parts are the flavour's packages."""
    _mips("wolfssl")  # skips/fails like the builds without tools or sources
    st = stack.collect("wolfssl", "mips_24kc", store_dir=str(tmp_path))
    ub = _mips("wolfssl")
    assert [p.component for p in st.parts] == [
        "TLS library", "libustream-ssl", "px5g", "uencrypt", "apk"
    ]  # fmt: skip
    assert [p.package for p in st.parts[1:]] == ["libustream-wolfssl", "px5g-wolfssl",
                                                 "uencrypt-wolfssl", "apk-wolfssl"]  # fmt: skip
    apk_dir = apk.root() / apk.for_footprint(ub.library).cache_key / "measure" / "installed"
    for part in st.parts[1:]:
        for f in part.files:
            base = apk_dir if part.component == "apk" else ub.root / "measure" / "installed"
            installed = base / f.name
            assert installed.stat().st_size == f.installed
            xz = subprocess.run(["xz", "-9e", "-c", str(installed)], capture_output=True,
                                check=True, timeout=120).stdout  # fmt: skip
            assert len(xz) == f.xz
    assert st.xz == sum(f.xz for p in st.parts for f in p.files)


def test_a_userland_links_only_its_own_library() -> None:
    """`library=` (bench/wolfssl_options.py: one configure option on or off) takes another
    build of the flavour's library, never another library: one error line before any build."""
    from openwrt_wolf.errors import WolfError
    from openwrt_wolf.footprint import spec

    need_tools(*HOST_TOOLS)
    other = spec.resolve("mbedtls", None, "openwrt", "x86_64")
    with pytest.raises(WolfError, match="links wolfSSL, not Mbed TLS"):
        userland.build("wolfssl", arch="host", library=other)
