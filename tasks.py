"""openwrt-wolf tasks. Thin by design: parse arguments, call openwrt_wolf, print.
Run through ./wolf (it prepares .venv), e.g. `./wolf size-report`, `./wolf test`."""

from __future__ import annotations

import os
import sys

from invoke import task

from openwrt_wolf.cli import guarded, integer, number, path, path_list, required, tcp_port
from openwrt_wolf.host import hosttools as _hosttools
from openwrt_wolf.paths import check_store

# --- catalogue -------------------------------------------------------------------------


@task(
    help={
        "release": "OpenWrt release (25.12.5, 24.10.8, snapshot)",
        "tree": "an OpenWrt source tree to read devices from",
        "device": "with --tree: only these profiles (comma list, globs, catalogue aliases)",
        "target": "with --tree: targets to read (comma list, or all; default: the catalogue's)",
        "write": "with --tree: update data/devices.toml entries of the release from the tree",
    }
)
@guarded
def devices(c, release=None, tree=None, write=False, device=None, target=None):
    """List the device catalogue; with --tree, read devices from an OpenWrt tree."""
    tree = path(tree, "--tree")
    from openwrt_wolf.catalogue import cli as catalogue_cli

    catalogue_cli.main(release=release, tree=tree, write=write, device=device, target=target)


@task(
    help={
        "group": f"the job whose tools to list: {', '.join(_hosttools.groups())} (default test)",
        "install": "apt-get install the missing ones (as root or with password-less sudo)",
    }
)
@guarded
def hosttools(c, group="test", install=False):
    """List the host tools a job needs and their Debian packages; --install installs them."""
    from openwrt_wolf.host import cli as host_cli

    host_cli.main(group=group, install=install)


_SOURCES_HELP = {
    "sources": "directories holding the pinned upstream files by name (comma-separated; also "
    "$OPENWRT_WOLF_SOURCES), looked at before ../shared/openwrt",
    "sources_url": "base URLs of mirrors holding them by name (comma-separated; also "
    "$OPENWRT_WOLF_SOURCES_URL), tried before the public archive URLs",
}


@task(help=_SOURCES_HELP)
@guarded
def openwrt_tools(c, sources=None, sources_url=None):
    """Build OpenWrt's own host image tools (mksquashfs4, padjffs2, fwtool, firmware-utils)
    from the pinned upstream sources (`./wolf sources`), once and cached; print where."""
    sources = path_list(sources, "--sources")
    from openwrt_wolf.host import cli as host_cli

    host_cli.openwrt_tools(dirs=sources, urls=sources_url)


@task(
    help={
        "tree": "fill this OpenWrt tree's dl/ (the tree mode); without it: our pinned upstream "
        "snapshots (data/upstream.toml)",
        "fetch": "pins: fetch and verify these (comma-separated names, or all); print the files",
        "digest": "pins: print an archive's sha256 and tree-sha256 and the pin it matches",
        "sources": "directories holding files by name (comma-separated; also "
        "$OPENWRT_WOLF_SOURCES): the pinned snapshots; with --tree OpenWrt's dl/ files and git "
        "repositories (<dir>/<project>[.git], the fetch tool's <dir>/<owner>+<project>/repo)",
        "sources_url": "base URLs of mirrors holding files by name (comma-separated; also "
        "$OPENWRT_WOLF_SOURCES_URL); with --tree a mirror laid out as OpenWrt's sources mirror",
        "allow": "--tree: classes other than exact that may be used: same-version, substitute, "
        "missing (comma list); each is written to <tree>/wolf-substitutions.json",
        "config": "--tree: seed .config files (comma list): the union of what each needs after "
        "make defconfig (default: the tree's .config)",
        "debian": "--tree: look in Debian's source archive (default on; --no-debian)",
        "revert": "--tree: undo the tree edits substitutions made (.wolf-sources/orig)",
        "redo": "--tree: files (OpenWrt's names, comma list) to resolve again from their "
        "original pins: their tree edits are undone first",
        "device": "--tree with --flavour: what `build --tree` needs for these devices (seeds)",
        "flavour": "--tree with --device: mbedtls, wolfssl, openssl or all",
        "packages": "--tree with --device/--flavour: build's --packages (extra, -name, @group)",
        "release": "--tree: OpenWrt release of the device entries (default 25.12.5)",
        "sdk_ib": "--tree with --device/--flavour: the seeds also make the SDK and ImageBuilder",
    }
)
@guarded
def sources(
    c, tree=None, fetch=None, digest=None, sources=None, sources_url=None, allow=None,
    config=None, debian=True, revert=False, redo=None, device=None, flavour=None, packages=None,
    release=None, sdk_ib=False,
):  # fmt: skip
    """Source files verified by sha256, in two modes (docs/sources.md). Without --tree: our
    pinned upstream snapshots (data/upstream.toml): the table; --fetch gets them from a mirror
    directory, the cache or the public URL and verifies each; --digest FILE. With --tree T:
    fill the OpenWrt tree's dl/ from local files, git repositories, a mirror, PyPI and Debian's
    source archive; every file checked against PKG_HASH / PKG_MIRROR_HASH and classed exact,
    same-version or substitute; anything but exact only with --allow, written to
    T/wolf-substitutions.json (the build record carries it). Exit 2 when a file is missing."""
    tree, digest = path(tree, "--tree"), path(digest, "--digest")
    sources, config = path_list(sources, "--sources"), path_list(config, "--config")
    from openwrt_wolf.build import cli as build_cli
    from openwrt_wolf.host import cli as host_cli

    if tree is None:  # the pinned upstream snapshots (host), else a tree's dl/ (build)
        build_cli.refuse_tree_options(
            allow=allow, configs=config, debian=debian, revert=revert, redo=redo, device=device,
            flavour=flavour, packages=packages, release=release, sdk_ib=sdk_ib,
        )  # fmt: skip
        host_cli.sources(fetch=fetch, digest=digest, dirs=sources, urls=sources_url)
        return
    sys.exit(build_cli.sources_main(
        tree=tree, fetch=fetch, digest=digest, dirs=sources, urls=sources_url, allow=allow,
        configs=config, debian=debian, revert=revert, redo=redo, device=device, flavour=flavour,
        packages=packages, release=release, sdk_ib=sdk_ib,
    ))  # fmt: skip


