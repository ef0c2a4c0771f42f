"""Where images run: the Target protocol, the QEMU malta VM and a router over SSH (flash).
Takes an image or an address; gives a Target that runs commands and reboots."""
