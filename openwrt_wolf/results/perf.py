"""The performance lab's record kinds (perf-crypto, perf-handshake, perf-memory, perf-soak,
perf-instructions, perf-wifi, perf-image), one typed dataclass each: the one model of each,
written by perf/ and read by the report. Stored as store.Record(kind=<KIND>, flavour=<flavour>,
key=<flavour>-<target>-<test>, data=asdict(...)). The comparison's rows (data/comparison.toml)
name the metrics these records carry."""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any, Self, cast

from .. import paths
from ..trust import untrusted
from . import key_policy

CRYPTO = "perf-crypto"


class _Kind:
    """A record kind of the lab: its data is the dataclass as a dict, read back with every
    field checked, nested ones too (untrusted.typed)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(cast(Any, self))

    @classmethod
    def from_dict(cls, d: Any, where: str | None = None) -> Self:
        return untrusted.typed(cls, d, where or f"{cls.__name__} record")


class _NetKind(_Kind):
    """A network test's record: `common` also spread at the top (the comparison reads
    metrics/target/emulated there)."""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(cast(Any, self))
        return {**d["common"], **d}


@dataclass(frozen=True)
class Where:
    """Where a figure was measured: emulated times carry over only as ratios."""

    target: str  # qemu | vm | router
    emulated: bool
    machine: str  # e.g. "qemu-mips-static 7.2 -cpu 24Kf on x86_64" or the router's board
    clock: str  # "cpu" (process CPU time, cpuclock shim) or "wall"


@dataclass(frozen=True)
class CryptoSpeed(_Kind):
    """The library's own benchmark tool, parsed from its output.

    ms_per_op: operation id (data/perf/perf.toml [operations]) -> milliseconds per operation.
    mib_per_s: cipher id -> {block size in bytes (as a string key) -> MiB/s}.
    """

    flavour: str
    library: str
    version: str
    config: str
    ecc: str | None
    tool: str  # "wolfCrypt benchmark", "openssl speed", "Mbed TLS benchmark"
    where: Where
    ms_per_op: dict[str, float]
    mib_per_s: dict[str, dict[str, float]]
    missing: list[str]  # ids the library (this build) does not have
    quick: bool
    commands: list[str]
    outputs: list[str]  # what the tool printed, per command (the parsers' input)
    seconds: float
    footprint_key: str  # the footprint lab build the tool ran against
    notes: list[str] = field(default_factory=list)




def record_key(flavour: str, target: str, test: str) -> str:
    return key_policy.named(flavour, target, test)


LAB_ARCH = "mips_24kc"  # the lab's own architecture: the reference's routers (ath79)


def lab_variant(arch: str = LAB_ARCH, cpu_crypto: str | None = None) -> str | None:
    """What a lab run measured besides the target: None for the MIPS lab; else the
    architecture, and "-ce"/"-noce" when the ARMv8 crypto extensions were switched on or off
    for every library (none: as OpenWrt builds each)."""
    if arch == LAB_ARCH and cpu_crypto is None:
        return None
    return arch + {"on": "-ce", "off": "-noce"}.get(cpu_crypto or "", "")


def place_label(target: str, variant: str | None = None) -> str:
    """The target as keys and tables name it: "qemu" for the MIPS lab (the keys records have
    always had), "qemu-aarch64_cortex-a76[-ce|-noce]" for another architecture emulated here.
    The record's device is the variant, so the comparison shows its figures as rows of their
    own."""
    return target if variant is None else f"{target}-{variant}"


HANDSHAKE = "perf-handshake"
MEMORY = "perf-memory"
SOAK = "perf-soak"


@dataclass(frozen=True)
class Metric:
    value: float
    unit: str  # "ms", "B", "allocations", "requests"


@dataclass(frozen=True)
class NetCommon:
    """What every network test record says: the programs, where, and the comparison's view
    (`metrics`, `target`, `emulated`: docs/results.md `perf`)."""

    flavour: str
    library: str  # e.g. "wolfSSL 5.9.2 minimal sp-p256" (the userland's TLS library build)
    backend: str  # ustream-ssl backend of uhttpd / uclient-fetch
    userland_key: str  # footprint/userland.py cache entry the programs came from
    footprint_key: str  # the footprint lab's build of the TLS library they link
    client: str  # the host client: tlsprobe against which OpenSSL
    where: Where
    target: str
    emulated: bool
    quick: bool
    metrics: dict[str, dict[str, Any]]  # name -> {"value": number, "unit": str}
    seconds: float


@dataclass(frozen=True)
class Handshakes(_NetKind):
    """TLS 1.3 handshakes to uhttpd (P-256 ECDSA certificate), timed by the host client from
    TCP connect to the end of its handshake; median per group."""

    common: NetCommon
    repeats: int
    ms: dict[str, list[float]]  # group id -> every handshake's time (after one warm-up)
    median_ms: dict[str, float]
    sessions: dict[str, str]  # group id -> `openssl s_client -brief` output (the witness)
    negotiated: dict[str, dict[str, str]]  # group id -> the probe's {version, group, sig}
    missing: dict[str, str]  # group id -> why there is no figure
    # group id -> the server's CPU time per handshake (user+system; under qemu-user the
    # emulated program's and qemu's translation), ms
    server_cpu_ms: dict[str, float] = field(default_factory=dict)




@dataclass(frozen=True)
class HeapPhase:
    name: str  # "before", "requests", "concurrent", "double", ...
    requests: int
    live: int
    peak: int
    allocs: int
    frees: int


@dataclass(frozen=True)
class HeapUse(_NetKind):
    """heaptrack in uclient-fetch (one download) and uhttpd (phases between SIGUSR2 marks)."""

    common: NetCommon
    download_bytes: int
    download: HeapPhase  # uclient-fetch's exit report
    server: list[HeapPhase]  # uhttpd's marks, in order
    reports: dict[str, str]  # "uclient-fetch" / "uhttpd": heaptrack's raw lines




@dataclass(frozen=True)
class Soak(_NetKind):
    """Many HTTPS requests to uhttpd, `jobs` at a time, and many uclient-fetch downloads."""

    common: NetCommon
    requests: int
    jobs: int
    requests_ok: int  # counted by the client
    requests_failed: int
    downloads: int
    downloads_ok: int  # uclient-fetch exit 0 and the file's bytes match
    downloads_failed: int
    held_before: int  # uhttpd's live heap after the warm-up, before the soak
    held_after: int  # ... after every request
    errors: list[str]  # the first failures, as reported
    client_summary: str  # the client's own count: "done ok=<n> failed=<n>"
    download_exits: dict[str, int]  # uclient-fetch exit status -> how many times




INSTRUCTIONS = "perf-instructions"


@dataclass(frozen=True)
class Instructions(_NetKind):
    """The guest instructions uhttpd executes under qemu-user, counted by a QEMU plugin
    (data/perf/insncount.c): per full TLS 1.3 handshake per group, and per MiB it sends per
    cipher suite. Each figure is a difference of two whole runs of the server (more
    handshakes or downloads against fewer), so start-up and the first handshake's set-up
    cancel. Emulation changes an instruction's time, not its count: the figure that compares
    the ARMv8 crypto extensions on and off (perf/instructions.py)."""

    common: NetCommon
    counter: str  # the plugin and the qemu that ran it
    per_handshake: dict[str, int]  # group id -> instructions per handshake
    per_mib: dict[str, int]  # suite id -> instructions per MiB of response body sent
    counts: dict[str, list[int]]  # "<group>" / "<suite>" -> [fewer run, more run], whole runs
    spans: dict[str, int]  # ... -> the handshakes (or MiB) the difference spans
    negotiated: dict[str, dict[str, str]]  # ... -> the probe's {version, group, sig, cipher}
    missing: dict[str, str]  # ... -> why there is no figure




WIFI = "perf-wifi"


@dataclass(frozen=True)
class WifiMode:
    """One security mode (sae-hnp, sae-h2e, owe) of one flavour: a witness connection with
    both daemons at debug level, then `connections` timed ones at their default level.

    Times are the station's own event lines (wpa_supplicant -t): from its first "SME: Trying
    to authenticate" of a connection to its CTRL-EVENT-CONNECTED (auth_ms: to "Trying to
    associate"; SAE's commit/confirm happen there, OWE's Diffie-Hellman in the association).
    CPU: each daemon's time on a CPU over the connection (/proc/PID/schedstat), in ms."""

    name: str
    title: str
    connections: int  # timed connections asked for
    ok: int
    failed: int
    ms: list[float]  # every ok connection
    auth_ms: list[float]
    median_ms: float | None
    spread_ms: dict[str, float]  # min, p25, p75, max of ms
    ap_cpu_ms: list[float]  # hostapd, per ok connection
    sta_cpu_ms: list[float]  # wpa_supplicant
    negotiated: dict[str, str]  # key_mgmt, group (, h2e) as the daemons reported them
    witness: dict[str, str]  # "hostapd"/"wpa_supplicant": their lines of the witness connection;
    # "wpa_cli status": the station's answer after it
    heap_idle: HeapPhase | None  # hostapd with the AP up, before any station
    heap_connections: HeapPhase | None  # hostapd over the timed connections
    missing: str = ""  # why there is no figure (the daemons' own lines)
    errors: list[str] = field(default_factory=list)  # first failures, as reported
    # "wpa_supplicant"/"hostapd": their -t lines of the timed connections (the times' source)
    log: dict[str, str] = field(default_factory=dict)
    heap_report: str = ""  # heaptrack's raw lines from hostapd
    # where ap_cpu_ms/sta_cpu_ms come from: "schedstat" (ns) or "ticks" (/proc/PID/stat's
    # utime+stime, 10 ms each: a kernel without CONFIG_SCHED_INFO, as OpenWrt's malta)
    cpu_clock: str = "schedstat"