# --- size report (issue 2) -------------------------------------------------------------


@task(
    iterable=["from_", "fail_on"],
    help={
        "store": "results store directory (default: $OPENWRT_WOLF_STORE or ./results)",
        "from_": "OpenWrt bin/targets/<target>/<subtarget> dir or sysupgrade image; "
        "FLAVOUR=DIR labels it; repeatable",
        "device": "device profile or alias, comma-separated (e.g. tl-wr902ac)",
        "flavour": "mbedtls, wolfssl, openssl (comma-separated) or all",
        "release": "release the device names are resolved in (default 25.12.5)",
        "format": "terminal, markdown, json, csv or html (one self-contained page with plots)",
        "output": "write to this file (atomically) instead of stdout",
        "packages": "also show the N packages taking most bytes in the rootfs",
        "baseline": "compare with a saved JSON report, a store directory or a release",
        "fail_on": "exit 1 when a rule breaks: fits, headroom<64KiB, growth>4KiB, blocks>+0 "
        "(comma-separated or repeated)",
        "sort": "order of the fits matrix: headroom (tightest first) or device",
        "stock": "wolfSSL from the stock builds (build --stock: OpenWrt's own packages) "
        "instead of the patch set's; the Packages row says which each column is",
    },
)
@guarded
def size_report(
    c, store=None, from_=None, device=None, flavour=None, release=None, format="terminal",
    output=None, packages=None, baseline=None, fail_on=None, sort="headroom", stock=False,
):  # fmt: skip
    """Per device: TLS libraries (xz), rootfs, image, erase blocks, limit, headroom, fits."""
    store, output = path(store, "--store"), path(output, "--output")
    baseline = path(baseline, "--baseline")
    from_ = [path(f, "--from") for f in from_ or []]
    from openwrt_wolf.report import cli as report_cli

    report_cli.main(
        store=store, from_dirs=list(from_ or []), device=device, flavour=flavour,
        release=release, fmt=format, output=output,
        packages=integer(packages, "--packages", default=0, minimum=0), baseline=baseline,
        fail_on=list(fail_on or []), sort=sort, stock=stock,
    )  # fmt: skip


@task(
    help={
        "device": "device profile or alias (required), e.g. tl-wr902ac",
        "flavour": "only these flavours (comma-separated) or all",
        "release": "release the device name is resolved in (default 25.12.5)",
        "store": "results store directory",
        "format": "terminal, markdown, json, csv or html (with a line plot)",
        "output": "write to this file (atomically) instead of stdout",
    }
)
@guarded
def history(c, device=None, flavour=None, release=None, store=None, format="terminal", output=None):
    """One device's builds over time and releases: image, headroom, TLS (xz), free memory."""
    store, output = path(store, "--store"), path(output, "--output")
    from openwrt_wolf.report import cli as report_cli

    report_cli.history_main(
        store=store, device=device, flavour=flavour, release=release, fmt=format, output=output
    )


@task(
    help={
        "size_mb": "minimum squashfs size in MiB (default 4.5, at most 1024)",
        "repeat": "runs, best of (at most 100)",
    }
)
@guarded
def bench_size(c, size_mb=None, repeat=None):
    """Benchmark: our size analysis vs unsquashfs + xz -9e, and a repeated (cached) report."""
    os.execv(
        sys.executable,
        [
            sys.executable,
            "bench/size_report.py",
            "--size-mb",
            # bounded: 64 GiB of squashfs or 65,536 runs were accepted, and ran for hours
            str(number(size_mb, "--size-mb", default=4.5, maximum=1024.0)),
            "--repeat",
            str(integer(repeat, "--repeat", default=1, minimum=1, maximum=100)),
        ],
    )


