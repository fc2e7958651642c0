"""Optional PNG: one panel per suite, TFLOPS bars per case per peer, speedup markers of the best finegemm
peer over cuBLAS blockwise on a second axis. Needs matplotlib; without it the caller gets a reason string.
"""

from __future__ import annotations

from .runner import CaseResult

RATIO_PEER = "cublas-block"


def plot(results: list[CaseResult], path: str, title: str) -> str | None:
    """Write the figure to ``path``; returns None, or why nothing was written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed"
    suites: dict[str, list[CaseResult]] = {}
    for cr in results:
        if any(r.status in ("ok", "fail") for r in cr.results.values()):
            suites.setdefault(cr.case.suite, []).append(cr)
    if not suites:
        return "no timed results to plot"
    fig, axes = plt.subplots(len(suites), 1, figsize=(max(10, 0.9 * max(len(v) for v in suites.values())),
                                                      4.5 * len(suites)), squeeze=False)
    for ax, (suite, crs) in zip(axes[:, 0], suites.items()):
        peers = [n for n in dict.fromkeys(n for cr in crs for n in cr.results)
                 if any(cr.results.get(n) and cr.results[n].timing for cr in crs)]
        width = 0.8 / max(1, len(peers))
        for j, name in enumerate(peers):
            vals = [cr.metrics(name)["TFLOPS"] or 0.0 for cr in crs]
            xs = [i + (j - (len(peers) - 1) / 2) * width for i in range(len(crs))]
            ax.bar(xs, vals, width, label=name)
        ax.set_xticks(range(len(crs)))
        ax.set_xticklabels([cr.case.name for cr in crs], rotation=45, ha="right", fontsize=7)
        ax.set_ylabel("TFLOPS")
        ax.set_title(f"{title}: {suite}")
        ours = [n for n in peers if crs[0].ours.get(n)]
        ratios = []
        for cr in crs:
            best = [s for n in ours if (s := cr.speedup(n, RATIO_PEER)) is not None]
            ratios.append(max(best) if best else None)
        if any(r is not None for r in ratios):
            twin = ax.twinx()
            pts = [(i, r) for i, r in enumerate(ratios) if r is not None]
            twin.plot([p[0] for p in pts], [p[1] for p in pts], "kD", markersize=5, label=f"finegemm / {RATIO_PEER}")
            twin.axhline(1.0, color="k", linewidth=0.6, linestyle="--")
            twin.set_ylabel(f"speedup over {RATIO_PEER}")
            twin.set_ylim(0, max(1.5, max(p[1] for p in pts) * 1.15))
            twin.legend(loc="upper right", fontsize=7)
        ax.legend(loc="upper left", fontsize=7, ncol=min(3, len(peers)))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
