#!/bin/bash
# The malta kernel for the Wi-Fi test in the real images (`./wolf perf --target vm --test wifi
# --image K --rootfs R ...`, docs/perf.md "Wi-Fi in the real malta images"): the OpenWrt
# tree's own malta kernel (its build_dir copy: OpenWrt's patches and .config) with cfg80211,
# mac80211 and mac80211_hwsim built in, and no initramfs (the image's rootfs comes on its
# disk). OpenWrt builds these three from backports (kmod-mac80211-hwsim); without a backports
# source, the kernel's own copies of the same drivers stand in.
#
# usage: bench/malta_wifi_kernel.sh TREE OUT [WORK]
#   TREE  an OpenWrt tree that has built a malta image (build_dir/target-mips*_musl/linux-malta_*)
#   OUT   the kernel ELF to write (vmlinux)
#   WORK  where to copy the kernel source (default: a new directory under /var/tmp; ~2 GB)
# About 15 minutes on 2 cores.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 TREE OUT [WORK]" >&2; exit 2; }
tree=$(cd "$1" && pwd) out=$2 work=${3:-$(mktemp -d /var/tmp/wolf-wifi-kernel.XXXXXX)}
shopt -s nullglob
srcs=("$tree"/build_dir/target-mips*_musl/linux-malta_*/linux-[0-9]*/)
tcs=("$tree"/staging_dir/toolchain-mips*_musl)
[ ${#srcs[@]} -eq 1 ] || { echo "error: $tree: expected one malta kernel build, found ${#srcs[@]}" >&2; exit 2; }
[ ${#tcs[@]} -eq 1 ] || { echo "error: $tree: expected one MIPS musl toolchain, found ${#tcs[@]}" >&2; exit 2; }
gcc=("${tcs[0]}"/bin/*-openwrt-linux-musl*-gcc)
[ ${#gcc[@]} -ge 1 ] || { echo "error: no *-openwrt-linux-musl*-gcc in ${tcs[0]}/bin" >&2; exit 2; }
cross=$(basename "${gcc[0]}" gcc)
echo "kernel source ${srcs[0]} -> $work/linux (toolchain ${tcs[0]})"
rm -rf "$work/linux"
cp -a "${srcs[0]}" "$work/linux"
cd "$work/linux"
export STAGING_DIR="$tree/staging_dir" PATH="${tcs[0]}/bin:$PATH"
M=(make ARCH=mips "CROSS_COMPILE=$cross" KBUILD_HAVE_NLS=no)
./scripts/config --enable CFG80211 --enable MAC80211 --enable MAC80211_HWSIM \
	--set-str INITRAMFS_SOURCE ""
timeout 600 "${M[@]}" olddefconfig
for opt in CFG80211 MAC80211 MAC80211_HWSIM; do
	grep -qx "CONFIG_$opt=y" .config || { echo "error: CONFIG_$opt=y did not hold" >&2; exit 1; }
done
timeout 7200 nice -n 19 "${M[@]}" -j"$(nproc)" vmlinux
cp vmlinux "$out.tmp"
mv "$out.tmp" "$out"
sha256sum "$out"
