"""Built-in scenarios as declarative dicts, and ``--set key=value`` overrides.

A scenario is plain data (JSON-able): the engine reads only these keys, and the
whole resolved dict is written to ``scenario.json`` next to the captures, so a run
is reproducible from that file alone. Every default lives in :data:`DEFAULTS`.
"""
from __future__ import annotations

import copy
import json

from sniffsync.errors import UsageError

__all__ = ["DEFAULTS", "SCENARIOS", "scenario", "apply_set", "AC_PARAMS", "AC_TID"]

# 802.11e EDCA defaults (IEEE 802.11-2020 Table 9-155, non-AP STA): CWmin, CWmax, AIFSN,
# TXOP limit (OFDM PHYs) in us; 0 = one PPDU per access.
AC_PARAMS = {
    "bk": (15, 1023, 7, 0),
    "be": (15, 1023, 3, 0),
    "vi": (7, 15, 2, 3008),
    "vo": (3, 7, 2, 1504),
    "beacon": (0, 0, 1, 0),     # beacons go at PIFS, no backoff
}
AC_TID = {"bk": 1, "be": 0, "vi": 5, "vo": 6, "beacon": 0}

DEFAULTS = {
    "name": "custom",
    "seconds": 2.0,
    "seed": 1,
    "freq_mhz": 5180,
    "start_unix_ns": 1_700_000_000_000_000_000,   # wall-clock epoch of true time 0
    # PHY of data PPDUs (control/management frames use legacy OFDM, below)
    "phy": "ht", "mcs": 7, "nss": 1, "bw_mhz": 20, "gi_ns": 800, "ldpc": False,
    "ctrl_rate_kbps": 24000,        # RTS, CTS, Block-Ack
    "beacon_rate_kbps": 6000,
    "beacon_interval_tu": 100,      # 102.4 ms
    "ssid": "sniffsync-sim",
    "ap_tsf_offset_us": 123_456_789,
    # MAC
    "slot_ns": 9_000, "sifs_ns": 16_000,
    "max_mpdus": 64, "max_ppdu_us": 5484, "ba_window": 64,
    "mpdu_retry_limit": 7, "rts_retry_limit": 7,
    "mpdu_error": 0.01,             # per-MPDU error probability at a receiver
    "queue_limit": 1000,            # packets per (node, AC) queue; tail drop
    # radio
    "range_m": 100.0, "tx_power_dbm": 20.0, "pathloss_exp": 3.0, "pathloss_1m_db": 46.7,
    "wired_delay_ns": 500_000,      # AP <-> server, one way
    # TCP
    "mss": 1448, "rwnd_segs": 2000, "rto_min_ns": 200_000_000, "rto_init_ns": 1_000_000_000,
    "udp_payload": 1472,
    "bin_ns": 200_000_000,          # flows.csv bin width
    # sniffer default knobs (a sniffer dict may override each)
    "snaplen": 0,                   # 0 = whole frames; else cut frames (wire length kept)
    "tsft_at": "end",               # radiotap TSFT at "start" or "end" of the PPDU
    "fcs": True,                    # frames carry their FCS (radiotap Flags 0x10)
    "ampdu_status": True,
    "nodes": [], "flows": [], "sniffers": [], "hears": {},
}

_SNIFFER_CLOCKS = [  # offset_ns, ppm, jitter_us, miss
    (0, 0.0, 0.0, 0.0),
    (1_234_567_000, 12.5, 2.0, 0.01),
    (-987_654_000, -7.0, 3.0, 0.02),
]


def _sniffers(near: list[tuple[str, tuple[float, float]]]) -> list[dict]:
    out = []
    for i, (name, pos) in enumerate(near):
        off, ppm, jit, miss = _SNIFFER_CLOCKS[i % len(_SNIFFER_CLOCKS)]
        out.append({"name": name, "pos": [pos[0], pos[1] + 2.0], "offset_ns": off,
                    "ppm": ppm, "jitter_us": jit, "miss": miss})
    return out


def _hidden_node() -> dict:
    return {
        "name": "hidden-node", "seconds": 10.0, "phy": "ht", "mcs": 5,
        "udp_ac": "be", "udp_rate_bps": 20_000_000, "tcp_ac": "be",
        "nodes": [
            {"name": "AP", "pos": [0.0, 0.0], "ap": True},
            {"name": "STA1", "pos": [-60.0, 0.0], "rts": True},
            # RTS on both: the AP, turning around to CTS one station, is deaf to the other's
            # RTS; --set nodes.STA2.rts=false gives the unprotected (ns-3 capture) variant
            {"name": "STA2", "pos": [60.0, 0.0], "rts": True},
        ],
        "flows": [
            {"name": "tcp-up", "kind": "tcp", "src": "STA1", "dst": "server", "ac": "$tcp_ac",
             "start_s": 0.05, "stop_s": None},
            {"name": "udp-hidden", "kind": "udp", "src": "STA2", "dst": "server", "ac": "$udp_ac",
             "rate_bps": "$udp_rate_bps", "start_s": 0.1, "stop_s": None},
        ],
        "sniffers": _sniffers([("snifA", (0.0, 0.0)), ("snifB", (-60.0, 0.0)),
                               ("snifC", (60.0, 0.0))]),
    }


