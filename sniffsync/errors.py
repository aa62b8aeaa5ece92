"""The one small exception tree. The CLI turns any of these into one line and a non-zero exit."""

__all__ = ["SniffsyncError", "CaptureError", "SyncError", "UsageError", "NoDataError"]


class SniffsyncError(Exception):
    """Base of every error sniffsync raises on purpose."""
    exit_code = 2


class CaptureError(SniffsyncError):
    """A file is not a readable capture (or cannot be written)."""


class SyncError(SniffsyncError):
    """Sniffer clocks could not be synchronised."""
    exit_code = 3


class UsageError(SniffsyncError):
    """Arguments that cannot work together."""


class NoDataError(SniffsyncError):
    """The inputs hold nothing this analysis reads (e.g. no TCP/UDP data, no captures).

    Not a misuse: a caller that can go on without this one result catches it.
    """
