"""Scenarios run under distributed's own test harness (see tests/test_harness.py).

``ASYNCIOCOMM_HARNESS`` says which comm serves ``tcp://`` and ``tls://``: ``stock``,
or ``takeover``, installed here in the test process; processes the tests start
(nannies' workers) get it through the preload settings in their environment.
The event loop comes from ``DASK_DISTRIBUTED__ADMIN__EVENT_LOOP``, as for
distributed's own suite.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile

from distributed.security import Security
from distributed.utils_test import cleanup, loop, loop_in_thread  # noqa: F401 (fixtures)

import asynciocomm

if os.environ.get("ASYNCIOCOMM_HARNESS") == "takeover":
    asynciocomm.install()


@functools.lru_cache(maxsize=None)
def security() -> Security:
    """TLS for client, scheduler and workers, from a PKI made for this run
    (distributed's own test certificates are not part of its package)."""
    from tests.certs import make_certs

    where = tempfile.mkdtemp(prefix="asynciocomm-harness-")
    # The files are read whenever a context is made, so they stay for the run.
    atexit.register(shutil.rmtree, where, True)
    return make_certs(where).security()
