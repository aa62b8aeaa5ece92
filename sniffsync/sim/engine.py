"""Discrete-event model of one BSS: carrier sense, EDCA backoff, RTS/CTS, A-MPDU + Block-Ack.

An event loop over PPDUs (heapq; one event per PPDU start/end, per channel access, per
timer) -- never per microsecond. Decisions that matter for the truth files:

* A PPDU is decoded by node ``r`` iff ``r`` hears its transmitter and no other PPDU that
  ``r`` hears (or that ``r`` itself sends) overlaps it in time. A node is deaf while it
  transmits, so a receiver turning around to send a CTS/BA misses a second frame.
* Backoff counts slots only while the medium is idle (no PPDU sensed, NAV clear, not in
  an exchange) for at least AIFS; it freezes otherwise. Two accesses in the same slot
  both transmit (that is the collision).
* Responses (CTS, BA) go SIFS after the end of the eliciting frame, without sensing.
"""
from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from sniffsync.sim.mac import ACS, Mac
from sniffsync.sim.medium import Phy, hearing, positions
from sniffsync.sim.scenarios import AC_PARAMS

__all__ = ["Engine", "ACS"]


class Engine:
    """The event loop and medium state; MAC exchange logic lives in :class:`Mac`."""

    def __init__(self, cfg: dict, rng: np.random.Generator):
        self.cfg, self.rng = cfg, rng
        self.nodes = cfg["nodes"]
        self.n = n = len(self.nodes)
        self.names = [nd["name"] for nd in self.nodes]
        self.ap = next(i for i, nd in enumerate(self.nodes) if nd.get("ap"))
        self.hears = hearing(positions(self.nodes), positions(self.nodes), cfg["range_m"])
        np.fill_diagonal(self.hears, False)
        self.hearers = [np.flatnonzero(self.hears[:, t]).tolist() for t in range(n)]
        self._hears = self.hears.tolist()          # plain lists: the event loop's lookups
        self.phy = Phy(cfg)
        self.slot, self.sifs = int(cfg["slot_ns"]), int(cfg["sifs_ns"])
        self.aifs = [self.sifs + AC_PARAMS[a][2] * self.slot for a in ACS]
        self.cwmin = [AC_PARAMS[a][0] for a in ACS]
        self.cwmax = [AC_PARAMS[a][1] for a in ACS]
        self.t = 0
        self._heap: list = []
        self._order = 0
        # medium state per node
        self.busy = [0] * n             # PPDUs in the air that the node senses
        self.nav = [0] * n
        self.txing = [False] * n
        self.exch = [None] * n          # ongoing exchange (initiator side)
        self.idle = [True] * n
        self.idle_since = [0] * n
        # EDCA state per node x AC
        k = len(ACS)
        self.cw = [[self.cwmin[a] for a in range(k)] for _ in range(n)]
        self.bo = [[int(rng.integers(0, self.cwmin[a] + 1)) for a in range(k)] for _ in range(n)]
        self.acc_at = [[None] * k for _ in range(n)]
        self.acc_gen = [[0] * k for _ in range(n)]
        # truth: one row per PPDU (see truth.py for the columns)
        self.ppdus: list[list] = []
        self.recent: deque = deque()      # PPDUs that may still overlap one on the air
        self._longest = 0                 # longest PPDU so far (ns): the pruning horizon
        self.mac = Mac(self)

    # ---- event queue ------------------------------------------------------------
    def push(self, t: int, fn, *args) -> None:
        self._order += 1
        heapq.heappush(self._heap, (int(t), self._order, fn, args))

    def run(self, until_ns: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= until_ns:
            t, _, fn, args = heapq.heappop(heap)
            self.t = t
            fn(*args)

    # ---- idle / busy bookkeeping ---------------------------------------------------
    def update_idle(self, i: int) -> None:
        t = self.t
        now_idle = (self.busy[i] == 0 and self.nav[i] <= t and not self.txing[i]
                    and self.exch[i] is None)
        idle = self.idle
        if now_idle:
            if not idle[i]:
                idle[i] = True
                self.idle_since[i] = t
                self.schedule_access(i)
        elif idle[i]:
            idle[i] = False
            self._freeze(i)

    def _freeze(self, i: int) -> None:
        """Medium turned busy: keep the slots already counted, cancel pending accesses."""
        t, slot, aifs, since = self.t, self.slot, self.aifs, self.idle_since[i]
        acc_at, bo, gen = self.acc_at[i], self.bo[i], self.acc_gen[i]
        for a in range(len(acc_at)):
            at = acc_at[a]
            if at is not None:
                if at <= t:
                    continue                  # fires in this very slot: a collision
                acc_at[a] = None
                gen[a] += 1
            b = bo[a]
            if b > 0:
                start = since + aifs[a]
                if t > start:
                    bo[a] = max(0, b - (t - start) // slot)

    def schedule_access(self, i: int, only: int | None = None) -> None:
        """Schedule channel access of every backlogged AC of an idle node."""
        if not self.idle[i]:
            return
        acc_at, bo, gen, has_data = self.acc_at[i], self.bo[i], self.acc_gen[i], self.mac.has_data
        base = self.idle_since[i]
        for a in (range(len(acc_at)) if only is None else (only,)):
            if acc_at[a] is not None or not has_data(i, a):
                continue
            at = max(self.t, base + self.aifs[a] + bo[a] * self.slot)
            acc_at[a] = at
            gen[a] += 1
            self.push(at, self._access, i, a, gen[a])

    def _access(self, i: int, a: int, gen: int) -> None:
        if gen != self.acc_gen[i][a]:
            return
        self.acc_at[i][a] = None
        if self.txing[i] or self.exch[i] is not None:
            # internal collision with another AC of the same node in the same slot
            self.cw[i][a] = min(2 * self.cw[i][a] + 1, self.cwmax[a])
            self.bo[i][a] = int(self.rng.integers(0, self.cw[i][a] + 1))
            return
        self.bo[i][a] = 0
        self.mac.start_exchange(i, a)

    def end_exchange(self, i: int, a: int, success: bool, reset: bool = False) -> None:
        """Close node ``i``'s exchange: adjust CW, draw the post-backoff, sense again."""
        if success or reset:
            self.cw[i][a] = self.cwmin[a]
        else:
            self.cw[i][a] = min(2 * self.cw[i][a] + 1, self.cwmax[a])
        self.bo[i][a] = int(self.rng.integers(0, self.cw[i][a] + 1))
        self.exch[i] = None
        self.update_idle(i)

    def nav_end(self, i: int) -> None:
        self.update_idle(i)

    # ---- PPDUs on the air -------------------------------------------------------------
    def new_ppdu(self, tx: int, rx: int, kind: str, ac: int, start: int, dur: int, **kw) -> int:
        """Record a PPDU and schedule its start; returns its id."""
        pid = len(self.ppdus)
        row = {"ppdu": pid, "tx": tx, "rx": rx, "kind": kind, "ac": ac, "start_ns": start,
               "end_ns": start + dur, "answers": -1, "dur_us": 0, "n_mpdus": 1, "psdu_bytes": 0,
               "ba_ssn": -1, "ba_bitmap": 0, "rx_ok": False, "rx_deaf": False, "collided_with": "",
               **kw}
        self.ppdus.append(row)
        if start <= self.t:
            self._start(pid)
        else:
            self.push(start, self._start, pid)
        return pid

    def _start(self, pid: int) -> None:
        p = self.ppdus[pid]
        tx = p["tx"]
        self.txing[tx] = True
        self.recent.append(pid)
        self._longest = max(self._longest, p["end_ns"] - p["start_ns"])
        # a PPDU that ended before the longest one could have started cannot overlap it
        horizon = self.t - self._longest
        while self.recent and self.ppdus[self.recent[0]]["end_ns"] < horizon:
            self.recent.popleft()
        self.update_idle(tx)
        for r in self.hearers[tx]:
            self.busy[r] += 1
            self.update_idle(r)
        self.push(p["end_ns"], self._end, pid)

    def overlaps(self, pid: int, r: int) -> list[int]:
        """PPDUs other than ``pid`` that node ``r`` hears or sends while ``pid`` is on the air."""
        hr = self._hears[r]
        return [q for q, tx in self._in_air_with(pid) if tx == r or hr[tx]]

    def _in_air_with(self, pid: int) -> list[tuple[int, int]]:
        """``(ppdu, transmitter)`` of every other recent PPDU overlapping ``pid`` in time."""
        pp = self.ppdus
        p = pp[pid]
        s, e = p["start_ns"], p["end_ns"]
        out = []
        for q in self.recent:
            o = pp[q]
            if o["start_ns"] < e and o["end_ns"] > s and q != pid:
                out.append((q, o["tx"]))
        return out

    def _end(self, pid: int) -> None:
        p = self.ppdus[pid]
        tx, t = p["tx"], self.t
        self.txing[tx] = False
        decoded = {}
        others = self._in_air_with(pid)          # one scan of the air for every hearer
        busy = self.busy
        for r in self.hearers[tx]:
            busy[r] -= 1
            if others:
                hr = self._hears[r]
                decoded[r] = not any(q_tx == r or hr[q_tx] for _, q_tx in others)
            else:
                decoded[r] = True             # alone on the air
        rx = p["rx"]
        if rx >= 0:
            p["rx_ok"] = decoded.get(rx, False)
            if not p["rx_ok"] and rx in decoded:
                hr = self._hears[rx]
                qs = [q for q, q_tx in others if q_tx == rx or hr[q_tx]]
                p["collided_with"] = " ".join(str(q) for q in qs)
                p["rx_deaf"] = any(self.ppdus[q]["tx"] == rx for q in qs)
        if p["dur_us"]:
            until = t + p["dur_us"] * 1000
            for r, ok in decoded.items():
                if ok and r != rx and until > self.nav[r]:
                    self.nav[r] = until
                    self.push(until, self.nav_end, r)
        self.mac.on_end(pid, decoded)
        self.update_idle(tx)
        for r in self.hearers[tx]:
            self.update_idle(r)