@task(
    help={
        "device": "device profile or alias, e.g. tl-wr902ac",
        "image": "a sysupgrade image to split and check",
        "kernel": "the kernel OpenWrt appended (with --rootfs; works for deleted images)",
        "rootfs": "the squashfs root filesystem (with --kernel)",
        "release": "OpenWrt release (default: the stable one)",
        "check": "exit 1 when the image is too big",
        "json": "print the fit report as JSON instead of a table",
    }
)
@guarded
def fit(
    c, device=None, image=None, kernel=None, rootfs=None, release=None, check=False, json=False
):
    """Does an image (or its kernel + rootfs) fit the device's flash? Exact bytes."""
    image, kernel = path(image, "--image"), path(kernel, "--kernel")
    rootfs = path(rootfs, "--rootfs")
    from openwrt_wolf.firmware import cli as firmware_cli

    firmware_cli.main(
        device=required(device, "--device", hint="e.g. --device tl-wr902ac (see ./wolf devices)"),
        image=image,
        kernel=kernel,
        rootfs=rootfs,
        release=release,
        check=check,
        as_json=json,
    )


@task(
    name="what-if",
    help={
        "from": "an output directory (bin/targets/<t>/<s>/) with the image of one flavour",
        "image": "a sysupgrade image of one flavour (instead of --from)",
        "flavour": "the flavour to predict: mbedtls, wolfssl or openssl",
        "device": "device profile or alias (when the name or directory does not say)",
        "packages": "the packages directories the flavours come from, comma-separated (the "
        "ImageBuilder's packages/, then a mirror's feeds)",
        "release": "OpenWrt release (default: from profiles.json or the image's openwrt_release)",
        "store": "results store directory (default ./results or $OPENWRT_WOLF_STORE)",
        "output": "keep the predicted root.squashfs in this file",
        "check": "exit 1 when the predicted sysupgrade image is too big",
        "json": "print the prediction as JSON instead of a table",
    },
)
@guarded
def what_if(
    c, from_=None, image=None, flavour=None, device=None, packages=None, release=None,
    store=None, output=None, check=False, json=False,
):  # fmt: skip
    """Would flavour F fit? Swap the TLS stack in a built image and repack it, no rebuild."""
    from_, image = path(from_, "--from"), path(image, "--image")
    packages, store = path_list(packages, "--packages"), path(store, "--store")
    output = path(output, "--output")
    check_store(store)
    from openwrt_wolf.whatif import cli as whatif_cli

    whatif_cli.main(
        flavour=required(flavour, "--flavour", hint="e.g. --flavour openssl"),
        image=image,
        from_dir=from_,
        device=device,
        packages=packages,
        release=release,
        store_dir=store,
        output=output,
        as_json=json,
        check=check,
    )


# --- build (issue 3) -------------------------------------------------------------------


@task(
    help={
        "flavour": "mbedtls, wolfssl, openssl or all (comma-separated list allowed)",
        "device": "device name(s), comma-separated, or all",
        "release": "OpenWrt release: 25.12.5 (default), 24.10.8, snapshot",
        "backend": "imagebuilder (default), sdk (default when the flavour needs our feed), "
        "buildroot (default with --tree)",
        "mirror": "URL or directory laid out like downloads.openwrt.org",
        "imagebuilder": "an unpacked ImageBuilder to use instead of downloading one",
        "j": "profiles built in parallel (working copies of the ImageBuilder)",
        "force": "rebuild even when the store has this request",
        "store": "results store directory",
        "luci_https": "add the flavour's LuCI HTTPS collection",
        "packages": "extra packages, comma-separated (-name removes)",
        "files": "FILES= directory copied over the root filesystem",
        "sdk": "an unpacked SDK (selects the sdk backend)",
        "feed": "local feed the sdk backend builds from (default: feeds/wolf)",
        "tree": "an OpenWrt source tree (selects the buildroot backend); with --backend sdk the "
        "SDK's base feed: the patch set is applied there and the SDK compiles its packages",
        "patches": "patch set the buildroot and sdk (--tree) backends apply (default: this "
        "project's patches/)",
        "report": "print the size report of the devices built (default on; --no-report)",
        "queue": "build on workers (docs/build-farm.md): redis://[:PASS@]HOST:PORT/DB, or env "
        "($OPENWRT_WOLF_QUEUE); one job per device and flavour",
        "retries": "with --queue: times a failed or abandoned job is tried again (default 2)",
        "worker_timeout": "with --queue: seconds one build may take on a worker (default 14400)",
        "sdk_ib": "buildroot: also make OpenWrt's SDK and ImageBuilder (CONFIG_SDK, CONFIG_IB)",
        "stock": "wolfSSL from OpenWrt's own packages (the full library, apk-mbedtls kept) "
        "instead of the patch set's, labelled stock wherever it is shown",
        "sources": "sdk backend: directories of source files and git repositories that fill "
        "the base feed's dl/ where OpenWrt's mirrors are out of reach (as `sources --tree`)",
        "sources_url": "sdk backend: mirrors holding source files by name (as `sources`)",
        "allow": "with --sources: classes other than exact the base feed may take "
        "(same-version, substitute; the record lists each)",
    }
)
@guarded
def build(
    c, flavour=None, device=None, release=None, backend=None, mirror=None, imagebuilder=None,
    sdk=None, tree=None, j=None, force=False, store=None, luci_https=False, packages=None,
    files=None, feed=None, patches=None, report=True, queue=None, retries=None,
    worker_timeout=None, sdk_ib=False, stock=False, sources=None, sources_url=None, allow=None,
):  # fmt: skip
    """Build firmware in TLS flavours (ImageBuilder, SDK or buildroot); records in the store."""
    mirror, imagebuilder = path(mirror, "--mirror"), path(imagebuilder, "--imagebuilder")
    sdk, tree, store = path(sdk, "--sdk"), path(tree, "--tree"), path(store, "--store")
    files, feed = path(files, "--files"), path(feed, "--feed")
    patches = path(patches, "--patches")
    sources = path_list(sources, "--sources")
    check_store(store)
    from openwrt_wolf.build import cli as build_cli
    from openwrt_wolf.report import cli as report_cli

    flavour = required(flavour, "--flavour", hint="mbedtls, wolfssl, openssl or all")
    device = required(device, "--device", hint="e.g. --device tl-wr902ac (see ./wolf devices)")
    opts = build_cli.options(
        flavour=flavour, device=device, release=release, backend=backend, mirror=mirror,
        imagebuilder=imagebuilder, sdk=sdk, tree=tree,
        jobs=integer(j, "-j", default=1, minimum=1), force=force, store=store,
        luci_https=luci_https, packages=packages, files=files, feed=feed, patches=patches,
        sdk_ib=sdk_ib, stock=stock, sources=sources, sources_url=sources_url, allow=allow,
    )  # fmt: skip
    if queue:  # built by the queue's workers, records into the local store
        from openwrt_wolf.queue import cli as queue_cli

        queue_cli.build(opts, queue, retries=retries, worker_timeout=worker_timeout)
    else:
        build_cli.main(opts, retries=retries, worker_timeout=worker_timeout)
    if report:
        report_cli.main(
            store=store, from_dirs=[], device=device, flavour=flavour, release=release,
            fmt="terminal", output=None,
        )  # fmt: skip


