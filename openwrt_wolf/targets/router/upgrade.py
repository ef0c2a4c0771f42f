"""One sysupgrade as the flash task asks for it: the image (a file checked against its build
record, or the newest build of a flavour), the router's login, the Flasher's run, its record."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ...catalogue import devices, flavours
from ...errors import WolfError
from ...paths import store_dir
from ...results.flash import FlashResult
from ...results.store import FileStore
from . import login as router_login
from . import sysupgrade
from .flash import Flasher, FlashRequest, State, Timeouts, store_result


def flash(
    *,
    device: str,
    host: str,
    port: int = 22,
    user: str = "root",
    key: str | None = None,
    password: bool = False,
    image: str | None = None,
    flavour: str | None = None,
    keep_settings: bool = False,
    accept_new: bool = False,
    release: str | None = None,
    known_hosts: str | None = None,
    wait_up: float = 300.0,
    trust_new_key_after_wipe: bool = False,
    store: str | None = None,
    stock: bool = False,
) -> FlashResult:
    """Flash one image (the `invoke flash` task, and a router queue's flash job)."""
    dev = devices.resolve(device, release)
    if dev.has_flash is False and not dev.supported_devices:
        raise WolfError(f"{dev.profile} has no flash to write (a QEMU machine)")
    login = router_login.login_from_cli(
        host, port=port, user=user, key=key, password=password,
        accept_new=accept_new, known_hosts=known_hosts,
    )  # fmt: skip
    root = store_dir(store)
    fstore = FileStore(root)
    if flavour:
        flavour = flavours.get(flavour).name
    # the patch set's image of a flavour it makes (wolfSSL), unless --stock
    want = None if not flavour else "stock" if stock or not flavours.get(flavour).patched \
        else "patch-set"  # fmt: skip
    if image:
        img = sysupgrade.from_build(fstore, sysupgrade.inspect(Path(image), dev, flavour=flavour))
        flavour = img.flavour
        if want and img.variant and img.variant != want:
            raise WolfError(
                f"{Path(image).name} is the {img.variant} {flavour} image (its build record), "
                f"the flash was asked for the {want} one",
                hint="pass --stock for a stock image" if img.variant == "stock" else
                "drop --stock: the build record says it is the patch set's image",
            )  # fmt: skip
    elif flavour:
        img = sysupgrade.from_store(fstore, root, dev, flavour, want)
    else:
        raise WolfError("nothing to flash", hint="give --image PATH or --flavour NAME")
    if img.variant is None and flavour and want:
        img = dataclasses.replace(img, variant=want)  # no record: what was asked is checked
    req = FlashRequest(login, dev, img, flavour, keep_settings, Timeouts(wait_up=float(wait_up)),
                       trust_new_key_after_wipe=trust_new_key_after_wipe)  # fmt: skip
    flasher = Flasher(req)
    try:
        result = flasher.run()
    finally:
        if any(s.state == State.UPGRADE for s in flasher.result.states):
            path = store_result(fstore, dev, flasher.result)
            flasher.out.print(f"record: {path}", markup=False)
    return result
