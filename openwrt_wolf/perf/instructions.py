"""The `instructions` test: the guest instructions uhttpd executes per TLS 1.3 handshake and
per MiB it sends, counted by a QEMU TCG plugin (data/perf/insncount.c) in qemu-user.

Why a count: under TCG the ARMv8 crypto extensions' code runs slower than the plain C it
replaces (one AESE is many host instructions), so emulated time cannot value them; the number
of guest instructions is the same emulated or on a Cortex-A76. It is not a cycle count (an
AESE and an ADD both count one), so it bounds the gain rather than giving it.

Each figure is the difference of two runs of the server: `more` handshakes against `few`
(per handshake), and the same handshakes each fetching the download file against fetching
nothing (per MiB). Start-up, the listening check and the first handshake's set-up cancel."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path

from .. import proc
from ..errors import WolfError
from ..files import outputs
from ..files.locks import locked
from ..results.perf import Instructions, metric
from . import net, programs
from .handshake import PROBE_GROUP
from .netlab import NetLab
from .place import QemuPlace
from .qemu_user import QemuUser

PLUGIN = "insncount"
GROUPS = ("x25519", "p256")
# TLS 1.3 suites, OpenSSL's names (the probe's -c); the negotiated one is checked per session
SUITES = {"aes128gcm": "TLS_AES_128_GCM_SHA256", "chacha20": "TLS_CHACHA20_POLY1305_SHA256"}
FEW = 2  # handshakes in the shorter run of a pair
BODY_PATH = "/download"  # net.make_pki's download file, as uhttpd serves it
_COUNT = re.compile(r"insns (\d{1,20})\n\Z")


def plugin() -> Path:
    """data/perf/insncount.c built for this machine's qemu (cached by its source)."""
    src = programs.data_file(f"{PLUGIN}.c")
    flags = ["-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror"]
    key = programs._key(PLUGIN, src.read_bytes().hex(), flags)
    out = programs.root() / PLUGIN / f"{PLUGIN}-{key}" / f"{PLUGIN}.so"
    with locked(out.parent.with_suffix(".lock")):
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(".tmp")
            proc.run(["gcc", *flags, "-o", tmp, src], timeout=programs.COMPILE_TIMEOUT)
            outputs.publish(tmp, out)
    return out


def counting_qemu(q: QemuUser) -> QemuUser:
    """The same emulation by Debian's dynamic qemu-user (qemu-*-static cannot load plugins)."""
    name = Path(q.qemu).name.removesuffix("-static")
    found = shutil.which(name)
    if not found:
        raise WolfError(f"--test instructions needs {name} (qemu-user: qemu-*-static loads no "
                        "plugins)", hint="apt-get install qemu-user")  # fmt: skip
    first = proc.run([found, "--version"], timeout=30).output.splitlines()
    version = first[0].split("version")[-1].strip().split()[0] if first else "?"
    return dataclasses.replace(q, qemu=found, version=version)


def read_count(path: Path) -> int:
    """The plugin's file: one line "insns <n>"; anything else is one line of error."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as e:
        raise WolfError(f"the instruction counter wrote no count ({path}): {e.strerror}") from e
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WolfError(f"the instruction counter's {path} is not a regular file")
        text = f.read(64).decode("ascii", errors="replace")
    m = _COUNT.fullmatch(text)
    if not m:
        raise WolfError(f"the instruction counter's file {path} is not 'insns <n>': {text[:40]!r}")
    return int(m.group(1))


@dataclasses.dataclass
class _Counter:
    lab: NetLab
    place: QemuPlace  # the counting qemu's, without its plugin argument yet
    plugin: Path
    workdir: Path
    runs: int = 0

    def count(self, action: Callable[[NetLab, int], net.ProbeRun]) -> tuple[int, net.ProbeRun]:
        """One whole run of uhttpd under the plugin: (its instructions, what the probe saw)."""
        self.runs += 1
        out = self.workdir / f"count-{self.runs}"
        q = dataclasses.replace(self.place.qemu, plugin=f"{self.plugin},out={out}")
        at = dataclasses.replace(self.place, qemu=q, workdir=self.workdir / f"run-{self.runs}")
        lab = dataclasses.replace(self.lab, place=at)
        with lab.uhttpd() as (_served, port):
            run = action(lab, port)
        return read_count(out), run


def _checked(run: net.ProbeRun, n: int, group: str, suite: str | None, body: int) -> str | None:
    """Why the run cannot be counted, or None: every session TLS 1.3 with the group (and suite)
    offered, and with a body every response at least the file's size."""
    if run.failed or len(run.conns) != n:
        return f"{run.failed} of {n} connections failed: {(run.errors or [run.summary])[0]}"
    for c in run.conns:
        if (c.version, c.group) != ("TLSv1.3", PROBE_GROUP[group]):
            return f"a session negotiated {c.version} {c.group}"
        if suite and c.cipher != suite:
            return f"a session negotiated {c.cipher}, not {suite}"
        if c.bytes < body:
            return f"a response had {c.bytes} bytes, less than the file's {body}"
    return None