@task(
    help={
        "flavour": "mbedtls, wolfssl or openssl",
        "device": "device name",
        "release": "OpenWrt release (default 25.12.5)",
        "what": "packages (PACKAGES= value), diffconfig (.config fragment), buildroot (the "
        "buildroot backend's .config seed) or feeds (feeds.conf)",
        "luci_https": "add the flavour's LuCI HTTPS collection",
        "packages": "extra packages, comma-separated (-name removes)",
        "feed": "a local feed directory to add to feeds.conf as src-link",
        "imagebuilder": "read the profile's default packages from this ImageBuilder",
    }
)
@guarded
def build_config(
    c, flavour=None, device=None, release=None, what="packages", luci_https=False, packages=None,
    feed=None, imagebuilder=None,
):  # fmt: skip
    """Print a flavour's package changes for a device: PACKAGES=, .config fragment, feeds.conf."""
    feed, imagebuilder = path(feed, "--feed"), path(imagebuilder, "--imagebuilder")
    from openwrt_wolf.build import cli as build_cli

    text = build_cli.render(
        flavour=required(flavour, "--flavour", hint="mbedtls, wolfssl or openssl"),
        device=required(device, "--device", hint="e.g. --device tl-wr902ac"),
        release=release, what=what, luci_https=luci_https, packages=packages, feed=feed,
        imagebuilder=imagebuilder,
    )  # fmt: skip
    print(text, end="")


# --- patch set (issue 4) ---------------------------------------------------------------


@task(
    help={
        "tree": "OpenWrt tree (git checkout or plain directory)",
        "check": "only check that every series applies; change nothing",
        "revert": "revert the applied series",
        "status": "list applied/unapplied patches per series",
        "patches": "patches directory (default: the series data/releases.toml names)",
        "release": "the release whose series to use: 25.12.5 (default), snapshot",
        "refresh": "re-generate the series against --tree with quilt; report offsets/fuzz",
        "into": "with --refresh: write the refreshed series here (default: in place)",
    }
)
@guarded
def patch(
    c,
    tree=None,
    check=False,
    revert=False,
    status=False,
    patches=None,
    release=None,
    refresh=False,
    into=None,
):
    """Apply the USE_WOLFSSL patch set (patches/series and per-feed series) to an OpenWrt tree."""
    tree, patches = path(tree, "--tree"), path(patches, "--patches")
    into = path(into, "--into")
    from openwrt_wolf.patchset import cli as patchset_cli

    patchset_cli.main(
        tree,
        check=check,
        revert=revert,
        status=status,
        patches=patches,
        release=release,
        refresh=refresh,
        into=into,
    )


@task(
    help={
        "tree": "pristine OpenWrt v25.12.5 tree (read only; a patched copy is made)",
        "targets": "comma-separated targets, or all (default ath79/generic,ramips/mt76x8,malta/be)",
        "store": "results store directory",
    }
)
@guarded
def patch_defaults(c, tree=None, targets=None, store=None):
    """Compare each profile's default packages: pristine vs. patched, USE_WOLFSSL off and on."""
    tree, store = path(tree, "--tree"), path(store, "--store")
    check_store(store)
    from openwrt_wolf.patchset import cli as patchset_cli

    if patchset_cli.defaults_main(tree, targets, store):
        raise SystemExit(1)


@task(
    help={
        "lib": "a built libwolfssl.so (e.g. the footprint lab's minimal build)",
        "store": "results store directory",
    }
)
@guarded
def wolfssl_symbols(c, lib=None, store=None):
    """Does libwolfssl.so export every wolfSSL symbol the USE_WOLFSSL packages import?"""
    lib, store = path(lib, "--lib"), path(store, "--store")
    check_store(store)
    from openwrt_wolf.patchset import cli as patchset_cli

    if patchset_cli.symbols_main(lib, store):
        raise SystemExit(1)


