"""``profile``: py-spy on the scheduler during a cluster workload, the analysis
of its speedscope files, and (``python -m asynciocomm_bench.profile.writepath``) the CPU of
each pickling step of the scheduler's ``compute-task`` messages."""
