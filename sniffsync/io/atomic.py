"""Every file sniffsync writes goes through :func:`atomic_output`.

The output is written to a temporary file beside its target and renamed into place only
when the whole write succeeded, so a failure (an exception, ^C, a full disk) leaves
either the old file or none, never half of one. The file gets the mode a plain
``open(path, "w")`` would give (``0o666`` less the umask), not ``mkstemp``'s ``0o600``.
:func:`check_outputs` refuses, before any work starts, an output that is an input (by
real path, links included), two outputs that are one file, and folders that cannot be
written.
"""
from __future__ import annotations

import contextlib
import os
import tempfile

from sniffsync.errors import CaptureError, UsageError

__all__ = ["atomic_output", "check_outputs", "same_file"]


def _key(path) -> str:
    return os.path.realpath(os.fspath(path))


def same_file(a, b) -> bool:
    """Whether two paths name one file (real paths; an existing pair also by inode)."""
    if _key(a) == _key(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_outputs(outputs, inputs=()) -> None:
    """Refuse outputs that would destroy an input or each other, or that cannot be written.

    ``outputs`` and ``inputs`` are paths (``None`` and ``"-"`` are skipped: stdout).
    Raises :class:`~sniffsync.errors.UsageError` (an output is an input, twice named, a
    folder) or :class:`~sniffsync.errors.CaptureError` (cannot be written), naming the path.
    """
    outs = [os.fspath(o) for o in outputs if o not in (None, "-")]
    ins = [os.fspath(i) for i in inputs if i not in (None, "-")]
    for k, out in enumerate(outs):
        for src in ins:
            if same_file(out, src):
                raise UsageError(f"{out}: is an input of this command; refusing to overwrite it")
        for other in outs[:k]:
            if same_file(out, other):
                raise UsageError(f"{out}: named for two outputs of this command")
        if os.path.isdir(out):
            raise UsageError(f"{out}: is a directory, not an output file")
        folder = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(folder):
            raise CaptureError(f"{out}: cannot write: folder {folder} does not exist")
        if not os.access(folder, os.W_OK):
            raise CaptureError(f"{out}: cannot write: folder {folder} is not writable")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path, mode: str = "wb", *, inputs=(), encoding: str | None = None):
    """Open ``path`` for writing, atomically: ``with atomic_output(p) as fh: fh.write(...)``.

    ``inputs`` are checked first (see :func:`check_outputs`). ``mode`` is ``"wb"`` or
    ``"w"`` (text, ``encoding`` default UTF-8). On any exception the temporary file is
    removed and the target left untouched; an ``OSError`` becomes a
    :class:`~sniffsync.errors.CaptureError` naming ``path``.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"mode must be 'wb' or 'w', not {mode!r}")
    path = os.fspath(path)
    check_outputs([path], inputs)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".part")
    except OSError as exc:
        raise CaptureError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, mode, **({"encoding": encoding or "utf-8"} if mode == "w" else {})) as fh:
            yield fh
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise CaptureError(f"{path}: cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
