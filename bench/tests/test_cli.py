"""Command-line parsing and the one-line errors for bad schemes and loops."""

from __future__ import annotations

import pytest

from asynciocomm_bench import cli, suites


def test_unknown_scheme_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["comm", "--schemes", "tcp,bogus", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1
    assert "scheme 'bogus' is not available" in err
    assert "Traceback" not in err


def test_unknown_loop_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["cluster", "--loops", "tokio", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "loop 'tokio' is unknown" in err


def test_default_subcommand_is_quick() -> None:
    args = cli.build_parser().parse_args(["quick"])
    assert args.size == "quick"
    for name in ("comm", "cluster", "profile", "quick", "all"):
        a = cli.build_parser().parse_args([name, "--schemes", "tcp,tls", "--loops", "uvloop"])
        assert a.schemes == ["tcp", "tls"] and a.loops == ["uvloop"]


def test_all_runs_tls_in_its_cluster_and_profile_parts_and_scale() -> None:
    every = ["tcp", "tls", "asyncio", "asyncio+tls"]
    assert suites.part_schemes("all", every) == every
    assert suites.part_schemes("quick", every) == ["tcp", "asyncio"]
    args = cli.build_parser().parse_args(["all"])
    assert args.no_scale is False
    assert "scale" in cli.commands()


def test_more_repetitions_than_the_presets_get_a_budget_to_match() -> None:
    """--reps 6 of a 3-repetition preset doubles its time budget, so that the
    budget does not stop the run at the preset's count; fewer keep it."""
    from asynciocomm_bench.common.options import CLUSTER_BOUNDS, COMM_BOUNDS

    full = COMM_BOUNDS["full"]
    assert suites.with_reps(full, None) is full
    six = suites.with_reps(full, 6)
    assert six.reps == 6 and six.budget_s == 2 * full.budget_s
    assert suites.with_reps(full, 2).budget_s == full.budget_s
    cluster = CLUSTER_BOUNDS["full"]
    assert suites.with_reps(cluster, 6).budget_s == 2 * cluster.budget_s


def test_a_budget_given_replaces_the_presets() -> None:
    """--budget sets the time budget whatever the preset and --reps say (a run of
    other sizes than the preset's takes another time per repetition)."""
    from asynciocomm_bench.common.options import COMM_BOUNDS

    args = cli.build_parser().parse_args(["comm", "--reps", "5", "--budget", "2400",
                                          "--only", "bulk", "--bulk", "16MiB,128MiB"])
    bounds = suites.comm_bounds(args)
    assert bounds.reps == 5 and bounds.budget_s == 2400.0
    assert bounds.parts == ("bulk",) and sorted(bounds.bulk) == [16 << 20, 128 << 20]
    plain = suites.comm_bounds(cli.build_parser().parse_args(["comm", "--reps", "6"]))
    assert plain.budget_s == 2 * COMM_BOUNDS["full"].budget_s
