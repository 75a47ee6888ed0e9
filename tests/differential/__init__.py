"""The differential harness: generated sequences of operations on a connected
pair of comms, run on the stock tcp/tls comm (the oracle) and on asynciocomm,
whose observable traces must agree, and which must leave nothing of
asynciocomm's in reference cycles.

* ``ops``: the operations, the messages they write, and the model of stock
  semantics that keeps every generated sequence deterministic on stock;
* ``strategies``: the hypothesis generator;
* ``runner``: runs one sequence on a real pair and records its trace;
* ``compare``: trace comparison and the differences from stock kept on purpose;
* ``known``: the divergences found so far, each a minimal sequence, and the open ones;
* ``check``: the glue to the test variants and PKI that tests/test_differential.py uses;
* ``command``: the longer runs, ``python -m tests.differential``.
"""
