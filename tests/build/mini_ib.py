"""A minimal ImageBuilder for tests and bench/hostile.py: GNU make answers `make info`,
`make manifest` and `make image` as target/imagebuilder/files/Makefile does, expanding
$(PACKAGES) and $(FILES) (into manifest-saw / image-saw, what make was given); `make image`
then fails, as it is told to. Enough to show whether a value reaches make and runs there."""

from __future__ import annotations

from pathlib import Path

MAKEFILE = """\
info:
\t@echo 'Current Target: "ath79/generic"'
\t@echo 'Default Packages: base-files libustream-mbedtls'
\t@echo 'Available Profiles:'
\t@echo ''
\t@echo 'tplink_tl-wr902ac-v1:'
\t@echo '    TP-Link TL-WR902AC v1'
\t@echo '    Packages: kmod-usb2'
manifest:
\t@echo "$(PACKAGES)" > manifest-saw
\t@echo 'base-files - 1'
image:
\t@echo "$(PACKAGES) $(FILES)" > image-saw
\t@exit 1
"""


def make(top: Path) -> Path:
    """The ImageBuilder in ``top``, with the KDIR `make image` needs."""
    (top / "build_dir/target-mips_24kc_musl/linux-ath79_generic").mkdir(parents=True)
    (top / "Makefile").write_text(MAKEFILE)
    return top
