"""Many sniffers on one clock, copies merged: :func:`sniffsync.sync.merge.merge` reads the
inputs and returns a :class:`~sniffsync.sync.merge.Merged`; ``clock`` (with ``anchors``,
``fit``, ``order``) fits the clocks, ``copies`` merges the copies, ``report`` sums it up
and ``pcapng`` writes the merged capture."""
