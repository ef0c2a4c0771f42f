"""Hostile patches, series and stamps for bench/bad_inputs.py (issue 32, part A): `invoke patch
--tree T --patches P [--check|--status|--revert|--refresh]` as root on a small tree, each run
with a fresh tree beside a victim directory. Generated, not a list of the issue's cases: every
line-break character Python's splitlines() knows and git does not, paths that leave the tree
(.., absolute, .git, "." and empty parts, behind 0 to 2 leading directories, with and without
a/ b/), links on the way (a package or feed directory that links out or inside), links a
patch creates (to a secret, a FIFO, /dev/zero, out and on), links and special files planted in
the tree (at the stamp's old temporary name, the stamp itself, a patched file), stamps of the
wrong shape (nesting, numbers, sizes, names, copies whose sha256 fits but whose text leaves
the tree), series and patches that are not UTF-8, FIFOs, sparse or name what is not a patch.

Oracles besides the runner's (traceback, error line, hang, raw control characters):
- victim: every entry beside the tree (the victim directory, a directory named `t` as the old
  staging directory was, the patches) by lstat, bytes and link target before and after:
  a change is "security"; the secret's bytes in a file of the tree or of --into, or in the
  output, "security";
- sentinel: a file only a command smuggled into quilt's awk or GNU patch's ed would create;
- result: a run that must be refused exits 2, one that is a valid patch gives the tree git
  apply gives a copy of it ("wrong" else);
- time and peak memory: each run under a wrapper (this file run with --measure) that records
  its wall time and its children's peak RSS (getrusage): over 30 s or 512 MiB is "wrong";
- leftovers: the run's own TMPDIR empty afterwards, no temporary file left in the tree.

After the last run one line gives the slowest run and the highest peak RSS."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent.parent))

from hostile import Finding, Probe  # noqa: E402  (bench/hostile.py)

from tests.patchset.patch_lab import (  # noqa: E402
    PATCH,
    Lab,
    git_oracle,
    make,
    outside,
    secret_holders,
    series,
    special,
    tree_state,
)

TIME_LIMIT = 30.0
RSS_LIMIT = 512 << 20
BREAKS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r\n"]
MODES = ("", "--check", "--status", "--revert", "--refresh")
Step = Callable[["Lab"], None]


def argv(lab: Lab, mode: str) -> list[str]:
    out = ["patch", "--tree", str(lab.tree), "--patches", str(lab.patches)]
    if mode == "--refresh":
        return [*out, "--refresh", "--into", str(lab.into)]
    return [*out, mode] if mode else out


def invoke(lab: Lab, mode: str = "") -> None:
    """A run as a case's earlier step (apply before --status), its outcome not judged."""
    subprocess.run(
        [sys.executable, "-m", "invoke", *argv(lab, mode)],
        cwd=HERE.parent.parent,
        capture_output=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(lab.tmp)},
    )


# --- the runs' figures (time, peak RSS) ---------------------------------------------------

FIGURES: list[tuple[float, int, str]] = []


def _figures(lab: Lab, what: str) -> Finding | None:
    try:
        seconds, kib = lab.stats.read_text().split()
    except (OSError, ValueError):
        return None  # killed on the runner's timeout: counted as hung there
    rss = int(kib) * 1024
    FIGURES.append((float(seconds), rss, what))
    if float(seconds) > TIME_LIMIT:
        return "wrong", f"took {float(seconds):.0f} s (limit {TIME_LIMIT:.0f} s)"
    if rss > RSS_LIMIT:
        return "wrong", f"peak RSS {rss >> 20} MiB (limit {RSS_LIMIT >> 20} MiB)"
    return None


def summary() -> Finding | None:
    if FIGURES:
        slow, big = max(FIGURES), max(FIGURES, key=lambda f: f[1])
        print(
            f"    patches: slowest run {slow[0]:.1f} s ({slow[2]}), highest peak RSS "
            f"{big[1] >> 20} MiB ({big[2]}), {len(FIGURES)} runs measured",
            flush=True,
        )
    return None


