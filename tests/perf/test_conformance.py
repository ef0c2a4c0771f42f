"""The certificate verification conformance suite (perf/conformance.py) in CI: every case of
data/perf/conformance.toml against the Mbed TLS, OpenSSL and native wolfSSL ustream-ssl
backends (the userland lab's host builds), one test item per case and backend.

Oracles: uclient-fetch's own exit lines and the file it downloaded (the body the server was
given), `openssl s_server -trace`'s ServerHello for the negotiated version, what a raw
`s_server` printed for whether the request left the client; certificates made with the openssl
CLI. Expected outcomes are the data file's, written from the RFCs and upstream's OpenSSL
backend. The whole matrix runs once per session (cases in parallel, shared by the xdist
workers through a file lock); docs/security.md's table must equal the one this run renders."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.files.locks import locked
from openwrt_wolf.footprint import userland
from openwrt_wolf.host import upstream
from openwrt_wolf.paths import PROJECT_ROOT
from openwrt_wolf.perf import conformance
from tests.conftest import need_tools, unavailable
from tests.footprint.test_userland import _build

pytestmark = [
    pytest.mark.timeout(2700),  # a cold run builds three libraries first
    pytest.mark.xdist_group("conformance"),
]  # its tests wait on one shared run

DOCS = PROJECT_ROOT / "docs" / "security.md"
_, CASES = conformance.load()
BACKENDS = {f: userland.BACKENDS[f] for f in userland.FLAVOURS}


@pytest.fixture(scope="session")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], conformance.Result]:
    """One run of the whole table, shared by every xdist worker of this session."""
    need_tools("openssl", "unshare", "mount")
    _namespace_or_skip(tmp_path_factory.mktemp("ns"))
    # xdist: the workers' basetemps share a parent, new for each session; serial: our own
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    done = shared / "conformance-results.json"
    with locked(shared / "conformance.lock"):
        if not done.exists():
            builds = {f: _build(f, "host") for f in userland.FLAVOURS}
            run = conformance.run(builds, builds[conformance.SERVER_FLAVOUR], shared / "lab")
            done.write_text(json.dumps([r.to_dict() for r in run]))
    loaded = [conformance.Result.from_dict(d) for d in json.loads(done.read_text())]
    return {(r.case, r.backend): r for r in loaded}


@pytest.mark.parametrize("backend", list(BACKENDS.values()))
@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_case(results: dict[tuple[str, str], conformance.Result], case: str, backend: str) -> None:
    r = results[case, backend]
    assert r.ok, f"{case} on {backend}: {'; '.join(r.problems)}\n{r.measured.log[-3000:]}"


def test_docs_table_is_this_run(results: dict[tuple[str, str], conformance.Result]) -> None:
    """docs/security.md carries the table of a run (./wolf tls-conformance --write-docs):
    it must say what this fresh run measured."""
    table = [results[c.name, b] for c in CASES for b in BACKENDS.values()]
    assert conformance.read_docs_block(DOCS.read_text()) == conformance.docs_block(table)


def test_every_rejection_is_a_verification_and_none_is_accidental() -> None:
    """The table itself: each rejected case fails for one stated reason in every fetch, and
    the attack cases the issue names are in it with the outcomes the RFCs ask for."""
    by = {c.name: c for c in CASES}
    for name in ("poison-untrusted-ca", "poison-expired-intermediate"):
        assert by[name].expect.outcomes == ("bad-cert", "bad-cert")
        assert not by[name].backends
    for name in ("wildcard-partial", "wildcard-multi-label", "wildcard-bare"):
        assert by[name].expect.outcomes == ("bad-name",)
        assert "wolfssl-native" not in by[name].backends
    # our backend is never given an expectation of its own: it must meet the RFC/OpenSSL one
    assert all("wolfssl-native" not in c.backends for c in CASES)


def test_classify_reads_uclient_fetch_lines(tmp_path: Path) -> None:
    """The outcome reader on uclient-fetch's real line formats (uclient-fetch.c)."""
    good = tmp_path / "good.txt"
    good.write_text("body\n")
    out = (
        "Downloading 'https://localhost:1/a'\nConnecting to 127.0.0.1:1\n"
        "SSL verify error: certificate verify failed\nConnection error: Invalid SSL certificate\n"
        "Connecting to 127.0.0.1:2\nWriting to 'good.txt'\nDownload completed (5 bytes)\n"
        "Connecting to 127.0.0.1:3\n"
        "Connection error: Server hostname does not match SSL certificate\n"
    )
    got = conformance.classify(
        out, [1, 2, 3, 4], ["x", "body\n", "x", "x"], [tmp_path / "a", good, good, good]
    )
    assert got == ("bad-cert", "ok", "bad-name", "not tried")
    # a completed download whose bytes differ is not ok
    assert conformance.classify(out, [2], ["other\n"], [good])[0].startswith("error:")


