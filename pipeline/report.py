"""report.html, one self-contained file (interactive plotly charts, plotly.js inlined once, so it
works offline), rendered from the jinja2 template beside this module; and the terminal summary."""

from __future__ import annotations

import functools
import itertools
from pathlib import Path
from typing import Any, cast

import pandas as pd
from markupsafe import Markup, escape

TOP = 10  # groups charted per section
ROWS = 200  # rows per table; the Parquet outputs have them all
SECTIONS = [
    ("summary", "Summary"),
    ("status", "Lag status"),
    ("lag", "Lag over time"),
    ("owners", "Membership"),
    ("rebalances", "Rebalances"),
    ("rate", "Commit rate"),
    ("share", "Share groups"),
    ("bad", "Bad batches"),
]


def _table(df: pd.DataFrame, limit: int = ROWS) -> Markup:
    if not len(df):
        return Markup("<p>None.</p>")
    more = f"<p>{len(df) - limit} more rows in the Parquet output.</p>" if len(df) > limit else ""
    return Markup(df.head(limit).to_html(index=False, border=0, classes="t", escape=True) + more)


def _status_table(df: pd.DataFrame) -> Markup:
    if not len(df):
        return Markup("<p>None.</p>")
    head = "".join(f"<th>{escape(c)}</th>" for c in df.columns)
    rows = []
    for r in df.head(ROWS).itertuples(index=False):
        cells = "".join(
            f'<td class="status-{escape(v)}">{escape(v)}</td>' if c == "status" else f"<td>{escape(v)}</td>"
            for c, v in zip(df.columns, r)
        )
        rows.append(f"<tr>{cells}</tr>")
    return Markup(f'<table class="t"><tr>{head}</tr>{"".join(rows)}</table>')


@functools.cache
def _template() -> dict[str, Any]:
    """plotly's default look, which graph objects would have added."""
    import plotly.io as pio

    return cast("dict[str, Any]", pio.templates["plotly"].to_plotly_json())


def _chart(traces: list[dict[str, Any]], title: str, x: str, y: str, height: int = 360, **layout: Any) -> Markup:
    """A plotly figure from plain dicts, not validated: building graph objects for a few
    thousand traces, each property checked, would cost the job seconds."""
    import plotly.io as pio

    figure = {
        "data": traces,
        "layout": {
            "title": {"text": title},
            "height": height,
            "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
            "legend": {"title": {"text": ""}},
            "template": _template(),
            **layout,
            "xaxis": {"title": {"text": x}, **layout.get("xaxis", {})},
            "yaxis": {"title": {"text": y}, **layout.get("yaxis", {})},
        },
    }
    return Markup(
        pio.to_html(figure, full_html=False, include_plotlyjs=False, validate=False, config={"displaylogo": False})
    )


def _times(column: pd.Series) -> list[str]:
    return cast("list[str]", column.dt.strftime("%Y-%m-%d %H:%M:%S.%f").tolist())


def lag_charts(history: pd.DataFrame, totals: pd.DataFrame) -> list[Any]:
    history = history[history["lag"].notna()]  # (partitions without a topic log here)
    if not len(history):
        return []
    lagging = totals.sort_values("total_lag", ascending=False)["group"].tolist() if len(totals) else []
    groups = [g for g in lagging if g in set(history["group"])][:TOP]
    out = []
    hover = (
        "%{x}<br>lag %{y} messages, %{customdata[0]:.1f} s<br>committed %{customdata[1]}, "
        "log end %{customdata[2]}<extra>%{fullData.name}</extra>"
    )
    for group in groups:
        rows = history[history["group"] == group].sort_values(["topic", "partition", "commit_time"])
        # Split into lines in plain Python: a pandas selection per partition costs a millisecond.
        custom = rows[["lag_seconds", "committed_offset", "log_end_offset"]].to_numpy().tolist()
        points = zip(
            rows["topic"].tolist(),
            rows["partition"].tolist(),
            _times(rows["commit_time"]),
            rows["lag"].tolist(),
            custom,
        )
        traces = []
        for (topic, partition), line in itertools.groupby(points, key=lambda p: (p[0], p[1])):
            _, _, x, y, data = zip(*line)
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"{topic}-{partition}",
                    "x": x,
                    "y": y,
                    "customdata": data,
                    "hovertemplate": hover,
                }
            )
        out.append(_chart(traces, f"{group}: lag per partition", "commit time (UTC)", "lag (messages)"))
    return out


