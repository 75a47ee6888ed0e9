"""``asynciocomm-bench upstream``: distributed's own test modules, run from a source
tree of distributed with the stock comm and with the takeover on each event loop,
and compared test by test.

* ``runs``: one pytest process (command, environment, JUnit outcomes);
* ``plugin``: the pytest plugin inside each run (the takeover, the test
  certificates' place, the progress file, the loop of pytest-asyncio's tests);
* ``compare``: stock against takeover per test and loop, and the reruns;
* ``report``: the markdown;
* ``command``: ``add_parser`` and ``run``.

CI runs it on a small synthetic source tree (``bench/tests/upstream``).
"""

from asynciocomm_bench.upstream.command import add_parser, run

__all__ = ["add_parser", "run"]
