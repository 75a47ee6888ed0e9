"""``cluster``: scheduler-bound workloads on real local clusters, A/B."""
