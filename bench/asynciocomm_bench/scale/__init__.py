"""``scale``: a scheduler and many workers on hosts of their own.

- ``netns``: the hosts, network namespaces joined to one bridge, and their teardown;
- ``cluster``, ``workerproc``, ``lifeline``: the processes on those
  hosts (many ``Worker``s per process) and their settings (their certificates:
  ``common.tlsfiles``);
- ``driver``, ``graphs``, ``metrics``, ``counting``: the client that runs the
  workloads, and what is measured at the scheduler;
- ``runner``, ``suite``, ``cli``: one cluster, the interleaved sweep, the subcommand;
- ``categories``: the py-spy categories of the scheduler's samples;
- ``ratios``, ``markdown``, ``plots``: this suite's section of the report (the
  report assembles the sections);
- ``multihome``: which address a worker on a multi-homed host advertises.
"""
