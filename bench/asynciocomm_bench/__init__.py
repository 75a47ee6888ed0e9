"""asynciocomm-bench: A/B benchmarks of distributed comm backends.

One subpackage per suite, each importing what they share from ``asynciocomm_bench.common``:

- ``asynciocomm_bench.comm``: comm level, with physical-limit references (``comm``, ``calls``);
- ``asynciocomm_bench.cluster``: scheduler-bound workloads on local clusters (``cluster``);
- ``asynciocomm_bench.profile``: py-spy on the scheduler (``profile``);
- ``asynciocomm_bench.report``: the markdown report and plots of a result document (``report``).

``asynciocomm_bench.cli`` is the command line; ``quick`` (the default) and ``all`` combine suites.
"""

SCHEMA = "asynciocomm-bench/1"

__all__ = ["SCHEMA"]
