# Read after a package's own Makefile (make -f Makefile -f pkginfo.mk wolf-pkginfo): the
# values include/package-pack.mk passes to `apk mkpkg` for each package in WOLF_PKGS, one
# "key=value" line each (openwrt-wolf's stand-in, tests/standin/package_pack.py).
wolf-pkginfo:
	@$(foreach p,$(WOLF_PKGS),echo 'package=$(p)'; echo 'name=$(p)$(ABIV_$(p))'; \
		echo 'version=$(VERSION)'; echo 'abi=$(ABIV_$(p))'; \
		echo 'depends=$(Package/$(p)/DEPENDS)'; echo 'provides=$(Package/$(p)/PROVIDES)'; \
		echo 'priority=$(Package/$(p)/PRIORITY)'; echo 'arch=$(PKGARCH)'; \
		echo 'license=$(LICENSE)'; echo 'url=$(URL)';)

# Read after the ImageBuilder's Makefile: include/target.mk's kernel config merge command
wolf-linux-conf-cmd:
	@echo '$(LINUX_CONF_CMD)'