@dataclass(frozen=True)
class WifiConnections(_NetKind):
    """perf --test wifi: wpad-basic-<flavour> (hostapd + wpa_supplicant) in the Wi-Fi guest."""

    common: NetCommon
    modes: dict[str, WifiMode]
    wpad: dict[str, Any]  # the build: source, patches, make options, wpad's size (x86_64)
    guest: dict[str, str]  # kernel package and release, QEMU options




IMAGE = "perf-image"


@dataclass(frozen=True)
class ImageServer(_Kind):
    """The image's own programs in a real OpenWrt image booted in the VM (bench/openwrt_vm.py):
    its uhttpd's memory from /proc/<pid>/status (idle, after `requests` HTTPS requests, with
    `held` TLS sessions open at once), handshakes timed by the host's Python ssl client, the
    TLS packages installed (`apk info`), apk's verdict on a good, a damaged and an
    other-key index. Emulated (QEMU TCG): times carry over only as ratios."""

    flavour: str
    image: str  # the initramfs kernel booted
    image_sha256: str
    where: Where
    target: str  # "vm"
    emulated: bool
    tls_packages: list[str]
    mbedtls_present: bool
    negotiated: dict[str, str]  # "version", "cipher" of the host's session
    requests: int
    held: int
    handshake_s: list[float]  # the host client's times, connect to end of handshake
    uhttpd_kB: dict[str, dict[str, int]]  # "idle", "requests", "held" -> status fields in kB
    apk_exit: dict[str, int]  # "good", "bad", "otherkey" -> `apk update`'s exit status
    metrics: dict[str, dict[str, Any]]  # the comparison's view: name -> {"value", "unit"}
    # key exchange ("x25519", "p256") -> uhttpd's CPU time over N full handshakes, read in the
    # guest (/proc/<pid>/stat utime+stime, 10 ms ticks), beside the host's wall times
    handshake_cpu: dict[str, dict[str, Any]] = field(default_factory=dict)
    root: str = "initramfs"  # where the image's rootfs lived: "initramfs" or "disk"
    # bench/openwrt_vm.py --soak: requests, downloads, index updates, failures of each and
    # uhttpd's memory before and after
    soak: dict[str, Any] = field(default_factory=dict)
    # where uhttpd's CPU per connection goes: "plain_http", "handshake_only_<kex>",
    # "handshake_request_<kex>" -> connections, user and system ticks and ms per connection
    cpu_split: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the host's 1-minute load average before and after the timed parts: under TCG a guest
    # charges its processes for the time the host kept QEMU waiting, so a loaded host
    # inflates every CPU figure (issue 35's first run)
    host_load: list[float] = field(default_factory=list)




def metric(value: float, unit: str) -> dict[str, Any]:
    return asdict(Metric(value, unit))


@dataclass(frozen=True)
class ComparisonRow:
    """One row of the comparison's Memory or Performance table (data/comparison.toml)."""

    name: str
    label: str
    unit: str
    table: str  # "memory" or "performance"
    better: str
    # the user's reference (a router): flavour -> its published figure, in `unit`
    reference: dict[str, float] = field(default_factory=dict)


@cache
def comparison_rows() -> dict[str, ComparisonRow]:
    raw = tomllib.loads((paths.DATA_DIR / "comparison.toml").read_text())
    out = {}
    for table in ("memory", "performance"):
        for m in raw.get(table, []):
            ref = {str(k): float(v) for k, v in m.get("reference", {}).items()}
            out[m["name"]] = ComparisonRow(
                m["name"], m["label"], m["unit"], table, m["better"], ref
            )
    return out
