"""A real router over SSH: the Target for routers (ssh), copying without SFTP (scp), the
firmware metadata fwtool appends (fwtool), the image to flash (image), the TLS packages a
flavour implies (packages) and the sysupgrade state machine (flash)."""
