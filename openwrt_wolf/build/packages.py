"""A flavour's package changes on a release (data/flavours.toml), and their renderings with
the jinja2 templates in templates/ (top level): the ImageBuilder's PACKAGES value, a
.config fragment (diffconfig) for the SDK and buildroot, and feeds.conf."""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..catalogue import flavours, names, releases
from ..errors import WolfError
from ..paths import DATA_DIR, PROJECT_ROOT

if TYPE_CHECKING:
    import jinja2

TEMPLATES = PROJECT_ROOT / "templates"


@dataclass(frozen=True, kw_only=True)
class Rules(flavours.PackageChanges):
    """What data/flavours.toml says for one flavour on one release."""

    flavour: str
    release: str

    def needs_sdk(self, luci_https: bool) -> bool:
        """Whether the request is only complete with packages the SDK builds."""
        return luci_https and bool(self.sdk_luci_https)


@dataclass(frozen=True)
class Changes:
    """Packages to remove from and add to OpenWrt's defaults for one device."""

    remove: tuple[str, ...]
    add: tuple[str, ...]
    notes: tuple[str, ...]
    local: tuple[str, ...] = ()  # of `add`: packages the SDK compiles from the local feed

    def __post_init__(self) -> None:
        # every name here reaches PACKAGES=, a diffconfig or a .config seed: OpenWrt names only
        names.packages((*self.remove, *self.add, *self.local), "package change set")

    def spec(self) -> list[str]:
        """The change set as ImageBuilder words, sorted: what the request hash covers."""
        return sorted([f"-{n}" for n in self.remove] + list(self.add))


def rules(flavour: str, release: str) -> Rules:
    fl = flavours.get(flavour)
    rel = releases.get(release).name
    spec = fl.releases.get(rel)
    if spec is None:
        raise WolfError(
            f"flavour {fl.name} has no package changes for release {rel} in data/flavours.toml",
            hint="add a [flavour.<name>.release.<release>] table",
        )
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    return Rules(flavour=fl.name, release=rel, **fields)


def expand(r: Rules, extra: Iterable[str]) -> list[str]:
    """--packages words with `@group` replaced by the flavour's packages of that group
    (data/flavours.toml `groups`: e.g. @https-server is uhttpd with the flavour's certificate
    tool), and `-old` also removing the flavour's replacement of ``old`` (removing Wi-Fi's
    wpad-basic-mbedtls removes wpad-basic-wolfssl from the wolfSSL flavour)."""
    groups = dict(r.groups)
    out: list[str] = []
    for p in extra:
        if p.startswith("@"):
            if p[1:] not in groups:
                raise WolfError(
                    f"--packages {p}: flavour {r.flavour} on {r.release} has no such group",
                    hint=f"groups: {', '.join('@' + g for g in groups) or 'none'}",
                )
            out += [g for g in groups[p[1:]] if g not in out]
        elif p not in out:
            out.append(p)
    for old, new in r.replace:
        if f"-{old}" in out and f"-{new}" not in out:
            out.append(f"-{new}")
    return out


def changes(
    r: Rules,
    defaults: Iterable[str] | None = None,
    *,
    luci_https: bool = False,
    extra: Iterable[str] = (),
    sdk: bool = False,
    stock: bool = False,
) -> Changes:
    """Apply the rules to a device's default package set (``stock``: OpenWrt's own packages
    of a flavour the patch set makes, whose stock notes then hold).

    ``defaults`` is OpenWrt's default set for the profile (the ImageBuilder's `make info`);
    a replacement only applies when its package is there (wpad-basic-* exists only on targets
    with Wi-Fi). Without defaults every replacement applies (the request's own view).
    """
    have = None if defaults is None else set(defaults)
    remove: list[str] = []
    add: list[str] = []
    extra = expand(r, extra)
    foreign = {} if have is None else _foreign(have, r)
    if have is not None:  # seen as OpenWrt's own defaults, which the rules are written for
        remove += sorted(foreign)
        have = (have - set(foreign)) | set(foreign.values())
    replaced = {old for old, _ in r.replace}
    for old in sorted(foreign.values()):  # the stock package, where the flavour keeps it
        if old not in replaced and f"-{old}" not in extra and old not in add:
            add.append(old)
    for old, new in r.replace:
        if f"-{old}" in extra:
            continue  # removed on request: so is its replacement (expand)
        if have is None or old in have:
            remove.append(old)
            add.append(new)
    remove += [p for p in r.remove if p not in remove]
    local = r.sdk_luci_https if (sdk and luci_https) else ()
    luci = (local or r.luci_https) if luci_https else ()
    wanted = list(r.add) + list(luci) + list(extra)
    for p in wanted:
        if p.startswith("-"):
            if p[1:] not in remove:
                remove.append(p[1:])
        elif p not in add:
            add.append(p)
    clash = sorted(set(remove) & set(add))
    if clash:
        raise WolfError(
            f"flavour {r.flavour} on {r.release} both removes and adds {', '.join(clash)}",
            hint="fix data/flavours.toml or --packages",
        )
    notes = r.notes if (luci_https or not _luci_note(r.notes)) else _no_luci(r.notes)
    notes += r.stock_notes if stock else ()
    return Changes(tuple(remove), tuple(add), notes, tuple(local))


