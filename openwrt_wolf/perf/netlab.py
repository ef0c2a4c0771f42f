"""What the network tests (handshake, memory, soak) share: the flavour's userland (uhttpd,
uclient-fetch: footprint/userland.py), the heaptrack shim for the target, the host's client,
the certificates, and the place the programs run at (perf/place.py).

Paths are the place's: those of this machine's files (the userland, the certificates) are
given as they are, so the tests run where the place's files are the host's, qemu-user
(lab.NET_TARGETS)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import WolfError
from ..footprint import userland
from ..results.perf import NetCommon
from . import heap, net
from .place import Place, Served
from .ports import free_port


@dataclass(frozen=True)
class NetLab:
    flavour: str
    ub: userland.UserlandBuild
    heaptrack: Path  # the shim for the target (programs.shim("heaptrack", ...))
    place: Place
    probe: net.Probe
    pki: net.Pki
    conf: dict[str, Any]  # perf.toml [net] with the run's size ([net.full] or [net.quick])
    quick: bool
    clock: str
    say: Callable[[str], None]
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. OPENSSL_armcap (cpu_crypto)

    def env(self, heap_out: str | None = None) -> dict[str, str]:
        env = dict(self.ub.env()) | self.extra_env
        if heap_out is not None:
            env |= {"LD_PRELOAD": str(self.heaptrack), heap.ENV_OUT: heap_out}
        return env

    @contextlib.contextmanager
    def uhttpd(self, heap_out: str | None = None) -> Iterator[tuple[Served, int]]:
        """uhttpd serving pki.www over HTTPS with the P-256 certificate; (server, port)."""
        port = free_port()
        args = ["-f", "-h", str(self.pki.www), "-s", f"{self.place.address}:{port}",
                "-C", str(self.pki.cert), "-K", str(self.pki.key)]  # fmt: skip
        with self.place.serve(str(self.ub.uhttpd), args, self.env(heap_out), port,
                               float(self.conf["start_timeout"])) as served:  # fmt: skip
            yield served, port

    def probe_run(self, port: int, **kw: Any) -> net.ProbeRun:
        return net.run_probe(self.probe, self.place.address, port, self.pki.ca, **kw)

    def fetch(self, url: str, out: str, heap_out: str | None = None) -> tuple[int, str]:
        """uclient-fetch on the target: (exit status, what it printed)."""
        args = ["--ca-certificate", str(self.pki.ca), "-O", out, url]
        r = self.place.run(str(self.ub.uclient_fetch), args, self.env(heap_out),
                           timeout=net.TIMEOUT, check=False)  # fmt: skip
        return r.status, r.output

    def common(self, metrics: dict[str, dict[str, Any]], seconds: float) -> NetCommon:
        lib = self.ub.library
        w = self.place.where(self.clock)
        return NetCommon(
            flavour=self.flavour, library=f"{lib.title} {lib.version} {lib.config}"
            f"{' ' + lib.ecc if lib.ecc else ''}", backend=self.ub.backend,
            userland_key=self.ub.root.name, footprint_key=lib.cache_key,
            client=f"tlsprobe, {self.probe.openssl}", where=w,
            target=w.target, emulated=w.emulated, quick=self.quick, metrics=metrics,
            seconds=round(seconds, 1),
        )  # fmt: skip


def mark(served: Served, heap_out: str, place: Place, settle: float) -> heap.HeapReport:
    """Let the server finish with its connections, SIGUSR2 it, return its new mark."""
    time.sleep(settle)
    before = len([r for r in heap.parse(place.read(heap_out)) if r.event == "mark"])
    served.signal(heap.SIGNAL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        marks = [r for r in heap.parse(place.read(heap_out)) if r.event == "mark"]
        if len(marks) > before:
            return marks[-1]
        time.sleep(0.05)
    raise WolfError(f"the server wrote no heap mark to {heap_out} within 30 s",
                    hint=f"its output: {served.output()[-300:]}")  # fmt: skip


def sizes(conf: dict[str, Any], quick: bool) -> dict[str, Any]:
    return {**{k: v for k, v in conf.items() if not isinstance(v, dict)},
            **conf["quick" if quick else "full"], "groups": conf["groups"]}  # fmt: skip
