"""gzip-compressed captures, inflated as a stream into an unlinked temporary file.

The reader wants the capture as one mapped byte buffer (offsets into it are the record
index). Inflating into memory costs the whole inflated size twice (a 1.1 MB gzip bomb
that inflates to 1 GB peaked at 2.2 GB RSS); here at most ``CHUNK`` compressed and
``CHUNK`` inflated bytes are held at a time, the inflated bytes go to a temporary file
(deleted on creation: nothing is left behind, even on a crash) and that file is mapped,
so its pages are dropped as decoded like those of a plain capture. The disk holds the
inflated size while the file is read; ``max_bytes`` bounds it.
"""
from __future__ import annotations

import mmap
import tempfile
import zlib

__all__ = ["inflate", "CHUNK", "GZIP_MAGIC"]

CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"


def inflate(path, src: mmap.mmap, max_bytes: int | None = None):
    """Inflate the gzip members of ``src`` (concatenated members are one stream).

    Returns ``(mapping or None, size, problems, limited)``: the mapped inflated bytes (None
    when nothing inflated), their count, problem lines (corrupt or truncated stream: what
    inflated is kept), and whether ``max_bytes`` stopped the inflation early.
    """
    problems, size, limited = [], 0, False
    with tempfile.TemporaryFile(prefix="sniffsync-inflate-") as tmp:
        pos, n = 0, len(src)
        while pos + 2 <= n and src[pos:pos + 2] == GZIP_MAGIC and not limited:
            dec, tail = zlib.decompressobj(31), b""
            try:
                while not dec.eof:
                    data = tail or src[pos:pos + CHUNK]
                    if not tail:
                        pos += len(data)
                    if not data:
                        break
                    room = CHUNK if max_bytes is None else min(CHUNK, max_bytes - size)
                    out = dec.decompress(data, room)
                    tail = dec.unconsumed_tail
                    tmp.write(out)
                    size += len(out)
                    if max_bytes is not None and size >= max_bytes and (tail or not dec.eof or
                                                                         dec.unused_data or pos < n):
                        limited = True
                        break
            except zlib.error as exc:
                problems.append(f"{path}: gzip stream is corrupt ({exc}); using what inflated")
                break
            if limited:
                break
            if not dec.eof:
                problems.append(f"{path}: gzip stream is truncated; using what inflated")
                break
            pos -= len(dec.unused_data)          # the next member starts after this one
        tmp.flush()
        if size == 0:
            return None, 0, problems, limited
        return mmap.mmap(tmp.fileno(), 0, access=mmap.ACCESS_READ), size, problems, limited
