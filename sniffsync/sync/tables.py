"""Frame tables of several inputs put together, column by column (the merge's read)."""
from __future__ import annotations

import pandas as pd


def str_categories(t: pd.DataFrame) -> pd.DataFrame:
    """All-null categoricals get object categories, so tables of any origin concatenate."""
    fix = {c: t[c].cat.set_categories(t[c].cat.categories.astype(str).astype(object))
           for c in t.columns if isinstance(t[c].dtype, pd.CategoricalDtype)
           and t[c].cat.categories.dtype != object}
    return t.assign(**fix) if fix else t


def concat_columns(tables: list, columns=None) -> pd.DataFrame:
    """``frames.concat_tables(tables)``, built one column at a time.

    Each input column is dropped from its table once copied, so the peak is the inputs
    plus one column, not twice the inputs, and the freed column is reused by the next
    (fresh pages cost more than the copy). ``tables`` are emptied; with ``columns``,
    only those are concatenated (in the tables' order) and the tables keep the rest.
    """
    from pandas.api.types import union_categoricals
    out = {}
    for c in [c for c in tables[0].columns if columns is None or c in columns]:   # per column
        parts = [t.pop(c) for t in tables]
        cat = isinstance(parts[0].dtype, pd.CategoricalDtype)
        out[c] = union_categoricals(parts, ignore_order=True) if cat else pd.concat(parts, ignore_index=True)
        del parts
    return pd.DataFrame(out, copy=False)
