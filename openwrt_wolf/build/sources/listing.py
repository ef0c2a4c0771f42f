"""Which source files an OpenWrt tree's build needs, asked of the tree's own make.

`make download` runs with SCRIPT_DIR pointing at a copy of scripts/ (symlinks) whose
download.pl only records its arguments (target dir, file, hash, URLs) and downloads nothing,
with an empty DL_DIR (a file already in dl/ is never asked for) and a STAGING_DIR_HOST that
has the host's flock and zstd (make download otherwise builds tools/zstd first). Then the
packages make compiles without anyone selecting them (tmp/.packagedeps: busybox's compile
depends on libselinux for its selinux variant, ppp on libpcap and linux-atm, ...) and the host
tools built only as another tool's dependency (tools/Makefile: liblzo for lzop) are asked the
same with `make <dir>/download`. Each directory's PKG_* variables come from `make -C <dir>
var.<VAR>` (rules.mk's own query target)."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ... import proc
from ...errors import WolfError

MAKE_TIMEOUT = 3600.0
VAL_TIMEOUT = 300.0
PKG_VARS = (
    "PKG_NAME",
    "PKG_VERSION",
    "PKG_SOURCE",
    "PKG_SOURCE_PROTO",
    "PKG_SOURCE_URL",
    "PKG_SOURCE_VERSION",
    "PKG_SOURCE_DATE",
    "PKG_SOURCE_SUBMODULES",
    "PKG_HASH",
    "PKG_MIRROR_HASH",
    "HOST_BUILD_DIR",
    "PKG_BUILD_DIR",
)

RECORDER = """#!/bin/sh
# openwrt-wolf: records what OpenWrt's download.pl is asked for; downloads nothing
printf '%s\\t%s\\n' "$PWD" "$*" >> "$WOLF_DL_RECORD"
exit 0
"""

# tools/Makefile evaluated as its own make does (subdir.mk's functions are not included: the
# $(eval)s at its end expand to nothing), for tools-y and the compile dependencies: a tool
# built only as another's dependency (liblzo for lzop with CONFIG_SDK) is not in tools-y.
TOOLS_CLOSURE_MK = """include $(TOPDIR)/.config
include $(TOPDIR)/rules.mk
curdir := tools
include $(TOPDIR)/tools/Makefile
all:
\t@$(foreach d,$(sort $(tools-y)),echo 'dir $(d)';)
\t@$(foreach v,$(filter tools/%/compile,$(.VARIABLES)),echo 'dep $(v) $(strip $($(v)))';)
"""

CLOSURE_MK = """include $(TOPDIR)/.config
curdir := package
include $(TOPDIR)/tmp/.packagedeps
all:
\t@$(foreach d,$(sort $(package-y) $(package-m)),echo 'dir $(d)';)
\t@$(foreach v,$(filter package/%/compile,$(.VARIABLES)),echo 'dep $(v) $(strip $($(v)))';)
"""


@dataclass(frozen=True)
class Needed:
    """One file OpenWrt's download step asks for, and what the asking directory says of it."""

    file: str
    hash: str  # as download.pl gets it: PKG_HASH, or PKG_MIRROR_HASH for a packed checkout
    dirs: tuple[str, ...]  # tree directories whose make asked for it
    urls: tuple[str, ...] = ()
    name: str = ""  # PKG_NAME (when the directory's PKG_SOURCE is this file)
    version: str = ""  # PKG_VERSION
    proto: str = ""  # "git": a packed checkout (PKG_MIRROR_HASH)
    git_url: str = ""
    commit: str = ""  # PKG_SOURCE_VERSION
    source_date: str = ""
    submodules: str = ""
    build_dir: str = ""  # basename of HOST_BUILD_DIR / PKG_BUILD_DIR
    pkg_vars: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_git(self) -> bool:
        return self.proto == "git"

    def to_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "hash": self.hash,
            "dirs": list(self.dirs),
            "urls": list(self.urls),
            "name": self.name,
            "version": self.version,
            "proto": self.proto,
            "git_url": self.git_url,
            "commit": self.commit,
            "source_date": self.source_date,
        }


def _farm(tree: Path, into: Path) -> Path:
    """scripts/ as symlinks, download.pl replaced by the recorder."""
    farm = into / "scripts"
    farm.mkdir()
    for p in (tree / "scripts").iterdir():
        if p.name != "download.pl":
            (farm / p.name).symlink_to(p)
    rec = farm / "download.pl"
    rec.write_text(RECORDER)
    rec.chmod(0o755)
    return farm


def _host(into: Path) -> Path:
    host = into / "host"
    (host / "bin").mkdir(parents=True)
    for tool in ("flock", "zstd"):
        found = shutil.which(tool)
        if not found:
            raise WolfError(
                f"{tool} is not installed (OpenWrt's make download needs it)",
                hint="apt-get install util-linux zstd",
            )
        (host / "bin" / tool).symlink_to(found)
    return host


