"""``asynciocomm-bench gc``: the scheduler's garbage collector, with and without patches/0011."""
