"""What distributed does when packing a message fails, for a message the fast
codec began.

distributed's ``dumps`` packs a message once; after a ``TypeError`` it packs it
again, pickling whatever msgpack cannot take (its second pass); any other
failure, or one of the second pass, is logged (by ``dumps``, then by
``to_frames``) and raised as it is. A message that
:class:`asynciocomm.serialization.fast.MessageCodec` began and cannot hand to
``to_frames`` without pickling something twice gets the same here:
:func:`second_pass`, :func:`log_unserializable`, and :func:`resume`, the rest of
a message that ``to_frames`` would offload, run in the offload thread with the
sub-frames already made taken as they are.

Every exception is caught, and raised again, in the frame that caught it, with a
bare ``raise``: no function here re-raises another's exception. An exception is
an argument only of :func:`log_unserializable`, which logs it and is not on its
traceback: a frame on an exception's own traceback that refers to it would be a
reference cycle, holding the message and its frames until the garbage
collector runs.
"""

from __future__ import annotations

from typing import Any

import msgpack

from asynciocomm.log import COMM_UTILS, PROTOCOL_CORE
from asynciocomm.serialization.packing import Hook, Replay, pack


def packs_again(hook: Hook, exc: BaseException) -> bool:
    """Whether distributed's ``dumps`` would pack again after ``exc``: a first
    pass's ``TypeError``."""
    return not hook.safe and isinstance(exc, TypeError)


def second_pass(packer: msgpack.Packer, hook: Hook, msg: Any, type_error: str) -> Any:
    """distributed's second pass after a first that raised a ``TypeError`` whose
    text is ``type_error``: what msgpack cannot take is pickled. The list of
    sub-frames is not emptied in between: the second pass's follow the first
    pass's, which stay in the message unreferenced, as in distributed's."""
    PROTOCOL_CORE.info(
        f"Failed to serialize ({type_error}); falling back to pickle. "
        "Be aware that this may degrade performance."
    )
    hook.safe = True
    hook.free = 0  # this pass serializes the arrays again
    return pack(packer, hook, msg)


def log_unserializable(msg: Any, exc: BaseException) -> None:
    """What ``dumps`` and ``to_frames`` log for a message that fails with ``exc``."""
    PROTOCOL_CORE.critical("Failed to Serialize", exc_info=exc)
    COMM_UTILS.info("Unserializable Message: %s", msg)
    COMM_UTILS.error(exc, exc_info=exc)  # to_frames' logger.exception(e)


def resume(msg: Any, comm: Any, serializers: Any, on_error: str | None,
           done: list[Any], safe: bool, start: int) -> list[Any]:
    """The offloaded rest of a message begun on the loop: its pass again (the
    second when ``safe``, whose sub-frames begin at ``start``), with the
    sub-frames ``done`` taken as they are, and what distributed does next."""
    hook = Replay(done)
    hook.sub += done[:start]  # the first pass's, when this is the second
    hook.msg, hook.comm, hook.serializers, hook.on_error = msg, comm, serializers, on_error
    hook.sized = True  # the offload was decided
    hook.safe = safe
    packer = msgpack.Packer(use_bin_type=True, default=hook.encode)
    try:
        frames = pack(packer, hook, msg)
    except Exception as e:
        if not packs_again(hook, e):
            log_unserializable(msg, e)
            raise
        type_error = str(e)
    else:
        return [frames] if isinstance(frames, bytes) else frames
    hook.done = []  # a pass of its own: nothing taken as it is
    try:
        frames = second_pass(packer, hook, msg, type_error)
    except Exception as e:
        log_unserializable(msg, e)
        raise
    return [frames] if isinstance(frames, bytes) else frames
