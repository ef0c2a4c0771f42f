"""`invoke measure-memory --host` against the fake router (tests/sshd_router.py): a real
OpenSSH sshd on 127.0.0.1 whose `reboot` stand-in drops every connection for a while. The
"router" is this machine, so its memory is the host's: /proc/meminfo read here is the oracle."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from openwrt_wolf.report import sizereport
from openwrt_wolf.results.memory import MemoryResult
from tests import sshd_router
from tests.sshd_router import BASE_STATE, FakeRouter

router_sftp = sshd_router.router_sftp
router = sshd_router.router

PROJECT = Path(__file__).resolve().parents[2]


def _meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, rest = line.partition(":")
        out[name] = int(rest.split()[0])
    return out


def _invoke(*args: str, store: Path, timeout: float = 50) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", "measure-memory", *args, "--store", str(store)],
        cwd=PROJECT, capture_output=True, text=True, timeout=timeout,
        env=os.environ | {"OPENWRT_WOLF_STORE": str(store)},
    )  # fmt: skip


def _one_error(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and p.stderr.splitlines()[-1] == errors[0], p.stderr
    return errors[0]


def test_measure_memory_host_reboots_and_records(router: FakeRouter, tmp_path: Path) -> None:
    router.set_state(downtime=2.0)
    store = tmp_path / "results"
    before = _meminfo()
    p = _invoke(
        "--host", router.host, "--port", str(router.port), "--user", router.user,
        "--key", str(router.userkey), "--known-hosts", str(router.known_hosts),
        "--boots", "2", "--idle", "0.5", "--wait-up", "30", store=store,
    )  # fmt: skip
    after = _meminfo()
    assert p.returncode == 0, p.stdout + p.stderr

    # two reboots, as the fake router saw them: each dropped sshd and brought it back
    assert [e for e in router.events if e.startswith("request")] == [
        "request {'downtime': 2.0, 'regen_hostkey': False, 'come_back': True}"
    ] * 2
    assert router.events.count("back") == 2

    records = list((store / "memory").glob("*.json"))
    assert len(records) == 1, records
    rec = json.loads(records[0].read_text())
    assert rec["kind"] == "memory"
    # identified from the stand-ins: ubus board_name, the fake firmware's release, its packages
    assert rec["device"] == "tplink_tl-wr902ac-v1"
    assert rec["flavour"] == "mbedtls"
    assert rec["release"] == "24.10.8"
    d = MemoryResult.from_dict(rec["data"])
    assert d.target == "router" and d.host == f"[{router.host}]:{router.port}"
    assert d.board_name == BASE_STATE["board_name"] and d.model == BASE_STATE["model"]
    assert d.boots == 2 and len(d.per_boot) == 2
    assert d.image is None and d.qemu is None and d.qemu_memory_mb is None
    assert d.kernel_release == os.uname().release

    # the host's own memory, read here
    assert d.memtotal_kb == before["MemTotal"] == after["MemTotal"]
    slack = before["MemTotal"] // 20  # other jobs on this machine move MemFree meanwhile
    low = min(before["MemFree"], after["MemFree"]) - slack
    high = max(before["MemFree"], after["MemFree"]) + slack
    for b in d.per_boot:
        assert b.meminfo_kb["MemTotal"] == before["MemTotal"]
        assert low <= b.meminfo_kb["MemFree"] <= high, (b.meminfo_kb["MemFree"], before, after)
        assert b.free_kb["total"] == before["MemTotal"]  # procps `free` here, busybox on OpenWrt
        assert b.settled_state == "ssh"
        up = {t["state"]: t["at"] for t in b.transitions}["ssh"]
        # down for 2 s, then back: the reading came after the reboot and the idle time
        assert 2.0 <= up <= b.seconds_to_measurement
    assert sorted(b.meminfo_kb["MemFree"] for b in d.per_boot)[0] == d.summary["MemFree"].min

    # size-report's memory rows show it beside the device's flash rows
    rep = sizereport.build(store=store)
    cells = {r.profile: r.cells for r in rep.devices}
    assert (
        cells["tplink_tl-wr902ac-v1"]["mbedtls"].memory["boot"].kb["MemTotal"] == before["MemTotal"]
    )


def test_host_and_image_together(tmp_path: Path) -> None:
    line = _one_error(_invoke("--host", "127.0.0.1", "--image", "k.elf", store=tmp_path))
    assert line.startswith("error: measure-memory: --host measures a router, --image the QEMU VM")


def test_host_and_malta_device_together(tmp_path: Path) -> None:
    """Refused before any connection is tried."""
    p = _invoke("--host", "127.0.0.1", "--device", "malta-be", store=tmp_path)
    line = _one_error(p)
    assert line.startswith("error: measure-memory: --host measures a router, --device malta-be")


def test_ssh_options_without_host(tmp_path: Path) -> None:
    line = _one_error(_invoke("--image", "k.elf", "--key", "id", store=tmp_path))
    assert line.startswith("error: measure-memory: --key only apply with --host ADDR")


def test_connection_refused(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port bound but not listening: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        kh = str(tmp_path / "kh")
        line = _one_error(
            _invoke("--host", "127.0.0.1", "--port", str(port), "--known-hosts", kh, store=tmp_path)
        )
    assert line.startswith(f"error: connection refused by 127.0.0.1:{port}")


def test_wrong_flavour_refused_before_reboot(router: FakeRouter, tmp_path: Path) -> None:
    p = _invoke(
        "--host", router.host, "--port", str(router.port), "--user", router.user,
        "--key", str(router.userkey), "--known-hosts", str(router.known_hosts),
        "--flavour", "wolfssl", store=tmp_path,
    )  # fmt: skip
    line = _one_error(p)
    assert line.startswith("error: the router does not run the wolfssl flavour (apk: missing")
    assert not router.events  # no reboot was asked for


def test_wrong_device_refused_before_reboot(router: FakeRouter, tmp_path: Path) -> None:
    p = _invoke(
        "--host", router.host, "--port", str(router.port), "--user", router.user,
        "--key", str(router.userkey), "--known-hosts", str(router.known_hosts),
        "--device", "tl-wr902ac-v3", store=tmp_path,
    )  # fmt: skip
    line = _one_error(p)
    assert line.startswith("error: the router is a tplink,tl-wr902ac-v1 (TP-Link TL-WR902AC v1)")
    assert not router.events


def test_bad_boots_with_host(tmp_path: Path) -> None:
    line = _one_error(_invoke("--host", "127.0.0.1", "--boots", "0", store=tmp_path))
    assert line == "error: --boots 0: need at least one boot"
