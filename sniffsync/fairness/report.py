"""Writers of the fairness report from :func:`sniffsync.fairness.core.fairness_tables`
output: the JSON report, the text table of flows, the CSV tables.

The JSON is byte for byte what ``json.dump(report, fh, indent=1, default=str)`` writes
for the records of the report's DataFrames (NaN as null), but each column is formatted
in one pass and each record from a template: no dict per row, no json encoder walk.
"""
from __future__ import annotations

import json
import os

import numpy as np

from sniffsync.fairness import CSV_TABLES

from sniffsync.fairness.core import PROTO_NAMES
from sniffsync.io.atomic import atomic_output

__all__ = ["REPORT_TABLES", "report_columns", "write_json", "flow_lines", "write_csv"]

REPORT_TABLES = ("flows", "windows", "jain", "cdf", "stations")
MIN_RATE_SPAN_NS = 1_000_000    # a flow's rate over a shorter span is not printed (n/a)


def _texts(codes: np.ndarray, names) -> np.ndarray:
    lut = np.array([str(x) for x in names] + [None], dtype=object)
    return lut[np.where(codes >= 0, codes, len(names))]


def report_columns(run: dict, name: str) -> dict:
    """One run's table with its text columns as str (object arrays)."""
    t = dict(run[name])
    if name == "flows" and "ta" in t:     # MAC text, as every MAC column
        from sniffsync.decode.macs import int_mac_texts
        t["ta"] = int_mac_texts(t["ta"])
    if name == "flows":
        t["proto"] = np.array([PROTO_NAMES.get(int(p)) for p in t["proto"]], dtype=object)
        for c in ("src", "dst"):
            t[c] = _texts(t[c], run["names"])
    return t


def _json_values(v) -> list:
    """JSON text of every value of a column, as json.dumps gives them."""
    v = np.asarray(v)
    if v.dtype == bool:
        return np.where(v, "true", "false").tolist()
    if v.dtype.kind in "iu":
        return list(map(str, v.tolist()))
    if v.dtype.kind == "f":
        out = list(map(float.__repr__, v.tolist()))
        for i in np.flatnonzero(~np.isfinite(v)):
            out[i] = "null" if np.isnan(v[i]) else ("Infinity" if v[i] > 0 else "-Infinity")
        return out
    memo = {None: "null"}
    return [memo[x] if x in memo else memo.setdefault(x, json.dumps(x)) for x in v.tolist()]


def _records(runs: list, name: str) -> str:
    """The table's records over all runs (``run`` column last), at indent level 1."""
    keys, cols = None, []
    for r, run in enumerate(runs):
        t = report_columns(run, name)
        n = len(next(iter(t.values()))) if t else 0
        if not n:
            continue
        t["run"] = np.full(n, r, np.int64)
        keys = keys or list(t)
        cols.append([_json_values(t[k]) for k in keys])
    if not cols:
        return "[]"
    tmpl = "  {" + ",".join(f"\n   {json.dumps(k)}: %s" for k in keys) + "\n  }"
    rows = [tmpl % row for part in cols for row in zip(*part)]
    return "[\n" + ",\n".join(rows) + "\n ]"


def write_json(fh, runs: list, summary: dict) -> None:
    """The JSON report: summary, then flows, windows, jain, cdf, stations records."""
    fh.write('{\n "summary": ' + json.dumps(summary, indent=1, default=str).replace("\n", "\n "))
    for name in REPORT_TABLES:
        fh.write(f',\n "{name}": ' + _records(runs, name))
    fh.write("\n}")


def _rate(c: dict) -> str:
    """Goodput rate of a flow direction over its active span, Mb/s; n/a when the span is
    shorter than :data:`MIN_RATE_SPAN_NS` (one datagram would give any number)."""
    dur = c["last_ns"] - c["first_ns"]
    return "n/a" if c["first_ns"] < 0 or dur < MIN_RATE_SPAN_NS else f"{c['goodput_bytes'] * 8e3 / dur:.2f}"


def flow_lines(runs: list) -> list[str]:
    """The text table of flow directions that sent payload (or had bytes inferred)."""
    head = (f"{'run':>3} {'flow':>4} {'dir':>3} {'proto':5} {'source':>21} {'destination':>21} "
            f"{'goodput Mb/s':>12} {'bytes':>10} {'inferred':>9} {'retx':>5} {'fast':>4} {'rto':>4} {'ooo':>4} "
            f"{'MACdup':>6} {'RTT p50 ms':>10}")
    lines = [head]
    for r, run in enumerate(runs):
        t = report_columns(run, "flows")
        for i in np.flatnonzero((t["bytes"] > 0) | (t["goodput_bytes"] > 0)):
            c = {k: v[i].item() if hasattr(v[i], "item") else v[i] for k, v in t.items()}
            rtt_ms = c["rtt_median_ns"] / 1e6 if c["rtt_median_ns"] >= 0 else float("nan")
            src, dst = (f"{'nan' if c[a] is None else c[a]}:{c[p]}" for a, p in (("src", "sport"), ("dst", "dport")))
            lines.append(
                f"{r:>3} {c['flow']:>4} {c['dir']:>3} {c['proto']:5} {src:>21} "
                f"{dst:>21} {_rate(c):>12} {c['bytes']:>10} {c['inferred_bytes']:>9} "
                f"{c['retransmissions']:>5} {c['retx_fast']:>4} {c['retx_timeout']:>4} {c['out_of_order']:>4} "
                f"{c['mac_duplicates']:>6} {rtt_ms:>10.2f}")
    return lines


def write_csv(folder: str, runs: list, summary: dict) -> None:
    """flows.csv, windows.csv, jain.csv, rtt.csv (through the pandas API tables)."""
    from sniffsync.fairness.frames import result_frames
    res = result_frames(runs, summary)
    os.makedirs(folder, exist_ok=True)
    for name in CSV_TABLES:
        with atomic_output(os.path.join(folder, f"{name}.csv"), "w") as fh:
            getattr(res, name).to_csv(fh, index=False)