def _make(tree: Path, args: list[str], log: Path, env: dict[str, str]) -> proc.Completed:
    # -k: a git package's hash check after the recorder fails by design; go on with the rest
    return proc.run(
        ["make", "-k", *args],
        cwd=tree,
        timeout=MAKE_TIMEOUT,
        logfile=log,
        env={"MAKEFLAGS": "", **env},
        check=False,
    )


def compile_closure(tree: Path, log: Path, *, tools: bool = False) -> tuple[list[str], list[str]]:
    """The directories make compiles for the tree's .config (package/ or, with ``tools``,
    tools/): the selected ones and, after them, what compile dependencies add (conditions
    evaluated by make against .config). Returns (selected, added)."""
    with tempfile.TemporaryDirectory(prefix="wolf-closure-") as tmp:
        mk = Path(tmp) / "closure.mk"
        mk.write_text(TOOLS_CLOSURE_MK if tools else CLOSURE_MK)
        out = proc.run(["make", "-s", "-f", mk, f"TOPDIR={tree}"], cwd=tree, timeout=VAL_TIMEOUT,
                       logfile=log, env={"MAKEFLAGS": ""}).output  # fmt: skip
    roots: list[str] = []
    deps: dict[str, list[str]] = {}
    prefix = "tools/" if tools else "package/"
    for line in out.splitlines():
        parts = line.split()
        if parts[:1] == ["dir"] and len(parts) == 2:
            roots.append(parts[1])
        elif parts[:1] == ["dep"] and len(parts) >= 2:
            key = _dir_of(parts[1], prefix)
            deps.setdefault(key, []).extend(_dir_of(d, prefix) for d in parts[2:])
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        d = todo.pop()
        if d in seen:
            continue
        seen.add(d)
        todo.extend(deps.get(d, []))
    return sorted(set(roots)), sorted(seen - set(roots))


def _dir_of(target: str, prefix: str = "package/") -> str:
    d = target.removeprefix(prefix).removesuffix("/compile")
    return d.removesuffix("/host")


def pkg_vars(tree: Path, d: str, makefile: Path | None = None) -> dict[str, str]:
    """The directory's PKG_* variables, as its make evaluates them (rules.mk's var.X prints
    X='value' in shell quoting); ``makefile``: another Makefile read in that directory."""
    args = [f"var.{v}" for v in PKG_VARS]
    other = ["-f", str(makefile)] if makefile else []
    done = proc.run(
        ["make", "-s", "-C", d, *other, *args, f"TOPDIR={tree}"],
        cwd=tree,
        timeout=VAL_TIMEOUT,
        check=False,
        env={"MAKEFLAGS": ""},
    )
    out: dict[str, str] = {}
    for line in done.output.splitlines():
        var, eq, value = line.partition("=")
        if eq and var in PKG_VARS and var not in out:
            try:
                words = shlex.split(value)
            except ValueError:
                continue
            out[var] = words[0] if words else ""
    return out


def replaced_by_us(tree: Path, orig_dir: Path, marker: str) -> list[Needed]:
    """What the original Makefiles of directories whose Makefile we replaced (a host tool taken
    from Debian's binaries) asked for: make no longer asks for it, but it is still what the
    tree pins, so the substitution stays listed."""
    out = []
    for orig in sorted(orig_dir.rglob("Makefile")):
        d = str(orig.parent.relative_to(orig_dir))
        current = tree / d / "Makefile"
        if not current.is_file() or marker not in current.read_text(errors="replace"):
            continue
        v = pkg_vars(tree, d, orig)
        pin = v.get("PKG_MIRROR_HASH" if v.get("PKG_SOURCE_PROTO") == "git" else "PKG_HASH", "")
        if v.get("PKG_SOURCE"):
            out.append(_needed(v["PKG_SOURCE"], [(d, pin, ())], {d: v}))
    return out


def downloads_when_compiled(tree: Path, d: str, dl_dir: Path) -> bool:
    """Whether `make compile` in ``d`` would download (a dry run): a package nobody selected
    is still compiled as a dependency, and some of them (libselinux for busybox) then unpack
    their source while others (linux-firmware) do nothing. ``dl_dir`` is an empty DL_DIR: with
    the tree's own dl/ a file fetched by an earlier run would not be downloaded again, and the
    package would drop out of the list (linux-atm, ppp's dependency, did)."""
    done = proc.run(
        ["make", "-n", "-s", "-C", d, "compile", f"TOPDIR={tree}", f"DL_DIR={dl_dir}"],
        cwd=tree,
        timeout=VAL_TIMEOUT,
        check=False,
        env={"MAKEFLAGS": ""},
    )
    return "/download.pl " in done.output


