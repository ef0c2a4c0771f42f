"""The lab's record kinds, one typed dataclass each, stored as
store.Record(kind=<KIND>, flavour=<flavour>, key=<flavour>-<target>-<test>, data=asdict(...))."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

CRYPTO = "perf-crypto"

T = TypeVar("T")


def _from_dict(cls: type[T], d: dict[str, Any]) -> T:
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in d.items() if k in known})


@dataclass(frozen=True)
class Where:
    """Where a figure was measured: emulated times carry over only as ratios."""

    target: str  # qemu | vm | router
    emulated: bool
    machine: str  # e.g. "qemu-mips-static 7.2 -cpu 24Kf on x86_64" or the router's board
    clock: str  # "cpu" (process CPU time, cpuclock shim) or "wall"


@dataclass(frozen=True)
class CryptoSpeed:
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CryptoSpeed:
        return _from_dict(cls, {**d, "where": Where(**d["where"])})


def record_key(flavour: str, target: str, test: str) -> str:
    return f"{flavour}-{target}-{test}"
