"""asynciocomm-bench: A/B benchmarks of distributed comm backends.

One subpackage per suite, each importing what they share from ``bench.common``:

- ``bench.comm``: comm level, with physical-limit references (``comm``, ``calls``);
- ``bench.cluster``: scheduler-bound workloads on local clusters (``cluster``);
- ``bench.profile``: py-spy on the scheduler (``profile``);
- ``bench.reliability``: the long reliability runs (``reliability``);
- ``bench.report``: the markdown report and plots of a result document (``report``).

``bench.cli`` is the command line; ``quick`` (the default) and ``all`` combine suites.
"""

SCHEMA = "asynciocomm-bench/1"

__all__ = ["SCHEMA"]
