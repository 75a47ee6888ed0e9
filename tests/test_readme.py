"""The README's set-up commands stay true: CI runs exactly the documented test
command, and the documented entry points exist."""

from __future__ import annotations

import os
import re
import sys

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
    assert "pip install" in tests and tests.endswith("nox")  # every session of the matrix


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


def _nox_sessions() -> list[str]:
    """The sessions ``nox`` runs by default, read from noxfile.py with a stand-in
    for nox (the product's suite does not install it)."""
    import types

    fake = types.ModuleType("nox")
    fake.options = types.SimpleNamespace()  # type: ignore[attr-defined]
    fake.Session = object  # type: ignore[attr-defined]
    fake.session = lambda *a, **k: (lambda f: f)  # type: ignore[attr-defined]
    saved = sys.modules.get("nox")
    sys.modules["nox"] = fake
    try:
        namespace: dict = {"__name__": "noxfile"}
        exec(compile(_read("noxfile.py"), "noxfile.py", "exec"), namespace)
    finally:
        if saved is None:
            del sys.modules["nox"]
        else:
            sys.modules["nox"] = saved
    return list(fake.options.sessions)


def test_the_readme_lists_every_session_ci_runs_with_its_minutes() -> None:
    section = _read("README.md").split("### Pythons and platforms", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(2) for m in
            re.finditer(r"^\| `([a-z0-9.-]+)` \|.*\| (\d+) min \|$", section, re.M)}
    sessions = _nox_sessions()
    assert len(sessions) >= 6
    assert sorted(rows) == sorted(sessions)