def measure(out: str, cmd: list[str]) -> int:
    """Run cmd, then write its wall time and its children's peak RSS (KiB) to out."""
    t0 = time.monotonic()
    rc = subprocess.call(cmd)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    Path(out).write_text(f"{time.monotonic() - t0:.3f} {peak}\n")
    return rc


# --- one probe: a fresh lab, steps, the run, the oracles ------------------------------------


def probe(
    w: Path,
    what: str,
    mode: str,
    *steps: Step,
    valid: bytes | Callable[[Lab], bytes] | None = None,
    either: bool = False,
    after_run: Callable[[Lab], Finding | None] | None = None,
    sentinel: Path | None = None,
) -> Probe:
    """``valid``: the patch (or how to make it for the lab) is valid: the run must end 0 and,
    when it applies, give git apply's tree (taken after the steps); ``either``: a well-formed
    input that may be taken or refused; else the run must be refused (exit 2)."""
    lab = Lab(w / "patch-labs" / f"{len(os.listdir(w / 'patch-labs')):03d}")
    lab.top.mkdir()
    text = f"{what} [{mode or 'apply'}]"
    seen: dict[str, dict[str, tuple[int, str]] | None] = {}  # before the run: beside, git's

    def setup() -> None:
        make(lab)
        for step in steps:
            step(lab)
        patch = valid(lab) if callable(valid) else valid
        seen["want"] = git_oracle(lab, patch) if patch is not None and mode == "" else None
        seen["beside"] = outside(lab)

    def check(p: subprocess.CompletedProcess[str]) -> Finding | None:
        if lab.secret.decode() in p.stdout + p.stderr:
            return "security", "the secret's bytes were printed"
        if either:
            return None
        if valid is None:
            return ("wrong", "exit 0 on input that must be refused") if p.returncode == 0 else None
        if p.returncode != 0:
            return "wrong", f"a valid patch: exit {p.returncode}: {p.stderr.strip()[-160:]!r}"
        got = tree_state(lab.tree)
        got.pop(".wolf-patches.json", None)
        if seen["want"] is not None and got != seen["want"]:
            return "wrong", "the tree is not what git apply makes of the patch"
        return None

    def after() -> Finding | None:
        if outside(lab) != seen["beside"]:
            return "security", "an entry beside the tree changed, appeared or went"
        if lab.secret in secret_holders(lab):
            return "security", "the secret's bytes are in the tree or in --into"
        left = [p.name for p in lab.tmp.iterdir()] + [
            str(p) for p in lab.tree.rglob("*.tmp") if p.name != ".wolf-patches.tmp"
        ]
        if left:
            return "leftover", f"left {left[:3]}"
        if after_run is not None and (got := after_run(lab)):
            return got
        return _figures(lab, text)

    prefix = [sys.executable, str(HERE), "--measure", str(lab.stats), "--"]
    return Probe(
        argv(lab, mode),
        check=check,
        sentinel=sentinel,
        prefix=prefix,
        env={"TMPDIR": str(lab.tmp)},
        setup=setup,
        after=after,
    )


def with_patches(patches: dict[str, str | bytes], text: str | bytes | None = None) -> Step:
    return lambda lab: series(lab, patches, text)


def step(mode: str) -> Step:
    return lambda lab: invoke(lab, mode)


# --- the cases --------------------------------------------------------------------------


def _smuggling(ch: str, aims: list[str]) -> str:
    added = [f"+x{ch}--- a/{a}{ch}+++ b/{a}{ch}@@ -1 +1 @@{ch}-hello{ch}+pwned" for a in aims]
    return (
        f"--- a/f\n+++ b/f\n@@ -1 +1,{1 + len(added)} @@\n-hello\n+bye\n" + "\n".join(added) + "\n"
    )


