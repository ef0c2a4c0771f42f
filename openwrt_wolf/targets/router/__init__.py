"""A real router over SSH: the Target for routers (ssh), the login from the options (login),
connecting and logging in (connect), known_hosts (hostkeys), waiting for the SSH port
(reachable), copying without SFTP (scp), the firmware metadata fwtool appends (fwtool), the
image to flash (image), the TLS packages a flavour implies (packages) and the sysupgrade state
machine (flash)."""
