"""The build-and-measure matrix on a work queue (RQ + Redis): coordinator, workers, jobs."""
