"""What a run and a campaign are on disk: folders of captures, labels, a cache folder.

A run is a folder holding the sniffer captures of one experiment (every ``*.pcap``,
``*.pcapng``, ``*.cap``, optionally ``.gz``, at its top level, in name order) and an
optional ``run.toml`` or ``run.json`` of free labels (``cca = "bbr"``, ``rts = "on"``,
...; a ``notes`` key is kept as notes, not as a label). A campaign is a folder whose
sub-folders are runs. A list of capture files is one run without labels.

Each run's tables go to its cache folder: ``RUN/.sniffsync/`` by default, or
``CACHE/<run name>/`` when a cache root is given.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sniffsync.errors import UsageError

__all__ = ["RunSpec", "discover", "read_labels", "CAPTURE_SUFFIXES", "RESERVED_LABELS"]

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz", ".cap.gz")
RESERVED_LABELS = ("run", "notes", "filename")      # column names the SQL views use themselves
CACHE_NAME = ".sniffsync"
WIRED = "wired"                  # a run's sub-folder of wired-side captures (joined, not merged)


@dataclass(frozen=True)
class RunSpec:
    """One run: its name, captures, labels and where its tables are cached."""
    name: str
    captures: tuple
    cache: str
    labels: dict = field(default_factory=dict, hash=False)
    notes: str = ""
    folder: str | None = None
    wired: tuple = ()            # wired-side captures (the run folder's wired/ sub-folder)


def _is_capture(p: Path) -> bool:
    return p.is_file() and p.name.lower().endswith(CAPTURE_SUFFIXES)


def _captures(folder: Path) -> list:
    return sorted(str(p) for p in folder.iterdir() if _is_capture(p))


def _scalar(key: str, v):
    if isinstance(v, (str, int, float, bool)):
        return v
    raise UsageError(f"label {key!r}: a value must be text, a number or true/false, not {type(v).__name__}")


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        out.update(_flatten(v, key + ".") if isinstance(v, dict) else {key: _scalar(key, v)})
    return out


def read_labels(folder) -> tuple[dict, str]:
    """(labels, notes) of a run folder from ``run.toml`` or ``run.json`` (both: refused)."""
    folder = Path(folder)
    toml_p, json_p = folder / "run.toml", folder / "run.json"
    if toml_p.exists() and json_p.exists():
        raise UsageError(f"{folder}: both run.toml and run.json; keep one")
    if toml_p.exists():
        if sys.version_info < (3, 11):
            raise UsageError(f"{toml_p}: reading TOML needs Python 3.11 or later; use run.json")
        import tomllib
        try:
            data = tomllib.loads(toml_p.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{toml_p}: not valid TOML ({exc})") from None
    elif json_p.exists():
        try:
            data = json.loads(json_p.read_text())
        except (ValueError, UnicodeDecodeError) as exc:
            raise UsageError(f"{json_p}: not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise UsageError(f"{json_p}: must hold one object of key/values")
    else:
        return {}, ""
    notes = data.pop("notes", "")
    labels = _flatten(data)
    bad = [k for k in labels if k in RESERVED_LABELS]
    if bad:
        raise UsageError(f"{folder}: label name(s) {', '.join(bad)} are reserved")
    return labels, str(notes)


def _checked(cache: Path, caps) -> str:
    """``cache`` unless a capture lies inside it (its stale files are removed before a rewrite)."""
    root = cache.resolve()
    inside = [c for c in caps if root in Path(c).resolve().parents]
    if inside:
        raise UsageError(f"cache folder {cache} holds the input {inside[0]}; choose another --cache")
    return str(cache)


def _run(folder: Path, caps: list, cache_root) -> RunSpec:
    labels, notes = read_labels(folder)
    cache = Path(cache_root) / folder.name if cache_root else folder / CACHE_NAME
    wired = tuple(_captures(folder / WIRED)) if (folder / WIRED).is_dir() else ()
    return RunSpec(folder.name, tuple(caps), _checked(cache, caps), labels, notes, str(folder), wired)


def discover(paths, cache_root=None) -> list:
    """The runs named by ``paths``: run folders, campaign folders, or capture files (one run).

    Run names must be unique (they are the ``run`` column of every table).
    """
    paths = [Path(p) for p in paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")
    files = [p for p in paths if p.is_file()]
    if files and len(files) != len(paths):
        raise UsageError("give either run/campaign folders or the capture files of one run, not both")
    if files:
        name = files[0].name.split(".")[0]
        cache = Path(cache_root) / name if cache_root else files[0].parent / CACHE_NAME / name
        caps = tuple(str(p) for p in files)
        return [RunSpec(name, caps, _checked(cache, caps))]
    runs = []
    for folder in paths:
        caps = _captures(folder)
        if caps:
            runs.append(_run(folder, caps, cache_root))
            continue
        subs = [s for s in sorted(folder.iterdir()) if s.is_dir() and s.name not in (CACHE_NAME, WIRED)]
        found = [_run(s, c, cache_root) for s in subs if (c := _captures(s))]
        if not found:
            raise UsageError(f"{folder}: no captures in it nor in its sub-folders (a run or a campaign)")
        runs += found
    names = [r.name for r in runs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"run name(s) {', '.join(dup)} given twice (run names are folder names)")
    return runs
