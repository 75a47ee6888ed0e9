"""Writing a run's result document with its report and plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def publish(doc: dict[str, Any], out: Path, *, plots: bool = True, echo: bool = True) -> str:
    """Save ``results.json``, the plots and ``report.md`` into ``out``; print the
    report when ``echo``, and always the two paths. Returns the markdown."""
    from asynciocomm_bench.common import results
    from asynciocomm_bench.report import markdown
    from asynciocomm_bench.report import plots as plotting

    results.save(doc, out)
    pl = plotting.render_all(doc, out) if plots else {}
    md = markdown.render(doc, pl)
    (out / "report.md").write_text(md)
    if echo:
        print("\n" + md, end="", flush=True)
    print(f"results: {out / 'results.json'}, report: {out / 'report.md'}")
    return md