@task(
    help={
        "wolfssl": "a configured wolfSSL source tree (wolfssl/options.h of the minimal config)",
        "ustream": "openwrt/ustream-ssl sources",
        "hostap": "hostap sources (the commit OpenWrt builds)",
        "openwrt": "an OpenWrt tree (px5g-wolfssl, uencrypt)",
        "libubox": "a directory holding libubox/*.h",
        "write": "replace the symbol lists in data/wolfssl_consumers.toml",
    }
)
@guarded
def wolfssl_consumers(
    c, wolfssl=None, ustream=None, hostap=None, openwrt=None, libubox=None, write=False
):
    """Re-derive the wolfSSL symbols each USE_WOLFSSL package imports, from its sources."""
    wolfssl, ustream = path(wolfssl, "--wolfssl"), path(ustream, "--ustream")
    hostap, openwrt = path(hostap, "--hostap"), path(openwrt, "--openwrt")
    libubox = path(libubox, "--libubox")
    from openwrt_wolf.patchset import cli as patchset_cli

    patchset_cli.consumers_main(
        wolfssl, ustream=ustream, hostap=hostap, openwrt=openwrt, libubox=libubox, write=write
    )


# --- VM and memory (issue 5) -----------------------------------------------------------


@task(
    help={
        "image": "malta kernel ELF, e.g. openwrt-malta-be-vmlinux-initramfs.elf",
        "ssh": "boot to the ssh state and print the ssh line (image needs dropbear)",
        "rootfs": "a rootfs image (.img or .img.gz) attached as /dev/sda",
        "initrd": "an initramfs for a kernel without a built-in one",
        "append": "kernel command line (OpenWrt's kernels need none)",
        "memory": "guest RAM in MB (default 128)",
    }
)
@guarded
def vm(c, image=None, ssh=False, rootfs=None, initrd=None, append=None, memory=None):
    """Boot a malta image in QEMU with its serial console on this terminal (Ctrl-] quits)."""
    image, rootfs = path(image, "--image"), path(rootfs, "--rootfs")
    initrd = path(initrd, "--initrd")
    from openwrt_wolf.targets import cli as targets_cli

    image = required(image, "--image", hint="a malta kernel ELF, e.g. --image "
                     "openwrt-malta-be-vmlinux-initramfs.elf")  # fmt: skip
    memory = integer(memory, "--memory", default=0, minimum=0)
    targets_cli.vm(image, ssh=ssh, rootfs=rootfs, initrd=initrd, append=append, memory=memory)


@task(
    help={
        "device": "malta-be, malta-le or armsr-armv8 (image from the newest build record); with "
        "--host the router's device (checked against its board_name)",
        "flavour": "TLS flavour: of that build; with --host checked against the router's packages",
        "image": "a kernel to measure instead of a build: a malta ELF, or an arm64 Image (armsr, "
        "on QEMU's virt machine)",
        "release": "OpenWrt release of the build record / device entry",
        "boots": "number of boots (default 3); with --host: reboots, one reading after each",
        "idle": "seconds idle after boot before reading memory (default 10)",
        "memory": "guest RAM in MB (default 128)",
        "rootfs": "a rootfs image (raw, .gz) attached as /dev/sda; the task boots a copy of "
        "its own, one boot first (the first after flashing), then --boots measured",
        "root": "initramfs (default: the rootfs in RAM) or disk: the build's vmlinux.elf and "
        "rootfs-squashfs.img.gz, the overlay on that disk, as a router boots from flash",
        "initrd": "an initramfs for a kernel without a built-in one",
        "append": "kernel command line",
        "store": "results store directory",
        "host": "measure a router over SSH at this address instead of the VM",
        "port": "router: SSH port (default 22)",
        "user": "router: SSH user (default root)",
        "key": "router: private key file to log in with",
        "password": "router: ask for a password (or read $OPENWRT_WOLF_ROUTER_PASSWORD)",
        "accept_new": "router: accept and remember its host key on first contact",
        "known_hosts": "router: known_hosts file (default ~/.ssh/known_hosts)",
        "wait_up": "router: seconds to wait for it to come back after each reboot (default 180)",
        "queue": "router: measure through its worker, redis://[:PASS@]HOST:PORT/DB#NAME",
    }
)
@guarded
def measure_memory(
    c, device=None, flavour=None, image=None, release=None, boots=None, idle=None, memory=None,
    rootfs=None, initrd=None, append=None, store=None, host=None, port=None, user=None,
    key=None, password=False, accept_new=False, known_hosts=None, wait_up=None, queue=None,
    root=None,
):  # fmt: skip
    """Boot a malta or armsr image (or reboot a router, --host) N times; record free memory at
    idle."""
    image, rootfs = path(image, "--image"), path(rootfs, "--rootfs")
    initrd, store, key = path(initrd, "--initrd"), path(store, "--store"), path(key, "--key")
    known_hosts = path(known_hosts, "--known-hosts")
    check_store(store)
    if queue:
        from openwrt_wolf.queue import cli as queue_cli

        queue_cli.measure_memory(
            queue=queue, host=host, device=device, flavour=flavour, release=release,
            boots=integer(boots, "--boots", default=3), idle=number(idle, "--idle", default=10.0),
            wait_up=number(wait_up, "--wait-up", default=180.0),
            port=tcp_port(port, 0) or None, user=user,
            accept_new=accept_new,
            local={"image": image, "memory": integer(memory, "--memory", default=0, minimum=0),
                   "rootfs": rootfs, "initrd": initrd,
                   "append": append, "key": key, "known_hosts": known_hosts,
                   "password": password, "root": root},
            store_dir=store,
        )  # fmt: skip
        return
    from openwrt_wolf.measure import cli as measure_cli

    ssh = dict(port=tcp_port(port, 0) or None, user=user, key=key,
               password=password, accept_new=accept_new, known_hosts=known_hosts)  # fmt: skip
    measure_cli.main(
        device=device, flavour=flavour, image=image, release=release,
        boots=integer(boots, "--boots", default=3),  # measure says "need at least one boot"
        idle=number(idle, "--idle", default=10.0), memory=integer(memory, "--memory", default=0,
        minimum=0), rootfs=rootfs, initrd=initrd, append=append, store=store, host=host,
        ssh=ssh, wait_up=number(wait_up, "--wait-up", default=180.0), root=root,
    )  # fmt: skip


