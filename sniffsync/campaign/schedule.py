"""Where the per-run analyses run: in this process, or on a Dask distributed cluster.

Runs are independent, so a campaign is a bag of tasks: each task analyses one run and
writes its Parquet tables into the run's cache folder (the workers must see the same
file system as the caller: one machine, or a shared mount). ``scheduler``:

- ``"none"``: one after another in this process;
- ``None`` (default): a ``distributed.LocalCluster`` of :func:`sniffsync.runtime.workers`
  single-threaded worker processes, or in-process when there is one run or one core;
- an address (``tcp://host:8786``, or a ``LocalCluster``'s ``scheduler_address``): that cluster.

Results do not depend on the scheduler: a task is the same function on the same inputs.
"""
from __future__ import annotations

from sniffsync.errors import UsageError

__all__ = ["analyse_all", "CONNECT_TIMEOUT"]

CONNECT_TIMEOUT = "10s"        # how long to try a --scheduler address before giving up


def _in_process(specs, options, frames, force, progress):
    from sniffsync.campaign.store import analyse_run
    out = []
    for spec in specs:
        out.append(analyse_run(spec, options, frames, force))
        if progress:
            progress(out[-1])
    return out


def _on_cluster(client, specs, options, frames, force, progress):
    from distributed import as_completed

    from sniffsync.campaign.store import analyse_run
    futures = [client.submit(analyse_run, s, options, frames, force, key=f"sniffsync-run-{i}-{s.name}",
                             pure=False) for i, s in enumerate(specs)]
    order = {f.key: i for i, f in enumerate(futures)}
    out = [None] * len(specs)
    try:
        for fut in as_completed(futures):
            out[order[fut.key]] = fut.result()      # a worker's exception is raised here
            if progress:
                progress(out[order[fut.key]])
    except BaseException:
        client.cancel(futures)                      # the other runs stop with the first error
        raise
    return out


def analyse_all(specs, scheduler: str | None = None, options: dict | None = None, frames: bool = False,
                force: bool = False, progress=None) -> list:
    """:func:`~sniffsync.campaign.store.analyse_run` for every run; results in ``specs`` order."""
    from sniffsync.campaign.store import cached
    from sniffsync.runtime import workers
    specs = list(specs)
    done = [None if force else cached(s, options, frames) for s in specs]   # no cluster for these
    for r in filter(None, done):
        if progress:
            progress(r)
    todo = [s for s, d in zip(specs, done) if d is None]
    n = workers(len(todo))
    if not todo:
        new = []
    elif scheduler == "none" or (scheduler is None and n < 2):
        new = _in_process(todo, options, frames, force, progress)
    elif scheduler is None:
        from distributed import Client, LocalCluster
        import logging
        # the cluster's own log lines (a task cancelled after another failed) are not ours to show
        with LocalCluster(n_workers=n, threads_per_worker=1, dashboard_address=None,
                          silence_logs=logging.CRITICAL) as cluster, \
                Client(cluster) as client:
            new = _on_cluster(client, todo, options, frames, force, progress)
    else:
        with _client(scheduler) as client:
            new = _on_cluster(client, todo, options, frames, force, progress)
    it = iter(new)
    return [d if d is not None else next(it) for d in done]


def _client(address: str):
    from distributed import Client
    try:
        return Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(f"--scheduler {address}: cannot reach a Dask scheduler there ({exc})") from None
