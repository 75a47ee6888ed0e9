"""Tests of asynciocomm.wire, the sans-I/O frame codec."""
