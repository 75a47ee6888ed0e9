"""The write-path micro bench: it checks every variant's bytes against
distributed's before timing, and leaves asynciocomm's skip as it found it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asynciocomm.serialization import pickling
from asynciocomm_bench.profile import writepath


def test_the_table_has_every_row_and_restores_the_skip(tmp_path: Path) -> None:
    before = pickling.by_value
    assert writepath.main(["--messages", "60", "--reps", "1", "--json",
                           str(tmp_path / "w.json")]) == 0
    assert pickling.by_value is before
    rows = json.loads((tmp_path / "w.json").read_text())["rows"]
    assert len(rows) == 13 and all(len(v) == 2 and v[0] >= 0 for v in rows.values())


def test_bytes_unlike_distributeds_stop_the_bench(monkeypatch) -> None:
    monkeypatch.setattr(pickling, "pickle_dumps", lambda x: (b"not distributed's", []))
    with pytest.raises(RuntimeError, match="unlike"):
        writepath.run(10, 1)


def test_the_local_function_is_pickled_by_value_and_the_module_one_not() -> None:
    from dask._task_spec import Task

    assert pickling.by_value(Task("t", writepath.local_inc(), 1))
    assert not pickling.by_value(Task("t", writepath.module_inc, 1))