# --- queue (issue 16) -----------------------------------------------------------------


@task(
    help={
        "queue": "redis://[:PASS@]HOST:PORT/DB[#NAME]: NAME is builds (default) or a router's or "
        "VM host's queue; env (the default) reads $OPENWRT_WOLF_QUEUE",
        "mirror": "where this worker downloads ImageBuilders (URL or directory)",
        "artifacts": "shared DIR or http(s) URL taking PUT to copy images to (default: they "
        "stay on this worker)",
        "store": "this worker's own results store (its cached builds)",
        "name": "worker name (default HOST-PID)",
        "burst": "stop when the queue is empty",
        "heartbeat": "seconds between heartbeats; a dead worker's job is retried after 3 missed "
        "(default 20)",
        "key": "SSH key for the routers of a measurement queue",
        "known_hosts": "known_hosts file for those routers",
    }
)
@guarded
def worker(
    c, queue=None, mirror=None, artifacts=None, store=None, name=None, burst=False,
    heartbeat=None, key=None, known_hosts=None,
):  # fmt: skip
    """Run queued builds and measurements on this machine (`build --queue` sends them)."""
    mirror, artifacts = path(mirror, "--mirror"), path(artifacts, "--artifacts")
    store, key = path(store, "--store"), path(key, "--key")
    known_hosts = path(known_hosts, "--known-hosts")
    check_store(store)
    from openwrt_wolf.queue import cli as queue_cli

    queue_cli.worker(
        queue=queue, artifacts_to=artifacts, mirror=mirror, store_dir=store, name=name,
        burst=burst, heartbeat=integer(heartbeat, "--heartbeat", default=20, minimum=1), key=key,
        known_hosts=known_hosts,
    )  # fmt: skip


# --- router (issue 6) ------------------------------------------------------------------


@task(
    help={
        "device": "device profile or alias, e.g. tl-wr902ac (see ./wolf devices)",
        "host": "the router's address (LAN side, e.g. 192.168.1.1)",
        "port": "SSH port (default 22)",
        "user": "SSH user (default root)",
        "key": "private key file to log in with",
        "password": "ask for a password (or read $OPENWRT_WOLF_ROUTER_PASSWORD)",
        "image": "sysupgrade image to flash",
        "flavour": "TLS flavour: without --image, flash the newest build of it; always verified",
        "keep_settings": "keep the router's configuration (sysupgrade without -n)",
        "accept_new": "accept and remember the router's host key on first contact",
        "release": "OpenWrt release of the device entry (default: the stable release)",
        "known_hosts": "known_hosts file (default ~/.ssh/known_hosts)",
        "wait_up": "seconds to wait for the router to come back after flashing (default 300)",
        "store": "results store directory",
        "trust_new_key_after_wipe": "after sysupgrade -n: accept the router's new host key and, "
        "if the key login is refused, a fresh install's blank root password (off: stop and "
        "print the new fingerprint)",
        "queue": "flash through the router's worker, redis://[:PASS@]HOST:PORT/DB#NAME (the "
        "image on its --artifacts storage)",
        "stock": "a wolfSSL image of OpenWrt's own packages (build --stock), checked as such; "
        "default: the patch set's (apk-wolfssl, the build's minimal libwolfssl, no Mbed TLS)",
    }
)
@guarded
def flash(
    c,
    device=None,
    host=None,
    port=None,
    user="root",
    key=None,
    password=False,
    image=None,
    flavour=None,
    keep_settings=False,
    accept_new=False,
    release=None,
    known_hosts=None,
    wait_up=None,
    store=None,
    trust_new_key_after_wipe=False,
    queue=None,
    stock=False,
):
    """Flash a router over SSH with sysupgrade and check it runs the image and its TLS flavour."""
    key, image = path(key, "--key"), path(image, "--image")
    known_hosts, store = path(known_hosts, "--known-hosts"), path(store, "--store")
    check_store(store)
    if queue:
        from openwrt_wolf.queue import cli as queue_cli

        queue_cli.flash(
            queue=queue,
            device=required(device, "--device", hint="e.g. --device tl-wr902ac"),
            host=required(host, "--host", hint="the router's address, e.g. --host 192.168.1.1"),
            port=tcp_port(port, 22), user=user, image=image,
            flavour=flavour, keep_settings=keep_settings, accept_new=accept_new,
            release=release, wait_up=number(wait_up, "--wait-up", default=300.0),
            trust_new_key_after_wipe=trust_new_key_after_wipe,
            local={"key": key, "password": password, "known_hosts": known_hosts},
            store_dir=store, stock=stock,
        )  # fmt: skip
        return
    from openwrt_wolf.targets import cli as targets_cli

    targets_cli.flash(
        device=required(device, "--device", hint="e.g. --device tl-wr902ac (see ./wolf devices)"),
        host=required(host, "--host", hint="the router's address, e.g. --host 192.168.1.1"),
        port=tcp_port(port, 22),
        user=user,
        key=key,
        password=password,
        image=image,
        flavour=flavour,
        keep_settings=keep_settings,
        accept_new=accept_new,
        release=release,
        known_hosts=known_hosts,
        wait_up=number(wait_up, "--wait-up", default=300.0),
        store=store,
        trust_new_key_after_wipe=trust_new_key_after_wipe,
        stock=stock,
    )


