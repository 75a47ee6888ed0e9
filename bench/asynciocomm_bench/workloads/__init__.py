"""``workloads``: real user workloads on fresh local clusters, stock comm against
asynciocomm on the same event loop, in ABBA pairs, with their answers checked."""
