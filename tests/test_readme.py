"""The README's set-up commands stay true: CI runs exactly the documented test
command, and the documented entry points exist."""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def _setup_commands() -> list[str]:
    section = _read("README.md").split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return [c.strip() for c in re.findall(r"```\n(.+?)\n\s*```", section)]


def test_readme_has_two_setup_commands() -> None:
    bench, tests = _setup_commands()
    assert "asynciocomm-bench" in bench and "pip install" in bench
    assert "pytest" in tests and "pip install" in tests
    # The product's suite needs its test extra only; the bench's runs beside it.
    assert '-e ".[test]"' in tests and "cd bench" in tests


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, tests = _setup_commands()
    ci_lines = [line.strip() for line in _read(".ci", "run").splitlines()]
    assert tests.strip() in ci_lines


def test_the_module_table_names_every_module() -> None:
    """"How it is built" names every module of the package, where it lives."""
    section = _read("README.md").split("## How it is built", 1)[1].split("\n## ", 1)[0]
    package = os.path.join(ROOT, "asynciocomm")
    missing = []
    for folder, _, files in os.walk(package):
        for name in files:
            if not name.endswith(".py") or name.startswith("_c") or name == "__init__.py":
                continue
            rel = os.path.relpath(os.path.join(folder, name), package)
            sub = os.path.dirname(rel)
            named = f"`{name}`" in section or f"/{name}`" in section
            if not named or (sub and f"`asynciocomm/{sub}/`" not in section):
                missing.append(rel)
    assert not missing, missing
