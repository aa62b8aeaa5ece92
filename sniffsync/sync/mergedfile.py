"""What a merge knows, in standard pcapng places, and read back (the format: docs/merge.md).

* Section header: ``shb_userappl`` "sniffsync", an ``opt_comment`` for people, and a custom
  string option (code 19372: not to be copied into other files) holding :data:`FORMAT`
  and a JSON object: sniffer names, stamp convention, the sync/merge report.
* One interface description per sniffer (``if_name`` = its name, ns resolution).
* Per packet block: interface id = the sniffer of the copy written; a custom binary
  option (code 19373) of fixed layout :func:`epb_dtype` (source frame, common TSFT,
  merged id, heard-by mask, flags, best sniffer, each sniffer's signal); an
  ``opt_comment`` "heard by: A(-41 dBm) B(-67 dBm)" for people (Wireshark shows it).

Custom options carry a Private Enterprise Number; sniffsync has none registered, so
:data:`PEN` is IANA's number for documentation (RFC 5612) and every option also starts
with :data:`MAGIC`. Options are "do not copy": an editor that rewrites packets (other
interface ids) drops them, and the reader then sees a plain capture, not wrong metadata.
Reading back is columnar: our writer puts the binary option first, at a fixed place
after the packet bytes, so every row's option is one gather.
"""
from __future__ import annotations

import gzip
import json
import struct

import numpy as np   # pandas only inside functions: `fairness` on wired captures runs without it

__all__ = ["PEN", "MAGIC", "FORMAT", "epb_dtype", "epb_options", "shb_block", "file_meta",
           "meta_of_interfaces", "merged_columns"]

PEN = 32473                 # RFC 5612: the PEN for documentation; see the module docstring
MAGIC = b"SnSy"
FORMAT = "sniffsync-merge/1"
OPT_CUSTOM_STR, OPT_CUSTOM_BIN = 19372, 19373     # custom options, not to be copied
SHB_TYPE = 0x0A0D0D0A

# the EPB custom option, after its (code, length) header: a declarative layout
EPB_FIELDS = (
    ("pen", "<u4"), ("magic", "S4"),
    ("frame", "<i8"),        # record number in the sniffer's own capture
    ("tsft_us", "<i8"),      # common TSFT (µs, reference sniffer's TSF); FLAG_NO_TSFT: null
    ("merged_id", "<i8"),    # the transmission (group of copies) this row belongs to
    ("heard", "<u8"),        # bitmask of the sniffers that heard it
    ("flags", "u1"), ("best", "u1"),
)
EPB_TAIL = (                 # after the per-sniffer signals
    ("ts_err_ns", "<i4"),    # error bound of the row's time (ns, clipped); -1: unknown
    ("ts_src", "u1"),        # index into TS_SRC: where the row's time came from; 255: none
)
TS_SRC = ("tsft", "other_sniffer", "protocol", "host")     # = sniffsync.sync.retime.TS_SRC
FLAG_UNSYNCED, FLAG_NO_TSFT = 1, 2
MAX_SNIFFERS = 63           # the heard-by bitmask is an int64


def _value_len(n_sniffers: int) -> int:
    """The option's length field: its value bytes, without padding."""
    return sum(np.dtype(t).itemsize for _, t in EPB_FIELDS + EPB_TAIL) + n_sniffers


def epb_dtype(n_sniffers: int) -> np.dtype:
    """The option's bytes: header, :data:`EPB_FIELDS`, one signed dBm per sniffer (-128:
    none), :data:`EPB_TAIL`, zero padding to 4 bytes."""
    size = 4 + _value_len(n_sniffers)
    fields = [("code", "<u2"), ("length", "<u2"), *EPB_FIELDS, ("signal", "i1", (n_sniffers,)), *EPB_TAIL]
    return np.dtype(fields + [("pad", "V", -size % 4)] if size % 4 else fields)


