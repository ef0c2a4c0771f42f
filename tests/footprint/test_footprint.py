"""Footprint lab: real cross-builds of Mbed TLS and wolfSSL (OpenSSL behind `slow`), checked
with independent tools (xz, stat, readelf, nm, size, qemu-user + hashlib), the data against
OpenWrt's facts, and one clear line for each kind of bad input."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf import paths
from openwrt_wolf.errors import CommandError, WolfError
from openwrt_wolf.footprint import lab, report, sources, spec, toolchain
from openwrt_wolf.footprint.smoke import SMOKE_INPUT
from openwrt_wolf.patchset import symbols
from openwrt_wolf.results.footprint import Footprint
from tests.conftest import need_tools, preparing

ROOT = Path(__file__).resolve().parents[2]
CROSS = ("mips-linux-gnu-gcc", "mips-linux-gnu-readelf", "mips-linux-gnu-nm", "mips-linux-gnu-size")
BUILD_TOOLS = (*CROSS, "cmake", "autoreconf", "libtoolize", "perl", "make", "xz", "mksquashfs")
PUBLISHED = {"mbedtls": 234_820, "openssl": 1_245_656, "wolfssl": 240_120}  # bytes, xz


def _run(*argv: str | Path) -> str:
    return subprocess.run([str(a) for a in argv], check=True, capture_output=True, text=True,
                          timeout=300).stdout  # fmt: skip


def _xz_cli(path: Path) -> int:
    """The oracle: the xz tool itself, at the settings the comparison states (-9e)."""
    out = subprocess.run(["xz", "-9e", "-c", str(path)], check=True, capture_output=True,
                         timeout=300).stdout  # fmt: skip
    return len(out)


# Cold build times on 2 cores (docs/footprint.md), said while a fixture builds
ABOUT = {"mbedtls": "15 s", "wolfssl": "30-70 s", "openssl": "3 min"}


def _footprint(store: Path, library: str, config: str, **kw: object) -> Footprint:
    need_tools(*BUILD_TOOLS)
    req = lab.Request(libraries=(library,), configs=(config,), store=str(store),
                      **kw)  # type: ignore[arg-type]  # fmt: skip
    with preparing(f"cross-building {library} ({config} config) for mips_24kc (about "
                   f"{ABOUT[library]} on 2 cores when not cached)"):  # fmt: skip
        outcome = lab.run(req)
    if outcome.errors:
        raise outcome.errors[0]
    (fp,) = outcome.footprints
    return fp


@pytest.fixture(scope="session")
def fp_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # builds share the download/build cache (a second run is fast); results go to a tmp store
    return tmp_path_factory.mktemp("fp-store")


@pytest.fixture(scope="session")
def mbedtls(fp_store: Path) -> Footprint:
    need_tools("qemu-mips-static")
    return _footprint(fp_store, "mbedtls", "openwrt", smoke=True)


@pytest.fixture(scope="session")
def wolfssl_minimal(fp_store: Path) -> Footprint:
    need_tools("qemu-mips-static")
    return _footprint(fp_store, "wolfssl", "minimal", smoke=True, versions=(("wolfssl", "5.9.2"),))


@pytest.fixture(scope="session")
def wolfssl_openwrt(fp_store: Path) -> Footprint:
    return _footprint(fp_store, "wolfssl", "openwrt", versions=(("wolfssl", "5.9.2"),))


def _root(fp: Footprint) -> Path:
    return lab.build_root() / fp.cache_key


def _check_files(fp: Footprint) -> int:
    """Every measured figure against xz/stat/size; returns the xz sum from the xz tool."""
    total = 0
    for f in fp.files:
        installed = _root(fp) / "installed" / f.name
        stripped = _root(fp) / "stripped" / f.name
        assert installed.stat().st_size == f.installed
        assert stripped.stat().st_size == f.stripped
        xz = _xz_cli(installed)
        assert xz == f.xz
        total += xz
        size = _run("mips-linux-gnu-size", stripped).splitlines()[1].split()
        assert (int(size[0]), int(size[1]), int(size[2])) == (f.text, f.data, f.bss)
        header = _run("mips-linux-gnu-readelf", "-h", stripped)
        assert re.search(r"Class:\s+ELF32", header)
        assert re.search(r"Data:\s+2's complement, big endian", header)
        assert re.search(r"Machine:\s+MIPS R3000", header)
        assert "mips32r2" in header
        # the sstripped copy has no section headers left, but its segments are intact
        assert "no sections" in _run("mips-linux-gnu-readelf", "-S", installed)
        assert "LOAD" in _run("mips-linux-gnu-readelf", "-l", installed)
    return total


def _exports(fp: Footprint) -> set[str]:
    names: set[str] = set()
    for f in fp.files:
        out = _run("mips-linux-gnu-nm", "-D", "--defined-only", _root(fp) / "stripped" / f.name)
        # versioned names (OpenSSL) read "SSL_CTX_new@@OPENSSL_3.0.0"
        names |= {ln.split()[-1].split("@")[0] for ln in out.splitlines() if ln.strip()}
    return names


def _smoke_ok(fp: Footprint) -> None:
    """Run the smoke program again ourselves and compare its SHA-256 with hashlib's."""
    import hashlib

    exe = _root(fp) / "smoke" / f"smoke-{fp.library}"
    out = subprocess.run(
        ["qemu-mips-static", "-L", "/usr/mips-linux-gnu", "-E",
         f"LD_LIBRARY_PATH={_root(fp) / 'installed'}", str(exe), SMOKE_INPUT],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"sha256 {hashlib.sha256(SMOKE_INPUT.encode()).hexdigest()}" in out.stdout
    assert "tls_context ok" in out.stdout and "p256_key ok" in out.stdout


# --- real builds ---------------------------------------------------------------------------


def test_mbedtls_openwrt_build(mbedtls: Footprint) -> None:
    assert sorted(f.name.split(".so")[0] for f in mbedtls.files) == [
        "libmbedcrypto", "libmbedtls", "libmbedx509"]  # fmt: skip
    xz = _check_files(mbedtls)
    assert abs(xz - PUBLISHED["mbedtls"]) / PUBLISHED["mbedtls"] <= 0.10, xz
    assert {"mbedtls_ssl_setup", "mbedtls_x509_crt_parse", "psa_crypto_init"} <= _exports(mbedtls)
    # OpenWrt's Config.in turns these off: their code must not be in the library
    assert not {"mbedtls_camellia_init", "mbedtls_aria_init", "mbedtls_ccm_init"} & _exports(
        mbedtls
    )
    _smoke_ok(mbedtls)


def test_wolfssl_minimal_build(wolfssl_minimal: Footprint) -> None:
    assert wolfssl_minimal.version == "5.9.2" and wolfssl_minimal.ecc == "sp-p256"
    xz = _check_files(wolfssl_minimal)
    assert abs(xz - PUBLISHED["wolfssl"]) / PUBLISHED["wolfssl"] <= 0.10, xz
    names = _exports(wolfssl_minimal)
    # ustream-ssl's native backend (patches/ustream-ssl/0001), hostapd's glue, px5g, X25519
    # (the backend checks names itself since issue 19, with the certificate manager's
    # intermediates dropped after each handshake step, so wolfSSL_check_domain_name is gone)
    assert {"wolfSSL_CTX_new", "wolfSSL_CTX_GetCertManager",
            "wolfSSL_CertManagerUnloadIntermediateCerts", "wolfSSL_CTX_SetMinVersion",
            "wolfSSL_UseSNI", "wc_ecc_make_key", "wc_MakeSelfCert", "wc_curve25519_make_key",
            "wc_AesKeyWrap", "wc_InitCmac", "wc_PBKDF2", "wc_DhAgree"} <= names  # fmt: skip
    # every symbol each default consumer imports (lists derived from their sources by
    # compiling them, data/wolfssl_consumers.toml), as `nm -D` sees the built library
    for consumer in symbols.load_consumers():
        if consumer.required:
            missing = set(consumer.symbols) - names
            assert not missing, f"{consumer.name} would not link: {sorted(missing)}"
    # dropped: TLS 1.0/1.1, DTLS, Ed25519, and compat API no consumer calls (the OpenSSL
    # compatibility calls of ustream-ssl's old wolfSSL path included)
    assert not {"wolfTLSv1_client_method", "wolfDTLSv1_2_client_method", "wc_ed25519_sign_msg",
                "wolfSSL_X509_print_ex", "wolfSSL_X509_check_host",
                "wolfSSL_CTX_set_ecdh_auto", "wolfSSL_BIO_free"} & names  # fmt: skip
    _smoke_ok(wolfssl_minimal)


def test_wolfssl_minimal_half_of_openwrt(
    wolfssl_minimal: Footprint, wolfssl_openwrt: Footprint
) -> None:
    _check_files(wolfssl_openwrt)
    small = sum((_root(wolfssl_minimal) / "installed" / f.name).stat().st_size
                for f in wolfssl_minimal.files)  # fmt: skip
    full = sum((_root(wolfssl_openwrt) / "installed" / f.name).stat().st_size
               for f in wolfssl_openwrt.files)  # fmt: skip
    assert small <= full / 2, (small, full)


def test_cached_rerun_does_not_rebuild(mbedtls: Footprint, fp_store: Path) -> None:
    log = Path(mbedtls.log)
    before = log.stat().st_mtime_ns
    again = _footprint(fp_store, "mbedtls", "openwrt")
    # the record is in the results store, readable as the typed model
    stored = {f.cache_key for f in report.stored(str(fp_store))}
    assert mbedtls.cache_key in stored
    assert again.cache_key == mbedtls.cache_key
    assert log.stat().st_mtime_ns == before


def test_squashfs_cost_is_near_xz(mbedtls: Footprint) -> None:
    # squashfs compresses 256k blocks separately, so it costs a little more or less than one
    # xz stream per file; a cost far off would mean the wrong files or settings went in
    assert 0.9 * mbedtls.xz < mbedtls.squashfs_cost < 1.15 * mbedtls.xz


@pytest.mark.slow
def test_openssl_openwrt_build(fp_store: Path) -> None:
    fp = _footprint(fp_store, "openssl", "openwrt")
    assert sorted(f.name for f in fp.files) == ["libcrypto.so.3", "libssl.so.3"]
    xz = _check_files(fp)
    assert abs(xz - PUBLISHED["openssl"]) / PUBLISHED["openssl"] <= 0.10, xz
    assert {"SSL_CTX_new", "EVP_Digest", "OSSL_PROVIDER_load"} <= _exports(fp)


# --- data against OpenWrt's facts -----------------------------------------------------------


LIBS = ("mbedtls", "wolfssl", "openssl")


def _makefile(tree: Path, library: str) -> str:
    return (tree / "package" / "libs" / library / "Makefile").read_text()


def _top(text: str, var: str) -> str:
    """A package Makefile's unconditional `VAR:=value` (at the start of a line)."""
    m = re.search(rf"^{var}:=(.*)$", text, re.M)
    assert m, var
    return m.group(1).strip()


def _target_cflags(text: str) -> tuple[set[str], bool]:
    """The literal flags of the Makefile's unconditional TARGET_CFLAGS assignments (with their
    continuation lines), and whether one filters out the -O level (`$(filter-out -O%,...)`)."""
    flags: set[str] = set()
    filtered = False
    for m in re.finditer(r"^TARGET_CFLAGS\s*[:+]?=((?:.*\\\n)*.*)$", text, re.M):
        value = m.group(1)
        filtered |= "$(filter-out -O%," in value
        value = re.sub(r"\$\([^()]*(?:\([^()]*\)[^()]*)*\)", " ", value)  # $(...) are not literal
        flags |= {w for w in value.replace("\\\n", " ").split() if w.startswith("-")}
    return flags, filtered


def test_sources_pin_openwrts_hashes(openwrt_tree_25125: Path) -> None:
    # PKG_VERSION and PKG_HASH of each library's package Makefile in the v25.12.5 tree
    for library in LIBS:
        mk = _makefile(openwrt_tree_25125, library)
        version = _top(mk, "PKG_VERSION")
        assert spec.source(library, version).sha256 == _top(mk, "PKG_HASH"), library
        assert spec.resolve(library, "25.12.5", "openwrt").version == version, library
    # main's (not in a shared tree; testbed.md): mbedtls 3.6.7, wolfSSL 5.9.2
    assert spec.source("wolfssl", "5.9.2").sha256.startswith("2f4ef3d4")
    assert spec.source("mbedtls", "3.6.7").sha256.startswith("a7e8bcbe")
    origins = [o for o, _ in spec.source("mbedtls", "3.6.6").urls]
    assert origins[0] == "openwrt" and origins[-1] == "debian"
    assert "debian" not in [o for o, _ in spec.source("wolfssl", "5.9.1").urls]


def test_flags_follow_openwrts_package_makefiles(openwrt_tree_25125: Path) -> None:
    """The flags OpenWrt's v25.12.5 tree gives each library on ath79 (mips_24kc): the CPU's
    (include/target.mk for target/linux/ath79's CPU_TYPE), PKG_BUILD_FLAGS' gc-sections and
    lto (include/package.mk), and the package Makefile's own TARGET_CFLAGS."""
    target_mk = (openwrt_tree_25125 / "include" / "target.mk").read_text()
    ath79 = (openwrt_tree_25125 / "target" / "linux" / "ath79" / "Makefile").read_text()
    cpu_type = _top(ath79, "CPU_TYPE")
    cpu = set()
    for var in ("CPU_CFLAGS =", "CPU_CFLAGS +=", f"CPU_CFLAGS_{cpu_type} ="):
        m = re.search(rf"^\s*{re.escape(var)}(.*)$", target_mk, re.M)
        assert m, var
        cpu |= set(m.group(1).split())
    assert {"-mips32r2", "-mtune=24kc", "-mno-branch-likely", "-pipe", "-Os"} <= cpu  # read
    for library in LIBS:
        mk = _makefile(openwrt_tree_25125, library)
        s = spec.resolve(library, "25.12.5", "openwrt")
        build_flags = _top(mk, "PKG_BUILD_FLAGS").split()
        own, no_o_level = _target_cflags(mk)
        assert cpu - {"-Os"} <= set(s.cflags), library
        assert ("-Os" in s.cflags) != no_o_level, library  # CMake's -O2 applies instead
        if no_o_level:
            assert not [f for f in s.cflags if f.startswith("-O")], library
        assert own <= set(s.cflags), (library, own - set(s.cflags))
        gc = "gc-sections" in build_flags
        assert ("-ffunction-sections" in s.cflags) == gc, library
        assert ("-Wl,--gc-sections" in s.ldflags) == gc, library
        assert ("-flto=auto" in s.cflags) == ("lto" in build_flags), library
        assert "-msoft-float" not in s.cflags  # Debian's toolchain is hard-float
    ossl = spec.resolve("openssl", "25.12.5", "openwrt")
    wolf = spec.resolve("wolfssl", "25.12.5", "openwrt")
    assert {"no-dtls", "no-comp", "shared", "no-tests"} <= set(ossl.options)
    assert "--enable-wpas" in wolf.options and "--enable-opensslall" in wolf.options
    soft = spec.resolve("mbedtls", "25.12.5", "openwrt", soft_float=True)
    assert "-msoft-float" in soft.cflags


def test_aarch64_flags_follow_openwrts_bcm2712_target(openwrt_tree_25125: Path) -> None:
    """The Raspberry Pi 5's packages (bcm27xx/bcm2712, issue 34), from OpenWrt's own files:
    the target's ARCH and CPU_TYPE, include/target.mk's CPU flags for that CPU in its aarch64
    block (none for cortex-a76: plain -Os -pipe), rules.mk's FPIC for aarch64, PKG_DT_RELR
    (Config-build.in offers it on aarch64, default y; include/hardening.mk's flags), and
    OpenSSL's Config.in default that leaves ChaCha20 preference off on aarch64."""
    tree = openwrt_tree_25125
    bcm2712 = (tree / "target/linux/bcm27xx/bcm2712/target.mk").read_text()
    assert _top(bcm2712, "ARCH") == "aarch64"
    cpu_type = _top(bcm2712, "CPU_TYPE")
    target_mk = (tree / "include" / "target.mk").read_text()
    block = target_mk.split("ifeq ($(ARCH),aarch64)", 1)[1].split("endif", 1)[0]
    m = re.search(rf"^\s*CPU_CFLAGS_{re.escape(cpu_type)}\s*:?=(.*)$", block, re.M)
    cpu_own = set(m.group(1).split()) if m else set()
    base = re.search(r"^\s*CPU_CFLAGS = (.*)$", target_mk, re.M)
    assert base
    arch = spec.get_arch(f"aarch64_{cpu_type}")
    assert set(arch.cflags) == set(base.group(1).split()) | cpu_own
    rules = (tree / "rules.mk").read_text()
    fpic = re.search(r"findstring \$\(ARCH\) , ([^)]*)\)\)\n\s*FPIC:=(.*)$", rules, re.M)
    assert fpic and "aarch64" in fpic.group(1).split()
    assert arch.fpic == tuple(fpic.group(2).split())
    build_in = (tree / "config" / "Config-build.in").read_text()
    relr = build_in.split("config PKG_DT_RELR", 1)[1].split("help", 1)[0]
    assert "aarch64" in relr and "default y" in relr
    hardening = (tree / "include" / "hardening.mk").read_text()
    dt = hardening.split("ifdef CONFIG_PKG_DT_RELR", 1)[1].split("endif\nendif", 1)[0]
    want_c = re.search(r"TARGET_CFLAGS \+= (.*)$", dt, re.M)
    want_l = re.search(r"TARGET_LDFLAGS \+= (.*)$", dt, re.M)
    assert want_c and want_l
    for library in LIBS:
        s = spec.resolve(library, "25.12.5", "openwrt", arch_name=arch.name)
        assert set(want_c.group(1).split()) <= set(s.cflags), library
        assert set(want_l.group(1).split()) <= set(s.ldflags), library
        assert not [f for f in s.cflags if f.startswith(("-mcpu", "-march", "-mips"))], library
    chacha = (tree / "package/libs/openssl/Config.in").read_text()
    rule = chacha.split("config OPENSSL_PREFER_CHACHA_OVER_GCM", 1)[1].split("prompt", 1)[0]
    assert "!aarch64" in rule
    ossl = spec.resolve("openssl", "25.12.5", "openwrt", arch_name=arch.name)
    assert "-DOPENSSL_PREFER_CHACHA_OVER_GCM" not in ossl.options
    assert (
        "-DOPENSSL_PREFER_CHACHA_OVER_GCM" in spec.resolve("openssl", "25.12.5", "openwrt").options
    )
    assert toolchain.cross_tools(arch) == [
        "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-strip", "aarch64-linux-gnu-size",
        "/usr/aarch64-linux-gnu/include/stdio.h",
    ]  # fmt: skip


def test_cache_key_depends_on_what_decides_the_output() -> None:
    a = spec.resolve("wolfssl", "snapshot", "minimal", ecc="sp-p256")
    b = spec.resolve("wolfssl", "snapshot", "minimal", ecc="generic")
    assert a.key("gcc 12") != b.key("gcc 12")
    assert a.key("gcc 12") != a.key("gcc 13")
    assert a.key("gcc 12") == spec.resolve("wolfssl", "snapshot", "minimal").key("gcc 12")


# --- bad input: one clear line each -----------------------------------------------------------


def _one_line(e: pytest.ExceptionInfo[WolfError]) -> str:
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_unknown_arch_via_the_task() -> None:
    r = subprocess.run([str(ROOT / "wolf"), "footprint", "--arch", "mips_99kc"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert lines == [lines[0]] and "unknown arch 'mips_99kc'" in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_version_without_known_hash() -> None:
    with pytest.raises(WolfError) as e:
        spec.resolve("wolfssl", "25.12.5", "openwrt", version="5.9.9")
    assert "5.9.9: no known sha256" in _one_line(e)


def test_wolfssl_591_unreachable_when_only_debian_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    src = spec.resolve("wolfssl", "25.12.5", "openwrt").source
    with pytest.raises(WolfError) as e:
        sources.fetch(src, origins={"debian"})
    text = _one_line(e)
    assert "no source reachable for wolfssl 5.9.1" in text and "--sources" in text
    assert "Debian has no upload" in text
    # the way out that works from Debian's archive alone, as the option to type
    assert "--version wolfssl=5.9.2" in text


def test_hash_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "dl"
    bad.mkdir()
    (bad / "mbedtls-3.6.6.tar.bz2").write_bytes(b"not the Mbed TLS release")
    with pytest.raises(WolfError) as e:
        sources.fetch(spec.source("mbedtls", "3.6.6"), local=[bad])
    assert "hash mismatch" in _one_line(e) and str(bad / "mbedtls-3.6.6.tar.bz2") in str(e.value)


def test_missing_toolchain(tmp_path: Path) -> None:
    with pytest.raises(WolfError) as e:
        toolchain.find(spec.get_arch("mips_24kc"), str(tmp_path / "nowhere"))
    text = _one_line(e)
    assert "nowhere: no such file" in text and "gcc-mips-linux-gnu" in text


def _failing_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cflag: str) -> CommandError:
    need_tools(*BUILD_TOOLS)
    dl = sources.download_dir()  # the shared cache's tarball, if a run already fetched it
    monkeypatch.setenv("OPENWRT_WOLF_CACHE", str(tmp_path / "cache"))
    bs = spec.resolve("mbedtls", "25.12.5", "openwrt")
    bs = dataclasses.replace(bs, cflags=(*bs.cflags, cflag))
    tc = toolchain.find(bs.arch)
    with pytest.raises(CommandError) as e:
        lab.build_one(bs, tc, lab.Request(sources=(str(dl),)))
    assert "\n" not in e.value.message
    assert e.value.tail and e.value.log and Path(e.value.log).is_file()
    assert str(tmp_path) in e.value.log
    return e.value


def test_configure_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    err = _failing_build(tmp_path, monkeypatch, "-mno-such-cpu-option")
    assert err.message.startswith("mbedtls-3.6.6-openwrt: cmake failed")
    assert "-mno-such-cpu-option" in Path(err.log or "").read_text()


def test_compile_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # cmake's compiler checks pass; every Mbed TLS source then fails to include its config
    err = _failing_build(tmp_path, monkeypatch, "-DMBEDTLS_CONFIG_FILE=no-such-config.h")
    assert err.message.startswith("mbedtls-3.6.6-openwrt: compile failed")
    assert any("error:" in line for line in err.tail), err.tail


def test_unknown_config_for_a_single_library() -> None:
    with pytest.raises(WolfError) as e:
        lab.plan(lab.Request(libraries=("mbedtls",), configs=("minimal",)), soft_float=False)
    assert "Mbed TLS has no config 'minimal'" in _one_line(e)


def test_config_all_means_the_configs_each_library_has() -> None:
    """--config all with one library is that library's configs (wolfSSL has no 'small'); with
    all three, every config any of them has. The oracle is the data files' own tables."""
    import tomllib

    from openwrt_wolf.footprint import cli

    def tables(name: str) -> list[str]:
        raw = tomllib.loads((paths.DATA_DIR / "footprint" / f"{name}.toml").read_text())
        return list(raw["config"])

    assert list(cli.configs_of(("wolfssl",))) == tables("wolfssl")
    assert "small" not in cli.configs_of(("wolfssl",))
    every = cli.configs_of(spec.LIBRARIES)
    assert set(every) == {c for n in spec.LIBRARIES for c in tables(n)}
    planned = lab.plan(lab.Request(libraries=("wolfssl",), configs=cli.configs_of(("wolfssl",))),
                       soft_float=False)  # fmt: skip
    assert {s.config for s in planned} == set(tables("wolfssl"))


def test_downloads_live_in_the_cache_dir() -> None:
    assert sources.download_dir().is_relative_to(paths.cache_dir())


def test_toolchain_directory_is_searched(tmp_path: Path) -> None:
    need_tools("mips-linux-gnu-gcc")
    gcc = Path(str(subprocess.run(["which", "mips-linux-gnu-gcc"], capture_output=True,
                                  text=True, check=True).stdout).strip())  # fmt: skip
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mips-linux-gnu-gcc").symlink_to(gcc)
    tc = toolchain.find(spec.get_arch("mips_24kc"), str(tmp_path))
    assert tc.prefix == str(tmp_path / "bin" / "mips-linux-gnu-")
    assert tc.target == "mips-linux-gnu" and not tc.soft_float  # Debian's gcc: hard-float
    with pytest.raises(WolfError) as e:
        toolchain.find(spec.get_arch("mips_24kc"), str(tmp_path / "bin" / ".." / "nothing"))
    _one_line(e)
