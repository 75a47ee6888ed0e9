"""Tests of asynciocomm.serialization, the fast path with distributed's bytes."""
