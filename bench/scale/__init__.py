"""``scale``: a scheduler and many workers on hosts of their own.

- ``netns``: the hosts, network namespaces joined to one bridge, and their teardown;
- ``cluster``, ``workerproc``, ``lifeline``, ``tlshosts``: the processes on those
  hosts (many ``Worker``s per process), their settings and certificates;
- ``driver``, ``graphs``, ``metrics``, ``counting``: the client that runs the
  workloads, and what is measured at the scheduler;
- ``runner``, ``suite``, ``cli``: one cluster, the interleaved sweep, the subcommand;
- ``categories``, ``summary``: the py-spy categories and the paired ratios;
- ``multihome``: which address a worker on a multi-homed host advertises.
"""
