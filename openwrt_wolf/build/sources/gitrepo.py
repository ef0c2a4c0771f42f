"""A git repository given as a source (`sources --sources DIR`, a submodule's repository) read
as data: its objects and refs, never its config, hooks or attributes files.

git runs what a repository's own config names: a filter driver's smudge or process command
(applied by `git archive` and `checkout-index` through `.git/info/attributes` or a committed
`.gitattributes`), core.fsmonitor (read-tree, checkout-index), core.sshCommand for the
promisor remote of a partial clone (fetching a missing blob), hooks; include.path reads any
file. So git never opens the source as a repository. We make our own bare repository in a
temporary folder: its object store borrows the source's (objects/info/alternates, written by
us), its refs are the source's as read here (HEAD, packed-refs, refs/: 40-hex values under
plain names, refs/replace/ left out), its config is ours (no filter, hook, fsmonitor or
commit-graph). git runs with the system and global config off and every variable that names
a repository or config pinned to ours, so the only config it reads is ours.

The source must hold its objects itself: a `.git` file or link (its git directory
elsewhere), objects/info/alternates (another repository's objects), or a link or special
file among its objects (git follows links, and opening a FIFO waits for ever) is refused
(UnsafeRepository). Nothing of the source is written."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from ... import proc
from ...errors import WolfError
from ...files import outputs
from ...trust import untrusted

GIT_TIMEOUT = 600.0
MAX_REF_FILE = 4096
MAX_PACKED_REFS = 256 << 20  # a monorepo's tags: MB, not GB
MAX_REFS = 1_000_000
MAX_ENTRIES = 5_000_000  # loose objects and pack files
_HEX = re.compile(r"[0-9a-f]{40}")
# a ref name we copy: plain parts, no "..", no part beginning with "." or ending in ".lock"
_PART = r"(?!\.)(?:(?!\.\.)[A-Za-z0-9_+@=,.#%-])+(?<!\.lock)(?<!\.)"
_REF = re.compile(rf"refs/(?:{_PART}/)*{_PART}")
_NONE = "ref: refs/heads/.none\n"  # a HEAD that names no ref we copy: resolves to nothing

# ours: no filter driver, hook, fsmonitor, commit-graph or multi-pack-index; no attributes
# file of the host; abbreviations as rawgit sets them (export-subst); signatures never checked
CONFIG = """[core]
\trepositoryformatversion = 0
\tbare = true
\tabbrev = 8
\tattributesFile = /dev/null
\thooksPath = /dev/null
\tfsmonitor = false
\tcommitGraph = false
\tmultiPackIndex = false
[gpg]
\tprogram = /nonexistent/openwrt-wolf-no-gpg
[gpg "ssh"]
\tprogram = /nonexistent/openwrt-wolf-no-ssh-keygen
[gpg "x509"]
\tprogram = /nonexistent/openwrt-wolf-no-gpgsm
"""


class UnsafeRepository(WolfError):
    """A source repository git would read beyond its own folder: not a missing file, an input
    to fix (the run stops with this one line)."""


class Source:
    """A source repository opened through our own bare repository (``gitdir``)."""

    def __init__(self, origin: Path, gitdir: Path) -> None:
        self.origin = origin
        self.gitdir = gitdir

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        g = str(self.gitdir)
        return {
            "GIT_DIR": g,
            "GIT_COMMON_DIR": g,
            "GIT_OBJECT_DIRECTORY": f"{g}/objects",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": "",
            "GIT_INDEX_FILE": f"{g}/index",
            "GIT_SHALLOW_FILE": f"{g}/shallow",
            "GIT_GRAFT_FILE": f"{g}/info/grafts",
            "GIT_NAMESPACE": "",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_SYSTEM": "/dev/null",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_PARAMETERS": "",
            "GIT_CONFIG_COUNT": "0",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_NO_LAZY_FETCH": "1",
            "GIT_TERMINAL_PROMPT": "0",
            **(extra or {}),
        }

    def git(
        self, *args: str | os.PathLike[str], env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> proc.Completed:  # fmt: skip
        return proc.run(["git", *args], timeout=GIT_TIMEOUT, cwd=self.gitdir,
                        env=self.env(env), check=check)  # fmt: skip

    def resolve(self, rev: str) -> str:
        """A revision (HEAD, a tag, an abbreviated commit) as a full commit id, or ""."""
        if not rev or rev.startswith("-"):
            return ""
        done = self.git("rev-parse", "--verify", "--quiet", "--end-of-options",
                        f"{rev}^{{commit}}", check=False)  # fmt: skip
        out = done.output.strip()
        return out if done.returncode == 0 and _HEX.fullmatch(out) else ""


@contextlib.contextmanager
def reading(repo: Path | Source) -> Iterator[Source]:
    """The repository at ``repo`` (a git directory: a checkout's .git folder, or a bare
    repository) opened for reading; a Source given is used as it is."""
    if isinstance(repo, Source):
        yield repo
        return
    src = _checked(repo)
    with tempfile.TemporaryDirectory(prefix="wolf-gitsrc-") as tmp:
        ours = Path(tmp) / "repo.git"
        _make(ours, src)
        yield Source(repo, ours)


def git_dir(cand: Path) -> Path:
    """The git directory of a repository folder under --sources: ``cand`` itself when bare,
    else its .git folder, which must be a folder there (a .git file or link names another)."""
    dot = cand / ".git"
    try:
        st = dot.lstat()
    except FileNotFoundError:
        return cand
    except OSError as e:
        raise WolfError(f"git repository {cand}: .git: {untrusted.os_reason(e)}") from None
    if stat.S_ISDIR(st.st_mode):
        return dot
    raise UnsafeRepository(
        f"git repository {cand}: .git is {_kind(st.st_mode)}, not the repository's own folder "
        "(its git directory is elsewhere)",
        hint="put that git directory itself (or a clone) under --sources",
    )


def _kind(mode: int) -> str:
    return "a link" if stat.S_ISLNK(mode) else untrusted.kind_of(mode)


def _checked(repo: Path) -> Path:
    """The source's git directory (resolved), after checking that git reads nothing of
    another folder through it: no borrowed objects, no link or special file among them."""
    try:
        top = repo.resolve(strict=True)
    except OSError as e:
        raise WolfError(f"git repository {repo}: {untrusted.os_reason(e)}") from None
    if not top.is_dir():
        raise WolfError(f"git repository {repo} is not a folder")
    if "\n" in str(top) or str(top).startswith('"'):
        raise UnsafeRepository(f"git repository {repo}: a path git's alternates cannot name")
    objects = top / "objects"
    _own_dir(repo, objects, "objects")
    for name in ("alternates", "http-alternates"):
        if os.path.lexists(objects / "info" / name):
            raise UnsafeRepository(
                f"git repository {repo} borrows objects from another (objects/info/{name})",
                hint="make it hold its own: git repack -a -d, then remove that file",
            )
    seen = 0
    try:
        with os.scandir(objects) as it:
            for entry in it:
                if entry.name == "info":
                    _own_dir(repo, objects / "info", "objects/info")
                elif entry.name == "pack" or re.fullmatch(r"[0-9a-f]{2}", entry.name):
                    _own_dir(repo, Path(entry.path), f"objects/{entry.name}")
                    seen = _regular_files(repo, Path(entry.path), entry.name, seen)
    except OSError as e:
        raise WolfError(f"git repository {repo}: objects: {untrusted.os_reason(e)}") from None
    return top


def _own_dir(repo: Path, d: Path, rel: str) -> None:
    try:
        st = d.lstat()
    except OSError as e:
        raise WolfError(f"git repository {repo}: {rel}: {untrusted.os_reason(e)}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeRepository(
            f"git repository {repo}: {rel} is {_kind(st.st_mode)}, not a folder of its own"
        )


def _regular_files(repo: Path, d: Path, rel: str, seen: int) -> int:
    with os.scandir(d) as it:
        for entry in it:
            seen += 1
            if seen > MAX_ENTRIES:
                raise UnsafeRepository(
                    f"git repository {repo} has more than {MAX_ENTRIES:,} object files",
                    hint="pack it: git gc",
                )
            if not entry.is_file(follow_symlinks=False):
                mode = entry.stat(follow_symlinks=False).st_mode
                raise UnsafeRepository(
                    f"git repository {repo}: objects/{rel}/{entry.name} is {_kind(mode)}, "
                    "not an object file"
                )
    return seen


def _ref_file(top: Path, rel: str, limit: int) -> bytes:
    """A ref file's bytes (b"" when there is none): a regular file, not a link (git would
    read another file through it, and wait for ever on a FIFO), of at most ``limit`` bytes."""
    path = top / rel
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return b""
    except OSError as e:
        raise WolfError(f"git repository {top}: {rel}: {untrusted.os_reason(e)}") from None
    if not stat.S_ISREG(mode):
        raise UnsafeRepository(f"git repository {top}: {rel} is {_kind(mode)}, not a ref file")
    return untrusted.read_bytes(path, "git repository file", limit)


def read_refs(top: Path) -> tuple[dict[str, str], str]:
    """The source's refs (name -> commit or tag id; symbolic refs followed) and what its
    HEAD names: a ref name, a 40-hex id, or ""."""
    refs: dict[str, str] = {}
    sym: dict[str, str] = {}
    raw = _ref_file(top, "packed-refs", MAX_PACKED_REFS)
    for line in raw.decode("utf-8", "replace").split("\n"):
        sha, _, name = line.partition(" ")
        if _HEX.fullmatch(sha) and _REF.fullmatch(name):
            refs[name] = sha
            _count(top, len(refs))
    walked = 0
    if os.path.lexists(top / "refs"):
        _own_dir(top, top / "refs", "refs")
        for d, dirs, files in os.walk(top / "refs"):
            for f in [*files, *(x for x in dirs if (Path(d) / x).is_symlink())]:
                walked += 1
                _count(top, walked)
                rel = (Path(d) / f).relative_to(top).as_posix()
                text = _ref_file(top, rel, MAX_REF_FILE).decode("utf-8", "replace").strip()
                if not _REF.fullmatch(rel):
                    continue
                if _HEX.fullmatch(text):
                    refs[rel] = text
                elif text.startswith("ref: ") and _REF.fullmatch(text[5:]):
                    sym[rel] = text[5:]
    for name, target in sym.items():
        for _ in range(5):  # as git follows a chain of symbolic refs
            if target in refs or target not in sym:
                break
            target = sym[target]
        if target in refs:
            refs[name] = refs[target]
    refs = {k: v for k, v in refs.items() if not k.startswith("refs/replace/")}
    head = _ref_file(top, "HEAD", MAX_REF_FILE).decode("utf-8", "replace").strip()
    if head.startswith("ref: ") and _REF.fullmatch(head[5:]):
        return refs, head[5:]
    return refs, head if _HEX.fullmatch(head) else ""


def _count(top: Path, n: int) -> None:
    if n > MAX_REFS:
        raise UnsafeRepository(f"git repository {top} has more than {MAX_REFS:,} refs")


def _make(ours: Path, src: Path) -> None:
    """Our bare repository over the source's objects, with its refs and our config."""
    refs, head = read_refs(src)
    for d in ("objects/info", "objects/pack", "refs/heads", "refs/tags", "info"):
        (ours / d).mkdir(parents=True)
    outputs.write_text(ours / "objects" / "info" / "alternates", f"{src / 'objects'}\n")
    outputs.write_text(ours / "config", CONFIG)
    outputs.write_text(ours / "packed-refs", "".join(f"{refs[k]} {k}\n" for k in sorted(refs)))
    if head.startswith("refs/"):
        outputs.write_text(ours / "HEAD", f"ref: {head}\n")
    else:
        outputs.write_text(ours / "HEAD", f"{head}\n" if head else _NONE)