def measure(lab: NetLab) -> Instructions:
    if not isinstance(lab.place, QemuPlace):  # its qemu, which the plugin goes into
        raise WolfError("--test instructions runs on --target qemu only (a QEMU plugin counts)")
    start = time.monotonic()
    more = FEW + int(lab.conf["handshakes"])
    body = int(lab.conf["download_bytes"])
    downloads = int(lab.conf["instruction_downloads"])
    workdir = Path(lab.place.scratch("instructions"))
    counting = dataclasses.replace(lab.place, qemu=counting_qemu(lab.place.qemu), workdir=workdir)
    lab = dataclasses.replace(lab, place=counting)  # the record names the counting qemu
    counter = _Counter(lab, counting, plugin(), workdir)
    qemu = counting.qemu
    per_handshake: dict[str, int] = {}
    per_mib: dict[str, int] = {}
    counts: dict[str, list[int]] = {}
    spans: dict[str, int] = {}
    negotiated: dict[str, dict[str, str]] = {}
    missing: dict[str, str] = {}

    def handshakes(group: str, n: int, suite: str | None = None, fetch: bool = False
                   ) -> Callable[[NetLab, int], net.ProbeRun]:  # fmt: skip
        def action(lb: NetLab, port: int) -> net.ProbeRun:
            return lb.probe_run(port, group=group, count=n, handshake_only=not fetch,
                                suites=suite, path=BODY_PATH,
                                timeout=net.TIMEOUT + 60 * n)  # fmt: skip

        return action

    for group in GROUPS:
        (c1, r1), (c2, r2) = (counter.count(handshakes(group, n)) for n in (FEW, more))
        why = _checked(r1, FEW, group, None, 0) or _checked(r2, more, group, None, 0)
        if why:
            missing[group] = why
            continue
        counts[group], spans[group] = [c1, c2], more - FEW
        per_handshake[group] = round((c2 - c1) / (more - FEW))
        c = r2.conns[0]
        negotiated[group] = {"version": c.version, "group": c.group, "sig": c.sig,
                             "cipher": c.cipher}  # fmt: skip
        lab.say(f"perf: {lab.flavour}: instructions: {per_handshake[group]:,} per {group} "
                "handshake")  # fmt: skip
    for sid, suite in SUITES.items():
        (c1, r1), (c2, r2) = (counter.count(handshakes("x25519", downloads, suite, fetch))
                              for fetch in (False, True))  # fmt: skip
        why = (_checked(r1, downloads, "x25519", suite, 0)
               or _checked(r2, downloads, "x25519", suite, body))  # fmt: skip
        if why:
            missing[sid] = why
            continue
        sent = sum(c.bytes for c in r2.conns)
        counts[sid], spans[sid] = [c1, c2], sent
        per_mib[sid] = round((c2 - c1) * (1 << 20) / sent)
        c = r2.conns[0]
        negotiated[sid] = {"version": c.version, "group": c.group, "sig": c.sig,
                           "cipher": c.cipher}  # fmt: skip
        lab.say(f"perf: {lab.flavour}: instructions: {per_mib[sid]:,} per MiB sent, {suite}")
    metrics = {f"insns_handshake_{g}": metric(v, "instructions") for g, v in per_handshake.items()}
    metrics |= {f"insns_per_mib_{s}": metric(v, "instructions") for s, v in per_mib.items()}
    return Instructions(
        common=lab.common(metrics, time.monotonic() - start),
        counter=f"data/perf/{PLUGIN}.c (QEMU TCG plugin), {Path(qemu.qemu).name} {qemu.version} "
        f"-cpu {qemu.cpu}",
        per_handshake=per_handshake, per_mib=per_mib, counts=counts, spans=spans,
        negotiated=negotiated, missing=missing,
    )  # fmt: skip
