# Stand-in for the part of OpenWrt's include/image.mk that runs one device's recipe
# (openwrt-wolf tests only). The recipe steps themselves are OpenWrt's: include/image-commands.mk
# is the tree's own file, and standin-helpers.mk holds concat_cmd, build_cmd, split_args,
# exp_units, param_get*, Image/pad-to, ERROR_MESSAGE and space/comma read out of the tree's
# include/image.mk, rules.mk and include/verbose.mk when the stand-in was made
# (tests/standin/make_standin.py). The device's variables (KERNEL, IMAGE/*, BLOCKSIZE,
# IMAGE_SIZE, TPLINK_*, ...) were evaluated from target/linux/<target>/image/*.mk.
#
#   make -f include/standin-image.mk DEVICE=<profile> IMAGE=sysupgrade.bin OUT=<file>
#   make -f include/standin-image.mk DEVICE=<profile> kernel   (when the stand-in is made)

include $(TOPDIR)/include/standin-helpers.mk
include $(TOPDIR)/include/image-commands.mk
include $(TOPDIR)/include/standin-release.mk
include $(TOPDIR)/include/standin-device-$(DEVICE).mk

STAGING_DIR_HOST := $(TOPDIR)/staging_dir/host
export PATH := $(STAGING_DIR_HOST)/bin:$(PATH)
DEVICE_NAME := $(DEVICE)
KDIR_KERNEL_IMAGE := $(KDIR)/$(DEVICE)-kernel.bin
# rules.mk's toupper, for Build/uImage's image name
toupper = $(shell echo '$(1)' | tr '[:lower:]' '[:upper:]')

ifeq ($(MAKECMDGOALS),kernel)
# Device/Build/kernel (without IB): the KERNEL pipeline over $(KDIR)/$(KERNEL_NAME); an
# ImageBuilder ships the result, as the stand-in does
.PHONY: kernel
kernel: $(KDIR_KERNEL_IMAGE)
$(KDIR_KERNEL_IMAGE): $(KDIR)/$(KERNEL_NAME) FORCE
	@rm -f $@
	$(call concat_cmd,$(KERNEL))
	$(if $(KERNEL_SIZE),$(call Build/check-size,$(KERNEL_SIZE)))
endif

# Device/Build/image: $(KDIR)/tmp/<image name> from the kernel and root.squashfs
$(OUT): $(KDIR_KERNEL_IMAGE) $(KDIR)/root.squashfs FORCE
	@rm -f $@
	[ -f $(word 1,$^) -a -f $(word 2,$^) ]
	$(call concat_cmd,$(IMAGE/$(IMAGE)))

FORCE:
