"""The build driver (issue 3): flavour package changes, the ImageBuilder backend, build records."""