def epb_options(frames, n_sniffers: int) -> np.ndarray:
    """``(rows, size)`` uint8: the custom option of every row of a merged table."""
    import pandas as pd
    dt = epb_dtype(n_sniffers)
    n = len(frames)
    a = np.zeros(n, dt)
    a["code"], a["length"] = OPT_CUSTOM_BIN, _value_len(n_sniffers)
    a["pen"], a["magic"] = PEN, MAGIC
    a["frame"] = frames["frame"].to_numpy(np.int64)
    tsft = frames["tsft_us"] if "tsft_us" in frames else pd.Series(pd.array([None] * n, "Int64"))
    a["tsft_us"] = tsft.to_numpy(np.int64, na_value=0)
    a["merged_id"] = frames["merged_id"].to_numpy(np.int64)
    a["heard"] = frames["sniffers_heard"].to_numpy(np.int64).astype(np.uint64)
    a["flags"] = (frames["unsynced"].to_numpy(bool) * FLAG_UNSYNCED
                  | tsft.isna().to_numpy() * FLAG_NO_TSFT)
    a["best"] = frames["best_sniffer"].to_numpy(np.int64)
    a["ts_err_ns"] = np.minimum(frames["ts_err_ns"].to_numpy(np.int64, na_value=-1), 2**31 - 1) \
        if "ts_err_ns" in frames else -1
    a["ts_src"] = pd.Categorical(frames["ts_src"], TS_SRC).codes.astype(np.uint8) if "ts_src" in frames else 255
    for s in range(n_sniffers):
        col = f"signal_dbm_s{s}"
        if col in frames:
            a["signal"][:, s] = frames[col].to_numpy(np.int64, na_value=-128)
        else:
            a["signal"][:, s] = -128
    return a.view(np.uint8).reshape(n, dt.itemsize)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def shb_block(meta: dict, comment: str) -> bytes:
    """The section header of a merged file: ``meta`` (JSON) in a custom string option."""
    blob = (FORMAT + " " + json.dumps(meta, separators=(",", ":"))).encode()
    if len(blob) > 0xFFFF - 8:           # an option holds < 64 KiB: keep what reads back
        meta = {k: v for k, v in meta.items() if k != "report"} | {"report": None}
        blob = (FORMAT + " " + json.dumps(meta, separators=(",", ":"))).encode()
    opts = (_option(1, comment.encode()[:0xFFFF]) + _option(4, b"sniffsync")
            + _option(OPT_CUSTOM_STR, struct.pack("<I", PEN) + MAGIC + blob) + b"\0\0\0\0")
    blen = 28 + len(opts)
    return struct.pack("<IIIHHq", SHB_TYPE, blen, 0x1A2B3C4D, 1, 0, -1) + opts + struct.pack("<I", blen)


def meta_from_custom(payloads) -> dict | None:
    """The merge metadata among a section's custom option payloads, or None."""
    head = struct.pack("<I", PEN) + MAGIC + FORMAT.encode() + b" "
    for p in payloads or ():
        if p.startswith(head):
            try:
                meta = json.loads(p[len(head):].decode())
            except ValueError:
                return None
            return meta if _valid(meta) else None
    return None


def _valid(meta) -> bool:
    """A damaged or foreign header must not be trusted: names, stamps, report types."""
    names = meta.get("sniffers") if isinstance(meta, dict) else None
    return (isinstance(names, list) and 1 <= len(names) <= MAX_SNIFFERS
            and all(isinstance(x, str) for x in names) and meta.get("stamps") in ("end", "capture")
            and isinstance(meta.get("report"), dict | None))


def meta_of_interfaces(interfaces) -> dict | None:
    """Merge metadata of a read file (from its first interface's section), or None."""
    return meta_from_custom(interfaces[0].get("section_custom")) if interfaces else None


