"""DuckDB over a campaign: one view per table, all runs at once, labels as columns.

Each view reads the runs' Parquet files in place (nothing is loaded before a query asks)
and adds ``run`` and one column per label; a label named like a column of the table is
``label_<name>`` in that view. ``runs`` holds one row per run (name, labels, notes,
captures); ``mac(x)`` turns the 48-bit integer MACs of every table into colon-hex text.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["connect", "query"]

_MAC = ("CREATE MACRO mac(x) AS regexp_replace(lpad(lower(hex(x)), 12, '0'), "
        "'(..)(..)(..)(..)(..)(..)', '\\1:\\2:\\3:\\4:\\5:\\6')")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def _runs_table(con, specs, labels: list) -> None:
    import pandas as pd
    df = pd.DataFrame([{"run": s.name, **{k: s.labels.get(k) for k in labels}, "notes": s.notes,
                        "captures": ", ".join(s.captures)} for s in specs])
    for k in labels:       # one label with text in one run and a number in another: text in all
        kinds = {type(v) for v in df[k] if v is not None}
        if len(kinds) > 1:
            df[k] = [None if v is None else str(v) for v in df[k]]
    con.register("_runs_df", df)
    con.execute("CREATE TABLE runs AS SELECT * FROM _runs_df")
    con.unregister("_runs_df")


def connect(specs):
    """An in-memory DuckDB connection with the views of ``specs`` (analysed runs)."""
    import duckdb
    import pyarrow.parquet as pq

    from sniffsync.campaign.store import TABLES
    con = duckdb.connect()
    labels = sorted({k for s in specs for k in s.labels})
    _runs_table(con, specs, labels)
    con.execute(_MAC)
    for view, fname in TABLES.items():
        files = [(s.name, Path(s.cache) / fname) for s in specs if (Path(s.cache) / fname).exists()]
        if not files:
            continue
        schemas = [(run, p, pq.read_schema(p).names) for run, p in files]
        cols = list(dict.fromkeys(c for _, _, names in schemas for c in names if c != "run"))
        union = " UNION ALL BY NAME ".join(
            f"SELECT {_lit(run)} AS run, *{' EXCLUDE (run)' if 'run' in names else ''} "
            f"FROM read_parquet({_lit(p)})" for run, p, names in schemas)
        lab = ", ".join(f"r.{_ident(k)} AS {_ident('label_' + k if k in cols else k)}" for k in labels)
        con.execute(f"CREATE VIEW {_ident(view)} AS SELECT t.run{', ' + lab if lab else ''}, "
                    f"t.* EXCLUDE (run) FROM ({union}) t JOIN runs r USING (run)")
    return con


def query(specs, sql: str):
    """The result of ``sql`` over the campaign as a DataFrame (a bad query: UsageError)."""
    import duckdb

    from sniffsync.errors import UsageError
    con = connect(specs)
    try:
        return con.execute(sql).df()
    except duckdb.Error as exc:
        raise UsageError(f"SQL: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
