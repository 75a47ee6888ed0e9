"""Logger names: every asynciocomm logger lives under ``distributed.comm.asyncio``.

distributed configures the ``distributed`` logger hierarchy (level INFO, a stderr
handler, see ``distributed.config.initialize_logging``); a logger outside it, such
as ``asynciocomm.listener``, would be silent under that default configuration
while the stock comm's ``distributed.comm.tcp`` is heard. The suffix follows the
settings' namespace, ``distributed.comm.asyncio.*``.
"""

from __future__ import annotations

import logging

#: The parent of every asynciocomm logger.
ROOT = "distributed.comm.asyncio"


def get_logger(module: str) -> logging.Logger:
    """The logger for asynciocomm module ``module`` (pass ``__name__``)."""
    return logging.getLogger(f"{ROOT}.{module.rpartition('.')[2]}")


#: distributed's own loggers of failed (de)serialization: the fast path logs
#: what distributed's ``dumps``, ``loads`` and ``to_frames`` log, under their
#: names, so that a failure reads the same whichever path it took.
PROTOCOL_CORE = logging.getLogger("distributed.protocol.core")
COMM_UTILS = logging.getLogger("distributed.comm.utils")