# --- footprint lab (issue 7) -----------------------------------------------------------


@task(
    help={
        "arch": "OpenWrt package architecture (data/footprint/arch.toml), default mips_24kc",
        "release": "OpenWrt release whose versions and options to build: 25.12.5 or snapshot",
        "library": "mbedtls,wolfssl,openssl or all (default all)",
        "config": "openwrt (package defaults), minimal (USE_WOLFSSL wolfSSL), small (OpenSSL), all",
        "ecc": "wolfSSL minimal ECC code: sp-p256 (default), generic, or all",
        "toolchain": "an OpenWrt SDK/toolchain directory or a *-gcc (default: Debian's cross gcc)",
        "smoke": "run a smoke program per library under qemu-user",
        "sources": "directories holding source tarballs (comma-separated)",
        "mirror": "base URLs of OpenWrt source mirrors to try (comma-separated)",
        "rebuild": "ignore cached builds",
        "markdown": "print the table as Markdown",
        "store": "results store directory",
        "version": "override a release's library version, e.g. wolfssl=5.9.2 (25.12.5's 5.9.1 "
        "is not in Debian)",
        "stack": "the whole TLS stack per flavour (library + libustream-ssl + px5g + uencrypt)",
        "component": "packages built against each library and added to its row: apk, or all",
    }
)
@guarded
def footprint(c, arch="mips_24kc", release=None, library=None, config=None, ecc=None,
              toolchain=None, smoke=False, sources=None, mirror=None, rebuild=False,
              markdown=False, store=None, version=None, stack=False,
              component=None):  # fmt: skip
    """Cross-build the TLS libraries at OpenWrt's settings and compare their flash cost."""
    toolchain, sources = path(toolchain, "--toolchain"), path_list(sources, "--sources")
    store = path(store, "--store")
    check_store(store)
    from openwrt_wolf.footprint import cli

    cli.main(arch=arch, release=release, library=library, config=config, ecc=ecc,
             toolchain=toolchain, smoke=smoke, sources=sources, mirror=mirror, rebuild=rebuild,
             markdown=markdown, store=store, version=version, stack=stack,
             component=component)  # fmt: skip


@task(
    help={
        "flavour": "whose uclient-fetch to test: mbedtls,wolfssl,openssl or all (default all)",
        "case": "only these cases (comma-separated names of data/perf/conformance.toml)",
        "jobs": "cases run at once (default 8)",
        "markdown": "print the case x backend table as Markdown",
        "write_docs": "replace the generated table in this file (docs/security.md)",
        "work": "directory for the run's certificates and logs (default: a temporary one)",
    }
)
@guarded
def tls_conformance(c, flavour=None, case=None, jobs=None, markdown=False, write_docs=None,
                    work=None):  # fmt: skip
    """Certificate verification suite: every case x ustream-ssl backend, host builds."""
    write_docs, work = path(write_docs, "--write-docs"), path(work, "--work")
    from openwrt_wolf.perf import cli

    n = integer(jobs, "--jobs", default=8, minimum=1)
    ok = cli.conformance_main(flavour=flavour, case=case, jobs=n, markdown=markdown,
                              write_docs=write_docs, work=work)  # fmt: skip
    if not ok:
        sys.exit(1)


# --- OpenWrt host image tools, what-if (issue 14) --------------------------------------


# --- performance lab (issue 13) --------------------------------------------------------


