"""``comm``: comm-level A/B measurements (ping, stream, bulk, concurrency) against
the physical-limit references, and ``calls`` (Python calls per round trip)."""