def ownership_charts(owners: pd.DataFrame, end: pd.Timestamp | None) -> list[Any]:
    """A timeline per group: each partition's bars, coloured by owner, from its generation's
    record to the next generation's (the last one to the end of the data)."""
    if not len(owners):
        return []
    busiest = owners.groupby("group")["generation"].nunique().sort_values(ascending=False).index[:TOP]
    hover = ["generation", "member_id", "client_host", "group_instance_id"]
    out = []
    for group in busiest:
        rows = owners[owners["group"] == group].copy()
        starts = rows[["generation", "since"]].drop_duplicates().sort_values("since")
        following = dict(zip(starts["generation"], list(starts["since"].iloc[1:]) + [end or starts["since"].max()]))
        rows["until"] = rows["generation"].map(following)
        rows["until"] = rows[["since", "until"]].max(axis=1) + pd.Timedelta(milliseconds=1)  # (visible when equal)
        rows["partition_name"] = rows["topic"] + "-" + rows["partition"].astype(str)
        rows["owner"] = rows["client_id"].fillna("") + " " + rows["member_id"].str.slice(0, 12)
        rows = rows.sort_values("partition_name")
        # A bar per partition and generation, from `since` (its base) for its duration in ms,
        # on a date axis: what plotly express's timeline draws, one trace per owner.
        hovertemplate = (
            "%{y}: %{customdata[0]} to %{customdata[1]}<br>"
            + "<br>".join(f"{name} %{{customdata[{i + 2}]}}" for i, name in enumerate(hover))
            + "<extra>%{fullData.name}</extra>"
        )
        traces = []
        for owner, part in rows.groupby("owner", sort=True):
            since, until = _times(part["since"]), _times(part["until"])
            details = part[hover].astype(object).where(part[hover].notna(), "").to_numpy().tolist()
            traces.append(
                {
                    "type": "bar",
                    "orientation": "h",
                    "name": owner,
                    "showlegend": True,
                    "base": since,
                    "x": ((part["until"] - part["since"]) / pd.Timedelta(milliseconds=1)).tolist(),
                    "y": part["partition_name"].tolist(),
                    "hovertemplate": hovertemplate,
                    "customdata": [[s, u, *d] for s, u, d in zip(since, until, details)],
                }
            )
        out.append(
            _chart(
                traces,
                f"{group}: owners per partition",
                "time (UTC)",
                "partition",
                height=140 + 22 * rows["partition_name"].nunique(),
                barmode="overlay",
                xaxis={"type": "date"},
                yaxis={
                    "autorange": "reversed",
                    "categoryorder": "array",
                    "categoryarray": sorted(rows["partition_name"].unique()),
                },
            )
        )
    return out


def rate_chart(rate: pd.DataFrame) -> Markup:
    if not len(rate):
        return Markup("<p>No commits.</p>")
    minutes = sorted(rate["minute"].unique())
    whole = rate[~rate["minute"].isin(minutes[:1] + minutes[-1:])] if len(minutes) > 2 else rate.iloc[0:0]
    if not len(whole):
        return Markup("<p>Less than three minutes of commits: no whole minute to show.</p>")
    busiest = whole.groupby("group")["commits"].sum().nlargest(TOP).index
    traces = []
    for group in busiest:
        rows = whole[whole["group"] == group].sort_values("minute")
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": str(group),
                "x": _times(rows["minute"]),
                "y": rows["commits"].tolist(),
                "customdata": rows[["batches"]].to_numpy().tolist(),
                "hovertemplate": "%{x}<br>%{y} commits in %{customdata[0]} batches<extra>%{fullData.name}</extra>",
            }
        )
    return _chart(
        traces,
        f"Offset commits per minute ({len(busiest)} busiest groups)",
        "minute (UTC)",
        "commit records per minute",
    )


def write_html(
    path: Path, summary: dict[str, object], frames: dict[str, pd.DataFrame], lag_window: int = 10, as_of: str = ""
) -> None:
    import jinja2
    from plotly.offline import get_plotlyjs

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    status = frames["lag_status"]
    timeline = frames["rebalance_timeline"].copy()
    for column in ("member_ids", "joined", "left"):
        if column in timeline:
            timeline[column] = timeline[column].map(lambda ids: ", ".join(map(str, ids)) if ids is not None else "")
    end = None
    for frame, column in ((frames["lag_history"], "commit_time"), (frames["ownership"], "since")):
        if len(frame):
            end = max(end, frame[column].max()) if end is not None else frame[column].max()
    html = env.get_template("report.html.j2").render(
        plotly_js=Markup(f'<script type="text/javascript">{get_plotlyjs()}</script>'),
        sections=SECTIONS,
        summary=summary,
        lag_window=lag_window,
        as_of=as_of,
        top=TOP,
        tables={
            "status_groups": _status_table(frames["lag_status_groups"]),
            "status_partitions": _status_table(status[status["status"] != "OK"] if len(status) else status),
            "rebalances": _table(timeline.sort_values(["group", "generation"]) if len(timeline) else timeline),
            "share": _table(frames["share_progress"]),
            "bad_batches": _table(frames["bad_batches"]),
        },
        charts={
            "lag": lag_charts(frames["lag_history"], frames["consumer_lag_totals"]),
            "owners": ownership_charts(frames["ownership"], end),
            "rate": rate_chart(frames["commit_rate"]),
        },
    )
    path.write_text(html)


def terminal_summary(summary: dict[str, object], frames: dict[str, pd.DataFrame], errors: list[str]) -> str:
    lines = [f"{k:>28}: {v}" for k, v in summary.items()]
    lines += [f"{'':>28}  {e}" for e in errors[:10]]
    lag, reb = frames["consumer_lag_totals"], frames["rebalance_summary"]
    if len(lag) or len(reb):
        merged = lag.merge(reb, on="group", how="outer").fillna({"partitions": 0, "total_lag": 0, "rebalances": 0})
        merged = merged.sort_values("total_lag", ascending=False).head(20)
        lines.append(f"\n{'group':<32} {'partitions':>10} {'total lag':>12} {'rebalances':>10} {'storm':>6}")
        for r in merged.itertuples():
            lines.append(
                f"{str(r.group):<32} {int(r.partitions):>10} {int(r.total_lag):>12} {int(r.rebalances):>10} "
                f"{'YES' if r.storm is True else '':>6}"
            )
        if len(lag) > 20:
            lines.append(f"... {len(lag) - 20} more groups (by lag) in consumer_lag_totals")
    return "\n".join(lines)
