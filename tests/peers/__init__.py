"""The peers the product's tests talk to: echo and soak handlers on real
listeners (``conn``, ``soak``), hostile raw-socket peers (``hostile``), listeners
and writers in processes of their own (``procs``, ``server``, ``peer``), and the
event loops they run on (``loops``). ``python -m tests.reliability`` runs them for
longer (RELIABILITY.md)."""