def line_breaks(w: Path) -> list[Probe]:
    """Each character splitlines() breaks at and git does not, hiding headers of victims."""
    aims = [
        "../victim/fifo",
        "../victim/sock",
        "../victim/dirlink",
        "../t/f",
        "../victim/file",
        "victim/../../victim/file",
    ]
    out = []
    for ch in BREAKS:
        text = _smuggling(ch, aims)
        shown = f"U+{ord(ch[0]):04X}" + ("+LF" if len(ch) > 1 else "")
        put = with_patches({"0001-f.patch": text})
        if len(ch) > 1:  # CR LF: a real line end, the hunk is corrupt for git and for us
            out += [probe(w, f"line break {shown}", m, put) for m in ("", "--refresh")]
            continue
        for mode in ("", "--check", "--refresh"):
            out.append(probe(w, f"line break {shown}", mode, put, valid=text.encode()))
        out.append(probe(w, f"line break {shown}", "--revert", put, step(""), valid=text.encode()))
    crlf = PATCH.replace("\n", "\r\n")
    out.append(probe(w, "CRLF patch, LF file", "", with_patches({"0001-f.patch": crlf})))

    def crlf_file(lab: Lab) -> None:
        (lab.tree / "f").write_bytes(b"hello\r\n")

    out.append(
        probe(
            w,
            "CRLF patch, CRLF file",
            "",
            with_patches({"0001-f.patch": crlf}),
            crlf_file,
            valid=crlf.encode(),
        )
    )
    return out


def _bad_paths(w: Path) -> list[str]:
    tails = ["../victim/new", "../t/f", "../../lab-out", ".git/config", "./f", "sub//f", ""]
    out = []
    for depth in (0, 1, 2):
        lead = "x/" * depth
        out += [lead + t for t in tails]
        out.append(lead + "y/" * depth + "../" * (2 * depth + 1) + "victim/file")
    out += ["/VICTIM/file", "/TREE/f", "/etc/hostname", "f\x1bq", "f\u202eq", '"f"', "f\x85g"]
    return out


def paths(w: Path) -> list[Probe]:
    """---/+++ paths that leave the tree after -p1, behind 0-2 leading directories; the a/
    prefix missing; -p0 and -p2 asked for by the series."""
    out = []
    for i, path in enumerate(_bad_paths(w)):
        mode = MODES[i % len(MODES)]

        def paths_in(lab: Lab, path: str = path, i: int = i) -> None:
            real = path.replace("/VICTIM", str(lab.victim)).replace("/TREE", str(lab.tree))
            create = f"--- /dev/null\n+++ b/{real}\n@@ -0,0 +1 @@\n+pwned\n"
            modify = f"--- a/{real}\n+++ b/{real}\n@@ -1 +1 @@\n-precious\n+pwned\n"
            series(lab, {"0001-f.patch": PATCH + (modify if i % 2 else create)})

        out.append(probe(w, f"path {path!r}", mode, paths_in))
        out.append(probe(w, f"path {path!r}", MODES[(i + 2) % len(MODES)], paths_in))
    bare = "--- f\n+++ f\n@@ -1 +1 @@\n-hello\n+bye\n"
    out.append(probe(w, "no a/ b/ prefix", "", with_patches({"0001-f.patch": bare})))
    slash = "--- /TREE/f\n+++ /TREE/f\n@@ -1 +1 @@\n-hello\n+bye\n"

    def rooted(lab: Lab) -> None:  # -p1 of "/abs/tree/f" is "abs/tree/f": inside the tree
        series(lab, {"0001-f.patch": slash.replace("/TREE", str(lab.tree))})

    out.append(probe(w, "--- /abs/path (-p1: a path inside)", "", rooted))
    for opt in ("-p0", "-p2", "-R", "-p1 -R"):
        out.append(
            probe(
                w,
                f"series option {opt}",
                "",
                with_patches({"0001-f.patch": PATCH}, f"0001-f.patch {opt}\n"),
            )
        )
    return out


