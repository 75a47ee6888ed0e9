"""asynciocomm-bench: A/B benchmarks of distributed comm backends.

Subcommands (see ``bench.cli``): ``comm`` (comm level, with physical-limit
references), ``cluster`` (scheduler-bound clusters), ``profile`` (py-spy on
the scheduler), ``report`` (re-render saved results) and ``quick`` (default).
"""

SCHEMA = "asynciocomm-bench/1"

__all__ = ["SCHEMA"]
