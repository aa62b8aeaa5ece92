"""MAC addresses: 48-bit integers in tables (first on-air byte most significant), colon-hex in text."""
from __future__ import annotations

__all__ = ["mac_text", "mac_texts"]


def mac_text(v) -> str | None:
    """``0xaabbccddeeff`` -> ``'aa:bb:cc:dd:ee:ff'``; null -> None."""
    if v is None or type(v).__name__ == "NAType" or (isinstance(v, float) and v != v):
        return None
    v = int(v)
    return ":".join(f"{(v >> s) & 0xFF:02x}" for s in range(40, -8, -8))


def mac_texts(values) -> list:
    """Colon-hex text for a column, formatting each distinct value once."""
    import pandas as pd      # lazy: the CLI parser imports this module
    codes, uniq = pd.factorize(pd.array(values, dtype="UInt64"), use_na_sentinel=True)
    names = [mac_text(u) for u in uniq]
    return [names[c] if c >= 0 else None for c in codes]
