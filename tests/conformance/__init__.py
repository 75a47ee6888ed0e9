"""Reusable conformance checks: what any distributed comm must do.

Each ``check_*`` coroutine takes a :class:`tests.variants.Variant` and the test
PKI, and runs against real sockets on loopback. ``tests/test_conformance.py`` runs
all of them against every variant, the stock Tornado comms included, so a check
that the stock comm fails is a check of the wrong thing.

The checks live in one module per area; :data:`MODULES` lists them.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

#: The modules that hold checks, by area.
MODULES = ("messages", "lifecycle", "closing", "serialization", "listening", "connecting",
           "cycles", "writing")


def modules() -> list[ModuleType]:
    return [importlib.import_module(f"tests.conformance.{name}") for name in MODULES]


def checks() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every ``check_*`` coroutine function of every module, by name."""
    seen: set[str] = set()
    for module in modules():
        for name, fn in inspect.getmembers(module, inspect.iscoroutinefunction):
            if name.startswith("check_") and fn.__module__ == module.__name__:
                assert name not in seen, f"two checks named {name}"
                seen.add(name)
                yield name, fn