@task(
    help={
        "flavour": "mbedtls,wolfssl,openssl or all (default all)",
        "target": "where to measure: qemu (MIPS user-mode emulation here), router (--host, over "
        "SSH) or vm (the malta VM with --image; with --rootfs a real image; the Wi-Fi guest "
        "for --test wifi); required",
        "test": "crypto,handshake,memory,soak,wifi (comma-separated); default all the target "
        "runs (wifi: --target vm); instructions (qemu only, when named): guest instructions "
        "per handshake and per MiB, counted by a QEMU plugin",
        "quick": "shorter runs of each tool, fewer handshakes/requests (CI)",
        "release": "OpenWrt release whose library settings to build (default 25.12.5)",
        "wolfssl_config": "minimal (the USE_WOLFSSL minimal mode, default) or openwrt",
        "ecc": "the minimal mode's ECC code: sp-p256 (default) or generic",
        "toolchain": "an OpenWrt SDK/toolchain directory or a *-gcc (default: Debian's cross gcc)",
        "clock": "cpu (default: the tools count process CPU time) or wall",
        "store": "results store directory",
        "report_only": "only print the tables from the store",
        "host": "router: its address (SSH)",
        "port": "router: SSH port (default 22)",
        "user": "router: SSH user (default root)",
        "key": "router: private key file to log in with",
        "password": "router: ask for a password (or read $OPENWRT_WOLF_ROUTER_PASSWORD)",
        "accept_new": "router: accept and remember its host key on first contact",
        "known_hosts": "router: known_hosts file (default ~/.ssh/known_hosts)",
        "image": "vm: the malta initramfs kernel to boot (with --rootfs: a malta kernel without "
        "initramfs; for wifi one with mac80211_hwsim, docs/perf.md)",
        "initrd": "vm: an initramfs to boot the image with",
        "append": "vm: the kernel command line",
        "rootfs": "vm: a real image's rootfs (…-rootfs-squashfs.img.gz) of the one --flavour, "
        "booted on a disk of its own: --test handshake, memory (its own uhttpd, uclient-fetch) "
        "and wifi (its own wpad-basic)",
        "packages": "with --rootfs: the build's bin/packages/<arch> (wpad-basic-<flavour>)",
        "wpad_build": "with --rootfs: the tree's hostapd build directory of that wpad "
        "(hostapd_cli, wpa_cli), unless --packages has hostapd-utils and wpa-cli",
        "arch": "qemu: the package architecture qemu-user emulates: mips_24kc (default, the "
        "reference's routers) or aarch64_cortex-a76 (the Raspberry Pi 5; -cpu cortex-a76)",
        "cpu_crypto": "AArch64: on or off, every library with or without the ARMv8 crypto "
        "extensions (default: as OpenWrt builds each; data/perf/perf.toml [cpu_crypto])",
    }
)
@guarded
def perf(c, flavour=None, target=None, test=None, quick=False, release=None,
         wolfssl_config="minimal", ecc="sp-p256", toolchain=None, clock="cpu", store=None,
         report_only=False, host=None, port=None, user=None, key=None, password=False,
         accept_new=False, known_hosts=None, image=None, initrd=None, append=None,
         rootfs=None, packages=None, wpad_build=None, arch=None, cpu_crypto=None):  # fmt: skip
    """Run-time cost per flavour: crypto speed, TLS 1.3 handshakes, heap, soak, Wi-Fi (SAE, OWE)."""
    toolchain, store = path(toolchain, "--toolchain"), path(store, "--store")
    key, known_hosts = path(key, "--key"), path(known_hosts, "--known-hosts")
    image, initrd = path(image, "--image"), path(initrd, "--initrd")
    rootfs, packages = path(rootfs, "--rootfs"), path(packages, "--packages")
    wpad_build = path(wpad_build, "--wpad-build")
    if not report_only:
        check_store(store)
    from openwrt_wolf.perf import cli

    ssh = dict(port=tcp_port(port, 0) or None, user=user, key=key,
               password=password, accept_new=accept_new, known_hosts=known_hosts)  # fmt: skip
    cli.main(flavour=flavour, target=target, test=test, quick=quick, release=release,
             wolfssl_config=wolfssl_config, ecc=ecc, toolchain=toolchain, clock=clock,
             store_dir=store, report_only=report_only, host=host, ssh=ssh,
             image=image, initrd=initrd, append=append, rootfs=rootfs, packages=packages,
             wpad_build=wpad_build, arch=arch, cpu_crypto=cpu_crypto)  # fmt: skip


# --- reports: history (issue 15) -------------------------------------------------------


# --- work queue (issue 16) -------------------------------------------------------------


# --- development -----------------------------------------------------------------------


@task(help={"k": "only tests matching this expression", "serial": "no pytest-xdist"})
@guarded
def test(c, k=None, serial=False):
    """Run the test suite (installs the host tools it needs on first use)."""
    from openwrt_wolf.host import hosttools as ht

    ht.ensure("test")
    os.chdir(os.path.dirname(os.path.abspath(__file__)))  # the suite runs from the project root
    args = [sys.executable, "-m", "pytest", "-q"]
    if not serial:
        args += ["-n", "auto"]
    if k:
        args += ["-k", k]
    os.execv(sys.executable, args)


@task
def lint(c):
    """ruff (lint + format check), mypy over openwrt_wolf, and the package's layout: the stage
    folders as layers, one writer, the architecture page (tests/test_layers.py,
    tests/test_layout.py)."""
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    paths = " ".join(p for p in ("openwrt_wolf", "tests", "tasks.py", "bench") if os.path.exists(p))
    c.run(f"{sys.executable} -m ruff check {paths}")
    c.run(f"{sys.executable} -m ruff format --check {paths}")
    c.run(f"{sys.executable} -m mypy openwrt_wolf")
    layout = "tests/test_layers.py tests/test_layout.py"
    c.run(f"{sys.executable} -m pytest -q -p no:cacheprovider -n 0 {layout}")