def links_on_the_way(w: Path) -> list[Probe]:
    """A package directory (out of the tree, inside it, two levels down) or a feed directory
    that is a link."""
    mk = "--- a/pkg/Makefile\n+++ b/pkg/Makefile\n@@ -1 +1 @@\n-hello\n+pwned\n"
    deep = mk.replace("pkg/", "a/b/pkg/")

    def out_link(lab: Lab) -> None:
        (lab.tree / "pkg").symlink_to(lab.victim / "pkgdir")
        series(lab, {"0001-pkg.patch": mk})

    def in_link(lab: Lab) -> None:
        (lab.tree / "real").mkdir()
        (lab.tree / "real" / "Makefile").write_text("hello\n")
        (lab.tree / "pkg").symlink_to("real")
        series(lab, {"0001-pkg.patch": mk})

    def deep_link(lab: Lab) -> None:
        (lab.tree / "a").mkdir()
        (lab.tree / "a" / "b").symlink_to(lab.victim)
        (lab.victim / "pkg").mkdir()
        (lab.victim / "pkg" / "Makefile").write_text("hello\n")
        series(lab, {"0001-pkg.patch": deep})

    def file_on_way(lab: Lab) -> None:
        (lab.tree / "pkg").write_text("a file\n")
        series(lab, {"0001-pkg.patch": mk})

    def feed_link(lab: Lab) -> None:
        (lab.tree / "feeds").mkdir()
        (lab.tree / "feeds" / "luci").symlink_to(lab.victim / "pkgdir")
        d = lab.patches / "feeds" / "luci"
        d.mkdir(parents=True)
        (d / "0001-m.patch").write_text(mk.replace("pkg/", ""))
        (d / "series").write_text("0001-m.patch\n")

    out = []
    for name, plant in (
        ("package dir links out", out_link),
        ("package dir links inside", in_link),
        ("a link two levels down", deep_link),
        ("a file on the way", file_on_way),
        ("feed dir links out", feed_link),
    ):
        out += [probe(w, name, mode, plant) for mode in MODES]
    return out


def _link(name: str, target: str) -> str:
    return (
        f"diff --git a/{name} b/{name}\nnew file mode 120000\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+{target}\n"
        "\\ No newline at end of file\n"
    )


def links_made(w: Path) -> list[Probe]:
    """Links a patch creates: kept as links (git's tree), their targets never read; refused by
    --refresh (quilt's diff would read them)."""
    out = []
    targets = {
        "the secret": "/VICTIM/secret",
        "a FIFO": "/VICTIM/fifo",
        "/dev/zero": "/dev/zero",
        "../ out": "../victim/secret",
        "a loop": "evil",
    }
    for name, target in targets.items():

        def made(lab: Lab, target: str = target) -> None:
            real = target.replace("/VICTIM", str(lab.victim))
            series(lab, {"0001-f.patch": PATCH + _link("evil", real)})

        def valid(lab: Lab, target: str = target) -> bytes:
            return (PATCH + _link("evil", target.replace("/VICTIM", str(lab.victim)))).encode()

        def is_link(lab: Lab, target: str = target) -> Finding | None:
            evil = lab.tree / "evil"
            real = target.replace("/VICTIM", str(lab.victim))
            if not evil.is_symlink() or os.readlink(evil) != real:
                return "wrong", "the link the patch makes is not a link to its target"
            return None

        out.append(probe(w, f"link to {name}", "", made, valid=valid, after_run=is_link))
        out.append(probe(w, f"link to {name}", "--refresh", made))
        out += [
            probe(w, f"link to {name}", m, made, step(""), valid=valid)
            for m in ("--status", "--revert")
        ]
    onward = (
        PATCH + _link("evil", "/VICTIM/dir") + "--- /dev/null\n+++ b/evil/x\n@@ -0,0 +1 @@\n+x\n"
    )

    def through(lab: Lab) -> None:
        series(lab, {"0001-f.patch": onward.replace("/VICTIM", str(lab.victim))})

    out += [probe(w, "a link, then a file written through it", m, through) for m in ("", "--check")]

    def two(lab: Lab) -> None:  # the link in one patch, the file through it in the next
        series(
            lab,
            {
                "0001-f.patch": PATCH + _link("evil", str(lab.victim / "dir")),
                "0002-x.patch": "--- /dev/null\n+++ b/evil/x\n@@ -0,0 +1 @@\n+x\n",
            },
        )

    out += [probe(w, "a link, then a patch through it", m, two) for m in ("", "--refresh")]
    return out


