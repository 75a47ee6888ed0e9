"""``profile``: py-spy on the scheduler during a cluster workload, and the analysis
of its speedscope files."""
