"""distributed's tcp framing as a sans-I/O codec: bytes in, messages out, and
back; no sockets, no event loop.

``decoder`` (the read side, a state machine fed with received bytes), ``encoder``
(the write side), ``buffers`` (where received frames go), ``limits`` and
``errors`` import only the standard library (and numpy, when it is there, for
uninitialized buffers); ``speedups`` picks their Cython-compiled twins. Nothing
here imports dask, distributed, yaml or asyncio (``tests/wire/test_imports.py``),
so the codec can be driven and tested on its own, as h11's is.
"""