def planted(w: Path) -> list[Probe]:
    """Links and special files the tree holds where the engine writes or reads."""

    def tmp_link(lab: Lab) -> None:
        (lab.tree / ".wolf-patches.tmp").symlink_to(lab.victim / "file")

    def stamp_link(lab: Lab) -> None:
        (lab.tree / ".wolf-patches.json").symlink_to(lab.victim / "file")

    def stamp_fifo(lab: Lab) -> None:
        os.mkfifo(lab.tree / ".wolf-patches.json")

    def f_link(lab: Lab) -> None:
        (lab.tree / "f").unlink()
        (lab.tree / "f").symlink_to(lab.victim / "secret")

    def f_kind(kind: str) -> Step:
        def plant(lab: Lab) -> None:
            (lab.tree / "f").unlink()
            special(lab.tree / "f", kind)

        return plant

    out = [probe(w, "link at the stamp's old temporary name", "", tmp_link, valid=PATCH.encode())]
    out.append(
        probe(
            w,
            "link at the stamp's old temporary name",
            "--revert",
            tmp_link,
            step(""),
            valid=PATCH.encode(),
        )
    )
    out += [probe(w, "the stamp a link out", m, stamp_link) for m in ("", "--status", "--revert")]
    out += [probe(w, "the stamp a FIFO", m, stamp_fifo) for m in ("", "--status", "--revert")]
    out += [probe(w, "patched file a link to the secret", m, f_link) for m in ("", "--refresh")]
    for kind in ("fifo", "socket", "directory", "sparse 20 GB"):
        out += [probe(w, f"patched file a {kind}", m, f_kind(kind)) for m in ("", "--status")]
    return out


def _stamp(lab: Lab, body: str | bytes) -> None:
    (lab.tree / ".wolf-patches.json").write_bytes(body.encode() if isinstance(body, str) else body)


def _doc(**kw: object) -> str:
    return json.dumps({"series": "openwrt", "patches": [], "files": {}, **kw})


WELL_FORMED = {
    "--status": (
        "15 MB string",
        "copy whose sha fits, leaving the tree",
        "copy that is not its sha",
        "copy with a lone surrogate",
    ),
    "--revert": ("15 MB string",),
}


def stamps(w: Path) -> list[Probe]:
    """Stamps of every wrong shape; names and copies that lead out of the tree."""
    out_text = "--- /dev/null\n+++ b/../victim/PWNED\n@@ -0,0 +1 @@\n+x\n"
    fits = hashlib.sha256(out_text.encode()).hexdigest()
    raw = {
        "nested lists 100,000": "[" * 100_000 + "]" * 100_000,
        "nested objects 100,000": '{"a":' * 100_000 + "1" + "}" * 100_000,
        "5,000 digits": _doc(x=0).replace("0}", "9" * 5000 + "}"),
        "10**400 in files": _doc(files={"f": "x"}).replace('"x"', str(10**400)),
        "NaN": _doc().replace('"openwrt"', "NaN"),
        "1e400": _doc().replace("[]", "[1e400]"),
        "files a list": _doc(files=[]),
        "patches a string": _doc(patches="x"),
        "series missing": '{"patches": [], "files": {}}',
        "a list": "[1, 2]",
        "not UTF-8": b'{"series": "\xff\xfe"}',
        "not JSON": "{",
        "15 MB string": _doc(series="x" * (15 << 20)),
        "20 MB": " " * (20 << 20) + _doc(),
        "files naming ../": _doc(files={"../victim/file": "0"}),
        "files naming /": _doc(files={"/etc/hostname": "0"}),
        "files naming .git": _doc(files={".git/config": "0"}),
        "files naming the FIFO beside": _doc(files={"../victim/fifo": "0"}),
        "name absolute": _doc(patches=[{"name": "/VICTIM/PWNED", "sha256": "0", "text": "x"}]),
        "name ../": _doc(patches=[{"name": "../victim/PWNED", "sha256": "0", "text": "x"}]),
        "name a/../..": _doc(
            patches=[{"name": "a/" + "../" * 9 + "VICTIM/PWNED", "sha256": "0", "text": "x"}]
        ),
        "copy whose sha fits, leaving the tree": _doc(
            patches=[{"name": "0001-f.patch", "sha256": fits, "text": out_text}]
        ),
        "copy that is not its sha": _doc(
            patches=[{"name": "0001-f.patch", "sha256": "0" * 64, "text": PATCH}]
        ),
        "copy with a lone surrogate": _doc(
            patches=[{"name": "0001-f.patch", "sha256": "0", "text": "\ud800"}]
        ),
    }
    out = []
    for name, body in raw.items():

        def put(lab: Lab, body: str | bytes = body) -> None:
            if isinstance(body, str):
                body = body.replace("VICTIM", str(lab.victim).lstrip("/"))
            _stamp(lab, body)

        for mode in ("--status", "--revert", "--check", ""):
            # well-formed: --status may say "outdated", --revert undo what it names
            either = name in WELL_FORMED.get(mode, ())
            out.append(probe(w, f"stamp: {name}", mode, put, either=either))
    for kind in ("sparse 20 GB", "/dev/zero"):

        def at_stamp(lab: Lab, kind: str = kind) -> None:
            special(lab.tree / ".wolf-patches.json", kind)

        out += [probe(w, f"stamp: {kind}", m, at_stamp) for m in ("--status", "--revert")]
    return out