def _namespace_or_skip(d: Path) -> None:
    try:
        conformance.check_namespace(d)
    except WolfError as e:
        unavailable(e.message)


# --- without required validation, the backend still tells the truth -------------------------
# uclient-fetch --no-check-certificate shows nothing of it, so a small ustream-ssl client
# (ustream_probe.c, built against the backend's own libustream-ssl) prints valid_cert and
# valid_cn. What is true follows from the case's expected outcome: a bad-cert case has no
# valid certificate, only an ok case a valid name. Mbed TLS is left out: upstream's backend
# never sets valid_cert, and with validation off it reports no name either.

PROBED = ("valid-ec", "valid-chain", "unknown-ca", "expired", "poison-untrusted-ca",
          "name-mismatch", "cn-not-san", "wildcard", "wildcard-partial", "wildcard-multi-label",
          "ip-literal")  # fmt: skip


@pytest.fixture(scope="module")
def probe_lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[conformance.Lab, Path]:
    need_tools("openssl", "unshare", "mount", "gcc")
    work = tmp_path_factory.mktemp("probe")
    _namespace_or_skip(work)
    builds = {f: _build(f, "host") for f in ("wolfssl", "openssl")}
    cases = [c for c in CASES if c.name in PROBED]
    lab = conformance.prepare(work, cases, builds[conformance.SERVER_FLAVOUR])
    probe = work / "ustream_probe"
    ub = builds["wolfssl"]
    subprocess.run(
        ["gcc", "-O1", "-o", str(probe), str(Path(__file__).with_name("ustream_probe.c")),
         f"-I{upstream.source_dir('ustream-ssl')}", f"-I{upstream.source_dir('libubox').parent}",
         f"-L{ub.root / 'lib'}", f"-Wl,-rpath-link={ub.root / 'lib'}", "-lustream-ssl",
         "-lubox"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return lab, probe


@pytest.mark.parametrize("flavour", ["wolfssl", "openssl"])
@pytest.mark.parametrize("name", PROBED)
def test_no_check_reports_the_truth(
    probe_lab: tuple[conformance.Lab, Path], name: str, flavour: str
) -> None:
    lab, probe = probe_lab
    ub = _build(flavour, "host")
    case = next(c for c in CASES if c.name == name)
    fetch = case.fetches[0]
    with conformance.serve(lab, fetch, f"probe-{flavour}-{name}") as served:
        argv = [*conformance.namespace(lab.hosts), str(probe), str(lab.ca), fetch.host,
                str(served.port), fetch.host]  # fmt: skip
        out = subprocess.run(argv, env={**os.environ, **ub.env()}, capture_output=True,
                             text=True, timeout=60).stdout  # fmt: skip
    outcome = case.expected(ub.backend).outcomes[0]
    cert, cn = outcome != "bad-cert", outcome == "ok"
    assert f"connected valid_cert={int(cert)} valid_cn={int(cn)}" in out, out
    assert ("verify_error" in out) == (not cert), out  # reported, not fatal
