"""distributed's serialization of a message, faster, with the same bytes.

``fast`` is the codec comms use (``MessageCodec``): msgpack with distributed's
hooks, ``packing`` for what a message's values need, ``pickling`` for task specs,
``arrays`` for NumPy, ``sizing`` for the offload decision, ``metering`` for
distributed's fine-performance meters. ``internals`` looks up every private name
of dask and distributed these use, ``selfcheck`` checks their bytes against
distributed's own, and ``choice`` gives comms the fast codec or ``stock``,
distributed's own path. Depends on dask and distributed, not on the transport.
"""