def _fairness() -> dict:
    n = 10
    nodes = [{"name": "AP", "pos": [0.0, 0.0], "ap": True}]
    flows = []
    for i in range(n):
        nodes.append({"name": f"STA{i + 1}", "pos": [15.0 * (i % 5) - 30.0, 10.0 if i < 5 else -10.0],
                      "rts": False})
        flows.append({"name": f"tcp{i + 1}", "kind": "tcp", "src": f"STA{i + 1}", "dst": "server",
                      "ac": "be", "start_s": 1.0 * i + 0.1, "stop_s": 1.0 * i + 20.1})
    # rwnd 64 segments (~93 KB): with Linux-sized windows (rwnd_segs=2000) the AP's single
    # queue of TCP ACKs becomes the bottleneck and late flows starve in RTO back-off
    return {"name": "fairness", "seconds": 40.0, "phy": "vht", "mcs": 7, "bw_mhz": 40,
            "rwnd_segs": 64,
            "nodes": nodes, "flows": flows,
            "sniffers": _sniffers([("snifA", (0.0, 0.0)), ("snifB", (-30.0, 10.0)),
                                   ("snifC", (30.0, -10.0))])}


def _clean() -> dict:
    return {
        "name": "clean", "seconds": 5.0, "phy": "he", "mcs": 7, "bw_mhz": 40, "gi_ns": 800,
        "nodes": [
            {"name": "AP", "pos": [0.0, 0.0], "ap": True},
            {"name": "STA1", "pos": [-10.0, 0.0], "rts": True},
            {"name": "STA2", "pos": [10.0, 0.0], "rts": False},
        ],
        "flows": [
            {"name": "tcp-down", "kind": "tcp", "src": "server", "dst": "STA1", "ac": "be",
             "start_s": 0.05, "stop_s": None},
            {"name": "udp-vo", "kind": "udp", "src": "STA2", "dst": "server", "ac": "vo",
             "rate_bps": 2_000_000, "payload": 200, "start_s": 0.1, "stop_s": None},
        ],
        "sniffers": _sniffers([("snifA", (0.0, 0.0)), ("snifB", (-10.0, 0.0))]),
    }


SCENARIOS = {"hidden-node": _hidden_node, "fairness": _fairness, "clean": _clean}


def _coerce(text: str, like):
    """Parse ``text`` as the type of the default it replaces (JSON for anything else)."""
    if isinstance(like, bool):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"--set: {text!r} is not a boolean")
    try:
        if isinstance(like, int):
            return int(float(text)) if "e" in text.lower() else int(text)
        if isinstance(like, float):
            return float(text)
        if isinstance(like, str):
            return text
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--set: cannot parse {text!r}") from exc


def apply_set(cfg: dict, items: list[str]) -> dict:
    """Apply ``key=value`` overrides; ``nodes.STA1.rts=false`` addresses a named list item.

    A key may also name an attribute of every sniffer (``jitter_us``, ``ppm``, ...) with
    ``sniffers.*.jitter_us=5``.
    """
    cfg = copy.deepcopy(cfg)
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set expects key=value, got {item!r}")
        key, text = item.split("=", 1)
        parts = key.split(".")
        targets = [cfg]
        for p in parts[:-1]:
            nxt = []
            for t in targets:
                v = t.get(p) if isinstance(t, dict) else None
                if isinstance(t, list):
                    v = [x for x in t if p == "*" or x.get("name") == p]
                    nxt.extend(v)
                    continue
                if v is None:
                    raise UsageError(f"--set: no {p!r} in {key!r}")
                nxt.append(v)
            targets = nxt
        if not targets:
            raise UsageError(f"--set: {key!r} matches nothing")
        last = parts[-1]
        for t in targets:
            if len(parts) == 1 and last not in t:
                raise UsageError(f"--set: unknown parameter {last!r}")
            like = t.get(last, DEFAULTS.get(last, ""))
            t[last] = _coerce(text, like)
    return cfg


def _resolve(cfg: dict) -> dict:
    """Replace ``"$key"`` strings inside flows by the top-level value of ``key``."""
    for f in cfg["flows"]:
        for k, v in list(f.items()):
            if isinstance(v, str) and v.startswith("$"):
                f[k] = cfg[v[1:]]
    return cfg


def scenario(name: str, sets: list[str] = (), *, seconds: float | None = None,
             seed: int | None = None) -> dict:
    """The fully resolved parameter dict of a built-in scenario.

    Parameters
    ----------
    name : str
        One of :data:`SCENARIOS` (``hidden-node``, ``fairness``, ``clean``).
    sets : list of str
        ``key=value`` overrides, applied in order.
    seconds, seed : optional
        Shortcuts for ``--set seconds=`` / ``--set seed=``.
    """
    if name not in SCENARIOS:
        raise UsageError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    cfg = copy.deepcopy(DEFAULTS)
    cfg.update(SCENARIOS[name]())
    cfg = apply_set(cfg, list(sets))
    if seconds is not None:
        cfg["seconds"] = float(seconds)
    if seed is not None:
        cfg["seed"] = int(seed)
    return _resolve(cfg)
