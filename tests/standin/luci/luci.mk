# openwrt-wolf test stand-in for the LuCI feed's luci.mk: only what makes a
# LuCI package known to OpenWrt's package scan (name, menu, DEPENDS,
# DEFAULT); nothing is built from it.
LUCI_NAME?=$(notdir ${CURDIR})
LUCI_TYPE?=$(word 2,$(subst -, ,$(LUCI_NAME)))
PKG_NAME?=$(LUCI_NAME)
PKG_VERSION?=0
PKG_RELEASE?=1

include $(INCLUDE_DIR)/package.mk

define Package/$(PKG_NAME)
  SECTION:=luci
  CATEGORY:=LuCI
  SUBMENU:=1. Collections
  TITLE:=$(LUCI_TITLE)
  DEPENDS:=$(LUCI_DEPENDS)
  DEFAULT:=$(LUCI_DEFAULT)
  PKGARCH:=all
endef

define Build/Compile
endef

define Package/$(PKG_NAME)/install
	true
endef

$(eval $(call BuildPackage,$(PKG_NAME)))