def _foreign(defaults: set[str], r: Rules) -> dict[str, str]:
    """Defaults that are another flavour's variant of an OpenWrt default, with the Mbed TLS
    package each stands for. An ImageBuilder made by a buildroot with USE_WOLFSSL=y ships
    libustream-wolfssl, wpad-basic-wolfssl and apk-wolfssl as defaults: the mbedtls and openssl
    flavours must swap them back. Known by OpenWrt's variant names (<stem>-<library>) and by
    every flavour's replacements in data/flavours.toml (px5g-standalone)."""
    stock = flavours.openwrt_default().library
    own = flavours.get(r.flavour).library
    back: dict[str, str] = {}
    for name, fl in flavours.flavours().items():
        spec = fl.releases.get(r.release)
        if name != r.flavour and spec is not None:
            back.update({new: old for old, new in spec.replace})
    out = {}
    for d in sorted(defaults):
        lib = next((f.library for f in flavours.flavours().values()
                    if d.endswith(f"-{f.library}")), None)  # fmt: skip
        if d in back and not d.endswith(f"-{own}"):
            out[d] = back[d]
        elif lib is not None and lib not in (stock, own):
            out[d] = d.removesuffix(lib) + stock
    return out


def _luci_note(notes: tuple[str, ...]) -> bool:
    return any("luci" in n for n in notes)


def _no_luci(notes: tuple[str, ...]) -> tuple[str, ...]:
    # notes about the LuCI HTTPS collection only matter when it was asked for
    return tuple(n for n in notes if "luci" not in n)


@cache
def _env() -> jinja2.Environment:
    import jinja2  # here: a cached build renders nothing

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(template: str, **ctx: Any) -> str:
    return _env().get_template(template).render(**ctx)


def packages_value(c: Changes) -> str:
    """PACKAGES="..." for `make image` and `make manifest`."""
    return " ".join(render("imagebuilder-packages.j2", changes=c).split())


def diffconfig(
    c: Changes, *, flavour: str, release: str, target: str, subtarget: str, profile: str
) -> str:
    return render(
        "diffconfig.j2",
        changes=c,
        flavour=flavour,
        release=release,
        target=f"{target}/{subtarget}",
        board=target,
        subtarget=subtarget,
        profile=profile,
    )


@cache
def _feeds() -> dict[str, Any]:
    return tomllib.loads((DATA_DIR / "feeds.toml").read_text())


def feeds_conf(
    release: str, flavour: str, local_feed: Path | None = None, *, base: Path | None = None,
    upstream: bool = True,
) -> str:  # fmt: skip
    """feeds.conf: the release's feeds (``upstream``), our local feed, and a base feed
    linked from an OpenWrt tree's package/ (what the SDK's own feeds.conf.default clones from
    git.openwrt.org)."""
    rel = releases.get(release).name
    spec = _feeds()["release"].get(rel)
    if spec is None:
        raise WolfError(
            f"no feeds.conf.default known for release {rel}",
            hint="add it to data/feeds.toml from the release's tree",
        )
    feeds = [(f["method"], f["name"], f["url"]) for f in spec["feeds"]] if upstream else []
    if base is not None:
        feeds.insert(0, ("src-link", "base", str(base)))
    if local_feed is not None:
        feeds.append(("src-link", "wolf", str(local_feed)))
    where = {"wolf": "--feed", "base": "--tree"}
    checked = [names.feed(*f, where=where.get(f[1], "data/feeds.toml")) for f in feeds]
    return render("feeds.conf.j2", feeds=checked, release=rel, flavour=flavour)
