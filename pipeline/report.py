"""A self-contained HTML report (matplotlib PNGs inlined as base64) and a terminal summary."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import pandas as pd

TOP = 20  # groups shown in the bar charts / tables


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def _bars(plt, df: pd.DataFrame, column: str, title: str) -> str:
    fig, ax = plt.subplots(figsize=(8, 0.3 * min(len(df), TOP) + 1.2))
    if len(df):
        top = df.nlargest(TOP, column).sort_values(column)
        ax.barh(top["group"].astype(str), top[column])
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    return _png(fig)


def plots(frames: dict[str, pd.DataFrame]) -> dict[str, str]:
    """Base64 PNGs: lag per group, rebalances per group, commit rate over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {"lag per group": _bars(plt, frames["consumer_lag_totals"], "total_lag",
                                  f"Consumer lag per group (messages, top {TOP})"),
           "rebalances per group": _bars(plt, frames["rebalance_summary"], "rebalances",
                                         f"Rebalances (generations) per group (top {TOP})")}
    rate = frames["commit_rate"]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    if len(rate):
        busiest = rate.groupby("group")["commits"].sum().nlargest(10).index
        wide = rate[rate["group"].isin(busiest)].pivot_table(index="minute", columns="group", values="commits",
                                                             aggfunc="sum")
        for group in wide.columns:
            ax.plot(wide.index, wide[group], marker=".", label=str(group))
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1, 1))
        fig.autofmt_xdate()
    ax.set_title("Offset commits per minute (10 busiest groups)")
    out["commit rate"] = _png(fig)
    plt.close("all")
    return out


def _table(df: pd.DataFrame, limit: int = 50) -> str:
    more = f"<p>{len(df) - limit} more rows in the Parquet output.</p>" if len(df) > limit else ""
    return df.head(limit).to_html(index=False, border=0, classes="t") + more


def write_html(path: Path, summary: dict[str, object], frames: dict[str, pd.DataFrame],
               images: dict[str, str]) -> None:
    parts = ["<!doctype html><meta charset=utf-8><title>Consumer groups report</title>",
             "<style>body{font-family:sans-serif;margin:2em}.t td,.t th{padding:2px 8px;text-align:right}"
             "img{max-width:100%}</style><h1>Consumer groups report</h1><table class=t>"]
    parts += [f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in summary.items()]
    parts.append("</table>")
    for name, b64 in images.items():
        parts.append(f"<h2>{html.escape(name)}</h2><img alt='{html.escape(name)}' src='data:image/png;base64,{b64}'>")
    for name, df in frames.items():
        title = "rebalances in a storm" if name == "rebalance_timeline" else name.replace("_", " ")
        parts.append(f"<h2>{html.escape(title)}</h2>{_table(df)}")
    path.write_text("".join(parts))


def terminal_summary(summary: dict[str, object], frames: dict[str, pd.DataFrame], errors: list[str]) -> str:
    lines = [f"{k:>28}: {v}" for k, v in summary.items()]
    lines += [f"{'':>28}  {e}" for e in errors[:10]]
    lag, reb = frames["consumer_lag_totals"], frames["rebalance_summary"]
    if len(lag) or len(reb):
        merged = lag.merge(reb, on="group", how="outer").fillna({"partitions": 0, "total_lag": 0, "rebalances": 0})
        merged = merged.sort_values("total_lag", ascending=False).head(TOP)
        lines.append(f"\n{'group':<32} {'partitions':>10} {'total lag':>12} {'rebalances':>10} {'storm':>6}")
        for r in merged.itertuples():
            lines.append(f"{str(r.group):<32} {int(r.partitions):>10} {int(r.total_lag):>12} {int(r.rebalances):>10} "
                         f"{'YES' if r.storm is True else '':>6}")
        if len(lag) > TOP:
            lines.append(f"... {len(lag) - TOP} more groups (by lag) in consumer_lag_totals")
    return "\n".join(lines)
