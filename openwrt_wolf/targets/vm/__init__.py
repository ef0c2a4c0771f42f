"""The QEMU malta VM Target: command line, boot state machine with timeouts, console.
Takes a malta kernel (and rootfs/initramfs); gives a booted Target, or one line on what stalled."""