def file_meta(path) -> dict | None:
    """Merge metadata from the first block of ``path`` (pcapng, gzip or not), or None."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(2)
        opener = gzip.open if raw == b"\x1f\x8b" else open
        with opener(path, "rb") as fh:
            head = fh.read(12)
            if len(head) < 12 or struct.unpack("<I", head[:4])[0] != SHB_TYPE:
                return None
            order = "<" if head[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
            blen = struct.unpack(order + "I", head[4:8])[0]
            if not 28 <= blen <= 1 << 20:
                return None
            body = head + fh.read(blen - 12)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    from sniffsync.io.pcapng import custom_options
    return meta_from_custom(custom_options(body, 24, len(body) - 4, order))


def merged_columns(frames, rec, n_sniffers: int):
    """The merge's columns (a DataFrame) of a table read from a merged file, from each
    packet's option (rows without a valid option: as a plain capture of their interface);
    None when no row has one."""
    import pandas as pd
    dt = epb_dtype(n_sniffers)
    n = len(frames)
    if n == 0 or rec is None:
        return None
    caplen = np.asarray(rec.caplen, np.int64)
    at = np.asarray(rec.data_off, np.int64) + caplen + (-caplen % 4)
    fits = at + dt.itemsize <= rec.buf.size
    from sniffsync.io.bytecols import gather
    raw = np.zeros((n, dt.itemsize), np.uint8)
    raw[fits] = gather(rec.buf, at[fits], dt.itemsize).reshape(-1, dt.itemsize)
    o = raw.view(dt).ravel()
    ok = fits & (o["code"] == OPT_CUSTOM_BIN) & (o["length"] == _value_len(n_sniffers)) & (
        o["pen"] == PEN) & (o["magic"] == MAGIC)
    if not ok.any():
        return None
    iface = np.maximum(np.asarray(rec.iface, np.int64), 0)     # unknown interface (marked bad): 0
    own = np.left_shift(np.int64(1), np.clip(iface, 0, 62))
    tsft_null = ~ok | (o["flags"] & FLAG_NO_TSFT > 0)
    base = frames["tsft_us"] if "tsft_us" in frames else None
    out = {
        "sniffer": iface.astype(np.int16),
        "frame": np.where(ok, o["frame"], frames["frame"].to_numpy(np.int64)),
        "tsft_us": pd.array(np.where(ok, o["tsft_us"], 0), "Int64"),
        "merged_id": np.where(ok, o["merged_id"], -1 - np.arange(n)),
        "sniffers_heard": np.where(ok, o["heard"].astype(np.int64), own),
        "best_sniffer": np.where(ok, o["best"], iface).astype(np.int16),
        "unsynced": ok & (o["flags"] & FLAG_UNSYNCED > 0),
    }
    out["tsft_us"][tsft_null] = pd.NA
    if base is not None:                  # rows without an option keep their own TSFT
        out["tsft_us"][~ok] = base.array[~ok]
    err, src = o["ts_err_ns"].astype(np.int64), o["ts_src"].astype(np.int64)
    out["ts_err_ns"] = pd.arrays.IntegerArray(np.maximum(err, 0), ~ok | (err < 0))
    out["ts_src"] = pd.Categorical.from_codes(np.where(ok & (src < len(TS_SRC)), src, -1), TS_SRC)
    heard = out["sniffers_heard"]
    out["n_heard"] = sum((heard >> s) & 1 for s in range(n_sniffers)).astype(np.int16)
    sig = o["signal"].astype(np.int64)
    own_sig = frames["signal_dbm"].to_numpy(np.int64, na_value=-128) if "signal_dbm" in frames \
        else np.full(n, -128)
    for s in range(n_sniffers):
        v = np.where(ok, sig[:, s], np.where(iface == s, own_sig, -128))
        have = (heard >> s) & 1 == 1
        out[f"signal_dbm_s{s}"] = pd.arrays.IntegerArray(v.astype(np.int8), ~(have & (v > -128)))
    order = ["sniffer", "frame", "tsft_us", "merged_id", "sniffers_heard", "n_heard", "best_sniffer",
             "unsynced", *(f"signal_dbm_s{s}" for s in range(n_sniffers)), "ts_err_ns", "ts_src"]   # as merged_table
    return pd.DataFrame({c: out[c] for c in order})


def _read(path, columns, sniffer: int = 0):
    """Records, frame table, merge metadata and merge columns (None: not merged) of a file."""
    from sniffsync.decode.frames import read_columns
    from sniffsync.decode.table import frame_table
    rec, n, cols, marks = read_columns(path, sniffer, columns)
    meta = meta_of_interfaces(rec.interfaces)
    frames = frame_table(n, cols, marks, columns)
    extra = merged_columns(frames, rec, len(meta["sniffers"])) if meta else None
    return rec, frames, meta, extra


def read_merged(path, columns=None, records: bool = False):
    """The :class:`~sniffsync.sync.merge.Merged` a merged pcapng was written from (as
    :func:`~sniffsync.sync.merge.merge` returned it), or None when ``path`` is not a
    sniffsync-merged file. ``records``: keep this file's records (every sniffer's bytes
    are in it, at the table's index: ``Merged.by_index``), so it can be written again."""
    if file_meta(path) is None:
        return None
    import pandas as pd

    from sniffsync.sync.merge import NEEDED_COLUMNS, Merged
    want = None if columns is None else list(dict.fromkeys([*NEEDED_COLUMNS, *columns]))
    rec, frames, meta, extra = _read(path, want)
    if extra is None:                    # several sections, or options stripped: not ours
        return None
    for c in ("sniffer", "frame", "tsft_us"):       # in place: the schema's column order
        if c in frames:
            frames[c] = extra.pop(c)
    frames = pd.concat([frames, extra], axis=1)
    names = list(meta["sniffers"])
    # the table's index is the record number in this file: kept through filtering
    return Merged(frames, meta.get("report"), [rec] * len(names) if records else None, names,
                  meta.get("stamps", "end"), by_index=records)


def read_as_input(path, sniffer: int, columns=None):
    """``(records, table)`` of a merged file as ONE input of a new merge: a single clock
    (the earlier merge's common TSFT; its stamps already mark PPDU ends), ``frame`` its
    record number in this file (what :func:`~sniffsync.sync.pcapng.write_merged` reads)."""
    rec, frames, _, extra = _read(path, columns, sniffer)
    if extra is not None and "tsft_us" in frames:
        frames["tsft_us"] = extra["tsft_us"]
    return rec, frames
