"""The performance lab (`invoke perf`): heap, TLS 1.3 handshakes, crypto speed and soak per
flavour, on qemu-user, the malta VM or a router."""