def list_needed(
    tree: Path,
    log: Path,
    *,
    on_step: Callable[[str], None] | None = None,
    targets: tuple[str, ...] = ("download",),
) -> list[Needed]:
    """The files the tree's build downloads for its current .config (``targets``: other
    make targets than the whole `download`, e.g. "tools/bison/download", without the compile
    dependencies)."""
    if not (tree / ".config").is_file():
        raise WolfError(f"{tree} has no .config", hint="run `make defconfig` (or give --device)")
    step = on_step or (lambda s: None)
    records: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}
    with tempfile.TemporaryDirectory(prefix="wolf-needed-") as tmp:
        t = Path(tmp)
        farm, host, dl, rec = _farm(tree, t), _host(t), t / "dl", t / "record.tsv"
        dl.mkdir()
        rec.touch()
        overrides = [f"SCRIPT_DIR={farm}", f"STAGING_DIR_HOST={host}", f"DL_DIR={dl}"]
        env = {"WOLF_DL_RECORD": str(rec)}
        step("make download (recording)")
        _make(tree, [*targets, *overrides], log, env)
        asked = {_rel(tree, ln.split("\t", 1)[0]) for ln in rec.read_text().splitlines()}
        step("compile dependencies")
        extra: list[str] = []
        if targets == ("download",):
            # every host tool make builds, not only those another tool adds: once a tool is
            # built, `make download` no longer asks for its source (a rerun after a partial
            # build lost tools/mkimage's u-boot, and its edit was put back)
            sel, added = compile_closure(tree, log, tools=True)
            tools = [f"tools/{d}" for d in sel + added if f"tools/{d}" not in asked]
            extra += [d for d in tools if (tree / d / "Makefile").is_file()]
            selected, added = compile_closure(tree, log)
            pkgs = [f"package/{d}" for d in selected + added if f"package/{d}" not in asked]
            pkgs = [d for d in pkgs if (tree / d / "Makefile").is_file()]
            with ThreadPoolExecutor(max_workers=2) as pool:
                fetches = list(pool.map(lambda d: downloads_when_compiled(tree, d, dl), pkgs))
            extra += [d for d, yes in zip(pkgs, fetches, strict=True) if yes]
        if extra:
            _make(tree, [f"{d}/download" for d in extra] + overrides, log, env)
        for line in rec.read_text().splitlines():
            where, _, args = line.partition("\t")
            argv = args.split(" ")
            if len(argv) < 3:
                continue
            urls = tuple(a for a in argv[3:] if "://" in a or a.startswith("@"))
            records.setdefault(argv[1], []).append((_rel(tree, where), argv[2], urls))
    step("package variables")
    dirs = sorted({d for recs in records.values() for d, _, _ in recs})
    with ThreadPoolExecutor(max_workers=2) as pool:
        vars_by_dir = dict(zip(dirs, pool.map(lambda d: pkg_vars(tree, d), dirs), strict=True))
    return [_needed(name, recs, vars_by_dir) for name, recs in sorted(records.items())]


def _rel(tree: Path, where: str) -> str:
    try:
        return str(Path(where).resolve().relative_to(tree.resolve()))
    except ValueError:
        return where


def _needed(
    name: str, recs: list[tuple[str, str, tuple[str, ...]]], vars_by_dir: dict[str, dict[str, str]]
) -> Needed:
    hashes = {h for _, h, _ in recs}
    if len(hashes) != 1:
        raise WolfError(
            f"{name} is asked for with {len(hashes)} different hashes by "
            f"{', '.join(sorted({d for d, _, _ in recs}))}"
        )
    dirs = tuple(sorted({d for d, _, _ in recs}))
    urls = tuple(dict.fromkeys(u for _, _, us in recs for u in us))
    v = next((vars_by_dir[d] for d in dirs if vars_by_dir[d].get("PKG_SOURCE") == name), {})
    build = v.get("HOST_BUILD_DIR") if dirs[0].startswith("tools/") else v.get("PKG_BUILD_DIR")
    return Needed(
        file=name,
        hash=hashes.pop(),
        dirs=dirs,
        urls=urls,
        name=v.get("PKG_NAME", ""),
        version=v.get("PKG_VERSION", ""),
        proto=v.get("PKG_SOURCE_PROTO", ""),
        git_url=v.get("PKG_SOURCE_URL", ""),
        commit=v.get("PKG_SOURCE_VERSION", ""),
        source_date=v.get("PKG_SOURCE_DATE", ""),
        submodules=v.get("PKG_SOURCE_SUBMODULES", ""),
        build_dir=os.path.basename((build or "").rstrip("/")),
        pkg_vars=v,
    )


def needed_for(tree: Path, dirs: list[str]) -> list[Needed]:
    """What compiling these package directories of the tree downloads (each one's
    PKG_SOURCE, as its make evaluates it): the sdk backend's base feed, whose directories
    the SDK's make names."""
    with proc.workers(2, "pkg-vars") as pool:
        vars_by_dir = dict(zip(dirs, pool.map(lambda d: pkg_vars(tree, d), dirs), strict=True))
    by_file: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}
    for d, v in vars_by_dir.items():
        if not v.get("PKG_SOURCE"):
            continue
        pin = v.get("PKG_MIRROR_HASH" if v.get("PKG_SOURCE_PROTO") == "git" else "PKG_HASH", "")
        by_file.setdefault(v["PKG_SOURCE"], []).append((d, pin, ()))
    return [_needed(name, recs, vars_by_dir) for name, recs in sorted(by_file.items())]
