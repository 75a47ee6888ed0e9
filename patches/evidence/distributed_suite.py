"""The drafts as distributed's CI would run them: distributed's own tests, in
distributed's order, in one pytest process, on the release the drafts are
against with all of them applied.

The distributed sdist has no tests. A git snapshot of distributed (the tests,
distributed's conftest.py, pytest_resourceleaks.py and pytest config) is
overlaid with the sdist's files (distributed's sources, pyproject.toml), then
every patch in patches/ is applied in order with ``git apply -p1``. The
snapshot differs from the release's sources only in the files this script
lists (``_version.py``, ``node.py``, ``scheduler.py``, ``worker.py`` and the
dask pin in pyproject.toml, for the one given in patches/README.md); it
prints them so a different snapshot shows at once.

    python patches/evidence/distributed_suite.py DIR            # build and run, patched
    python patches/evidence/distributed_suite.py DIR --pristine # the same, no patches
    python patches/evidence/distributed_suite.py DIR --build-only
    python patches/evidence/distributed_suite.py --compare PATCHED_DIR PRISTINE_DIR

(the last lists every test that failed, errored or leaked in either run, and
whether it did so with the patches only: stock is the oracle)

``--python`` names the interpreter that runs pytest (default: this one). It
needs dask (the version the release pins), distributed's dependencies and its
test dependencies (pytest, pytest-timeout, pytest-rerunfailures, ...); the
tree itself is put first on PYTHONPATH, and the run checks that the
distributed it imports is the tree's. The snapshot is ``--snapshot`` (a git
dir; default ``$DISTRIBUTED_GIT_DIR`` or /work/.mirror/dask+distributed/repo),
the sdist ``--sdist`` (default: as bench/tests/test_patches.py finds it).

pytest runs from DIR with distributed's own config (pyproject.toml's
``[tool.pytest.ini_options]``: ``-p no:asyncio``, warnings as errors, 300 s
timeouts) and its conftest.py, with the options of distributed's CI task
``test-ci`` (pixi.toml) but coverage: ``--runslow --leaks=fds,processes,threads``,
and pytest-timeout's ``signal`` method, as the CI workflow sets it on Linux.
The selection (SELECTION below) is ordered as ``pytest distributed`` collects
it, so what runs before what is what it is in distributed's CI; every test file
the patches add is in it, at its place.

The summary (command, counts, each failure or error with its last message
line) is printed and, with ``--out``, written to a file; the whole pytest
output is DIR/pytest-stdout.log.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATCHES_DIR = ROOT / "patches"
PATCHES = sorted(PATCHES_DIR.glob("[0-9][0-9][0-9][0-9]-*.patch"))
DEFAULT_SNAPSHOT = "/work/.mirror/dask+distributed/repo"

#: distributed's test modules run, besides every test file the patches add.
#: What the drafts touch: the comms and their registry (0001-0006, 0010), the
#: protocol (0008, 0009; test_pickle.py registers a module by value and never
#: unregisters it), BatchedSend (0011), Server/rpc/ConnectionPool (0001, 0005),
#: the context meters (0007), utils_test's LockedComm (0010), the worker's
#: listener and default_host (0002), the scheduler's jupyter listener (0006;
#: test_jupyter.py skips without jupyter_server), and test_client.py, where
#: scatter, gather and compute send data through dask_dumps (0008, 0009) and
#: BatchedSend (0011) on real clusters. test_scheduler.py (about 500 tests more)
#: and deploy/ are left out to keep one run near 20 minutes on 2 cores: the
#: scheduler's listener code that 0006 changes runs in every cluster test here.
SELECTION = [
    "distributed/comm/tests",
    "distributed/protocol/tests",
    "distributed/tests/test_batched.py",
    "distributed/tests/test_client.py",
    "distributed/tests/test_core.py",
    "distributed/tests/test_jupyter.py",
    "distributed/tests/test_metrics.py",
    "distributed/tests/test_utils_comm.py",
    "distributed/tests/test_utils_test.py",
    "distributed/tests/test_worker.py",
]

#: distributed's CI task test-ci (pixi.toml), without coverage and junit
CI_OPTIONS = ["--runslow", "--leaks=fds,processes,threads"]


def _base_version() -> str:
    text = (PATCHES_DIR / "README.md").read_text()
    m = re.search(r"against the \*\*distributed ([0-9][0-9.]*) sdist\*\*", text)
    if not m:
        sys.exit("patches/README.md does not name the distributed sdist")
    return m.group(1)


def _find_sdist(version: str) -> Path:
    """As bench/tests/test_patches.py finds it (bench/common/sdist.py)"""
    spec = importlib.util.spec_from_file_location(
        "_sdist", ROOT / "bench" / "common" / "sdist.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path, how = mod.fetch(version)
    if path is None:
        sys.exit(f"no distributed {version} sdist: {how}")
    return path


def _git(*args, git_dir: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, **kwargs)


def build(dest: Path, snapshot: str, sdist: Path, version: str, pristine: bool) -> list[str]:
    """Snapshot tests + sdist files (+ patches) in dest; returns notes for the record"""
    notes = []
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    head = _git("rev-parse", "HEAD", git_dir=snapshot, capture_output=True,
                text=True).stdout.strip()
    when = _git("log", "-1", "--format=%cI", "HEAD", git_dir=snapshot,
                capture_output=True, text=True).stdout.strip()
    notes.append(f"snapshot: {snapshot} HEAD {head} ({when})")
    archive = _git("archive", "--format=tar", "HEAD", git_dir=snapshot,
                   capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tf:
        tf.extractall(dest, filter="data")

    # the sdist's files over the snapshot's, noting which differ
    prefix = f"distributed-{version}/"
    differ, only_sdist, same = [], [], 0
    with tarfile.open(sdist) as tf:
        members = [m for m in tf.getmembers() if m.name.startswith(prefix)]
        for m in members:
            m.name = m.name[len(prefix):]
            if not m.isfile():
                continue
            ours = dest / m.name
            if not ours.is_file():
                only_sdist.append(m.name)
            elif ours.read_bytes() != tf.extractfile(m).read():
                differ.append(m.name)
            else:
                same += 1
        tf.extractall(dest, members=members, filter="data")
    notes.append(f"sdist: {sdist}, over the snapshot: {same} files identical, "
                 f"{len(differ)} differ ({', '.join(differ)}), "
                 f"{len(only_sdist)} only in the sdist ({', '.join(only_sdist)})")
    test_dirs = [
        str(p.relative_to(dest)) for p in (dest / "distributed").rglob("tests")
        if p.is_dir()
    ]
    notes.append(f"test directories (from the snapshot): {len(test_dirs)}")

    # distributed's CI on Linux: pytest-timeout's signal method
    pyproject = dest / "pyproject.toml"
    text = pyproject.read_text()
    assert 'timeout_method = "thread"' in text
    pyproject.write_text(text.replace('timeout_method = "thread"', 'timeout_method = "signal"'))

    if not pristine:
        env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(dest.parent))
        for patch in PATCHES:
            proc = subprocess.run(["git", "apply", "-p1", str(patch)], cwd=dest, env=env,
                                  capture_output=True, text=True)
            if proc.returncode:
                sys.exit(f"{patch.name} does not apply: {proc.stderr}")
        notes.append(f"patches applied in order: {', '.join(p.stem[:4] for p in PATCHES)}")
    else:
        notes.append("pristine: no patches")
    return notes


def added_test_files() -> list[str]:
    """The test files the patches create"""
    files = []
    for patch in PATCHES:
        text = patch.read_text()
        for m in re.finditer(r"^diff --git a/(\S+) b/\S+\nnew file mode", text, re.M):
            if re.search(r"/tests/test_[^/]+\.py$", m.group(1)):
                files.append(m.group(1))
    return files


def collection_order(paths: list[str], tree: Path) -> list[str]:
    """The files under paths, ordered as ``pytest distributed`` collects them
    (each directory's entries sorted by name)"""
    files = set()
    for p in paths:
        full = tree / p
        if full.is_dir():
            files.update(str(f.relative_to(tree)) for f in full.rglob("test_*.py"))
        elif full.is_file():
            files.add(p)
    return sorted(files, key=lambda f: Path(f).parts)


def summarize(stdout: str) -> tuple[str, list[str]]:
    counts = ""
    for line in stdout.splitlines()[::-1]:
        if re.search(r"\d+ (passed|failed|error)", line) and " in " in line:
            counts = line.strip("= ")
            break
    failures = []
    for line in stdout.splitlines():
        m = re.match(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$", line)
        if m:
            failures.append(f"{m.group(1)} {m.group(2)}: {(m.group(3) or '')[:300]}")
    # pytest_resourceleaks.py's section: "<nodeid> leaking <what>: <detail>"
    section = re.search(r"^=+ RESOURCE LEAKS =+\n(.*?)^=", stdout, re.M | re.S)
    for line in (section.group(1).splitlines() if section else []):
        failures.append(f"LEAKED {line}")
    return counts, failures


def _outcomes(log: Path) -> dict[str, str]:
    """nodeid -> the outcome distributed's order gave it (last one wins), and
    LEAKED for the tests pytest_resourceleaks reported"""
    text = log.read_text()
    got = {}
    for m in re.finditer(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", text, re.M):
        got[m.group(1)] = m.group(2)
    for line in summarize(text)[1]:
        if line.startswith("LEAKED "):
            nodeid = line.split()[1]
            got[nodeid + " (leak)"] = "LEAKED"
    return got


def compare(patched: Path, pristine: Path) -> str:
    """What failed, errored or leaked with the patches and not without them"""
    a, b = _outcomes(patched / "pytest-stdout.log"), _outcomes(pristine / "pytest-stdout.log")
    bad = {"FAILED", "ERROR", "LEAKED"}
    lines = []
    for nodeid in sorted(set(a) | set(b)):
        x, y = a.get(nodeid, "not run"), b.get(nodeid, "not run")
        if x in bad or y in bad:
            tag = ("patched only" if y not in bad else "pristine only" if x not in bad
                   else "both")
            lines.append(f"{tag:13} patched {x:7} pristine {y:7} {nodeid}")
    only = sum(l.startswith("patched only") for l in lines)
    head = (f"# compare: {only} failing/erroring/leaking with the patches only, "
            f"{sum(l.startswith('both') for l in lines)} in both, "
            f"{sum(l.startswith('pristine only') for l in lines)} pristine only")
    return "\n".join([head, *lines]) + "\n"


def main() -> None:
    if sys.argv[1:2] == ["--compare"]:
        if len(sys.argv) != 4:
            sys.exit("usage: distributed_suite.py --compare PATCHED_DIR PRISTINE_DIR")
        print(compare(Path(sys.argv[2]), Path(sys.argv[3])), end="")
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="where to build the tree (replaced)")
    ap.add_argument("--pristine", action="store_true", help="apply no patches")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    ap.add_argument("--snapshot", default=os.environ.get("DISTRIBUTED_GIT_DIR", DEFAULT_SNAPSHOT))
    ap.add_argument("--sdist", type=Path)
    ap.add_argument("--out", type=Path, help="also write the summary here")
    ap.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = ap.parse_args()

    version = _base_version()
    sdist = args.sdist or _find_sdist(version)
    tree = args.dir.resolve()
    notes = build(tree, args.snapshot, sdist, version, args.pristine)
    for n in notes:
        print(n)
    if args.build_only:
        return

    added = added_test_files()
    if not args.pristine:
        absent = [f for f in added if not (tree / f).is_file()]
        assert not absent, absent
    files = collection_order(SELECTION + (added if not args.pristine else []), tree)
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONUNBUFFERED="1",
               COLUMNS="1000")  # pytest cuts the short summary's messages to the width
    for var in [v for v in env if v.startswith(("DASK_", "PYTEST_"))]:
        del env[var]
    where = subprocess.run(
        [args.python, "-c", "import dask, distributed; print(distributed.__file__, "
         "distributed.__version__, dask.__version__)"],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert where[0].startswith(str(tree)), f"imports the wrong distributed: {where[0]}"
    notes.append(f"distributed {where[1]} from the tree, dask {where[2]}, {args.python}")
    cmd = [args.python, "-m", "pytest", *CI_OPTIONS, "--color=no", "-p", "no:cacheprovider",
           *args.pytest_args, *files]
    print(f"running {len(files)} test files in {tree}")
    t0 = time.monotonic()
    with open(tree / "pytest-stdout.log", "w") as log:  # as it goes, to follow it
        proc = subprocess.run(cmd, cwd=tree, env=env, stdout=log,
                              stderr=subprocess.STDOUT, text=True)
    elapsed = time.monotonic() - t0
    counts, failures = summarize((tree / "pytest-stdout.log").read_text())
    display = [shlex.quote(c) for c in cmd]
    display[0] = os.path.basename(args.python)
    report = [
        f"# distributed_suite.py {'--pristine ' if args.pristine else ''}{args.dir}",
        *[f"# {n}" for n in notes],
        f"# in {tree}, PYTHONPATH={tree}:",
        " ".join(display),
        f"exit status {proc.returncode}, {elapsed / 60:.1f} min wall",
        f"result: {counts}",
        *failures,
    ]
    text = "\n".join(report) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
