"""Scenario generator: a small discrete-event model of one BSS that writes multi-sniffer
radiotap captures and the ground truth behind them (``sniffsync simulate``)."""
from sniffsync.sim.run import run_model, simulate
from sniffsync.sim.scenarios import SCENARIOS, apply_set, scenario

__all__ = ["simulate", "run_model", "scenario", "apply_set", "SCENARIOS"]
