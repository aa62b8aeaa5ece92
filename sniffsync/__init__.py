"""sniffsync: one time-ordered, microsecond-true trace from many Wi-Fi sniffers, and what it tells."""

__version__ = "0.1.0"


def __getattr__(name):
    # lazy: keep `import sniffsync` (and the CLI's --help) free of pandas
    if name in ("read_capture", "read_captures"):
        from sniffsync.decode import frames
        return getattr(frames, name)
    if name == "merge":
        from sniffsync.sync.merge import merge
        return merge
    raise AttributeError(name)
