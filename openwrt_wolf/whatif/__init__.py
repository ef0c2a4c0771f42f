"""What-if: would another flavour fit, predicted from a built image without a rebuild."""