def series_files(w: Path) -> list[Probe]:
    """Series and patch files: not UTF-8, FIFOs, /dev/zero, sparse, names out, quilt's awk."""
    out = []
    for i, bad in enumerate((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xe2\x80\xa8")):
        listing = b"# ok\n" * i + b"0001-f.patch" + bad + b"\n"
        out.append(
            probe(
                w,
                f"series bytes {bad!r}",
                MODES[i % len(MODES)],
                with_patches({"0001-f.patch": PATCH}, listing),
            )
        )
    s = w / "sentinels" / "awk"
    names = [
        "../patches/0001-f.patch",
        "/etc/hostname",
        "x\x1b]0;t\x07",
        "-p1",
        f'a" || system("touch {s}") || "',
        "a b c",
        ".",
        "sub/../../x",
    ]
    for i, n in enumerate(names):
        out.append(
            probe(
                w,
                f"series name {n!r}",
                ("", "--refresh")[i % 2],
                with_patches({"0001-f.patch": PATCH}, f"{n}\n"),
                sentinel=s,
            )
        )

    def kind(what: str, how: str) -> Step:
        def plant(lab: Lab) -> None:
            p = lab.patches / ("series" if what == "series" else "0001-f.patch")
            p.unlink()
            if how == "link out":
                p.symlink_to(lab.victim / "secret")
            else:
                special(p, how)

        return plant

    for what in ("series", "patch"):
        for how in ("fifo", "/dev/zero", "sparse 20 GB", "link out"):
            out.append(probe(w, f"{what} a {how}", "", kind(what, how)))
    e = w / "sentinels" / "ed"
    ed = PATCH + f"0a\npwned\n.\nw\n!touch {e}\nq\n"
    out += [
        probe(
            w,
            "an ed script after the diff",
            m,
            with_patches({"0001-f.patch": ed}),
            valid=ed.encode(),
            sentinel=e,
        )
        for m in ("--refresh", "")
    ]
    out.append(
        probe(w, "a patch of 17 MB", "", with_patches({"0001-f.patch": PATCH + "\n" * (17 << 20)}))
    )
    hunk_header = "--- a/f\n+++ b/f\n@@ -1 +1,99999999999 @@\n-hello\n+bye\n"
    out.append(
        probe(w, "a hunk longer than the patch", "", with_patches({"0001-f.patch": hunk_header}))
    )
    return out


def family(w: Path) -> list[Probe]:
    (w / "patch-labs").mkdir(exist_ok=True)
    (w / "sentinels").mkdir(exist_ok=True)
    probes = [
        *line_breaks(w),
        *paths(w),
        *links_on_the_way(w),
        *links_made(w),
        *planted(w),
        *stamps(w),
        *series_files(w),
    ]
    last = probes[-1]
    after = last.after

    def and_summary() -> Finding | None:
        got = after() if after else None
        summary()
        return got

    last.after = and_summary
    return probes


if __name__ == "__main__" and sys.argv[1:2] == ["--measure"]:
    raise SystemExit(measure(sys.argv[2], sys.argv[4:]))
