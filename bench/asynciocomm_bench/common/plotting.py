"""What every plot of the bench is drawn with: matplotlib without a display, a
file name from a metric's, the figure written and closed, stacked shares."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend: the bench runs without a display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


def safe_name(name: str) -> str:
    """``name`` with what a file name should not hold replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def save(fig: Any, outdir: Path, fname: str) -> str:
    """Lay out, write and close a figure; returns its file name."""
    fig.tight_layout()
    fig.savefig(outdir / fname, dpi=90)
    pyplot().close(fig)
    return fname


def stacked_shares(outdir: Path, fname: str, labels: list[str],
                   shares: list[dict[str, float]], cats: list[str],
                   title: str | None = None) -> str:
    """Stacked bars, one per label, of the scheduler's sample shares per category."""
    fig, ax = pyplot().subplots(figsize=(max(5.0, 1.3 * len(labels) + 3.5), 4.2))
    bottom = [0.0] * len(labels)
    for cat in cats:
        vals = [100 * sh.get(cat, 0.0) for sh in shares]
        ax.bar(range(len(labels)), vals, bottom=bottom, label=cat)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("% of scheduler MainThread samples")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
    return save(fig, outdir, fname)
