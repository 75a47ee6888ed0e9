"""Rendering a result document: the markdown report and its PNG plots.

It assembles: a suite that has a section of its own renders it (``scale``'s
``markdown`` and ``plots``, ``gc``'s ``report``), and what every section is drawn
and worded with is in ``asynciocomm_bench.common`` (``plotting``, ``stats.cell``).
"""
