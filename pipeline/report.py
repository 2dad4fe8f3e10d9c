"""A self-contained HTML report (PNG plots inlined) and a terminal summary."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import pandas as pd


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def plots(lag_totals: pd.DataFrame, storms: pd.DataFrame, rate: pd.DataFrame) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    fig, ax = plt.subplots(figsize=(7, 3))
    if not lag_totals.empty:
        lag_totals.sort_values("total_lag").plot.barh(x="group", y="total_lag", ax=ax, legend=False)
    ax.set_title("Consumer lag per group (messages)")
    out["lag"] = _png(fig)
    fig, ax = plt.subplots(figsize=(7, 3))
    if not storms.empty:
        storms.sort_values("rebalances").plot.barh(x="group", y="rebalances", ax=ax, legend=False)
    ax.set_title("Rebalances (generations) per group")
    out["rebalances"] = _png(fig)
    fig, ax = plt.subplots(figsize=(7, 3))
    if not rate.empty:
        rate.pivot_table(index="minute", columns="group", values="commits", aggfunc="sum").plot(ax=ax)
    ax.set_title("Offset commits per minute")
    out["commit_rate"] = _png(fig)
    plt.close("all")
    return out


def table(df: pd.DataFrame, limit: int = 50) -> str:
    return df.head(limit).to_html(index=False, border=0, classes="t")


def write_html(path: Path, summary: dict[str, object], frames: dict[str, pd.DataFrame], images: dict[str, str]) -> None:
    parts = ["<!doctype html><meta charset=utf-8><title>Consumer groups report</title>",
             "<style>body{font-family:sans-serif;margin:2em}.t td,.t th{padding:2px 8px;text-align:right}"
             "img{max-width:100%}</style><h1>Consumer groups report</h1><ul>"]
    parts += [f"<li>{html.escape(k)}: {html.escape(str(v))}</li>" for k, v in summary.items()]
    parts.append("</ul>")
    for name, b64 in images.items():
        parts.append(f"<h2>{html.escape(name.replace('_', ' '))}</h2><img src='data:image/png;base64,{b64}'>")
    for name, df in frames.items():
        parts.append(f"<h2>{html.escape(name.replace('_', ' '))}</h2>{table(df)}")
    path.write_text("".join(parts))


def terminal_summary(summary: dict[str, object], lag_totals: pd.DataFrame, storms: pd.DataFrame) -> str:
    lines = [f"{k:>28}: {v}" for k, v in summary.items()]
    if not lag_totals.empty:
        merged = lag_totals.merge(storms, on="group", how="outer").fillna(0)
        lines.append(f"\n{'group':<30} {'partitions':>10} {'total lag':>10} {'rebalances':>10} {'storm':>6}")
        for r in merged.sort_values("group").itertuples():
            lines.append(f"{r.group:<30} {int(r.partitions):>10} {int(r.total_lag):>10} {int(r.rebalances):>10} "
                         f"{'yes' if r.storm else '':>6}")
    return "\n".join(lines)
