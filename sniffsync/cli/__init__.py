"""The ``sniffsync`` command line: one module per command, argument groups in :mod:`.common`."""
from sniffsync.cli.main import main

__all__ = ["main"]
