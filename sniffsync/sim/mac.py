"""MAC exchanges of the simulated BSS: A-MPDU building, RTS/CTS, Block-Ack, retries.

Per (transmitter, receiver, AC) a Block-Ack session keeps absolute sequence numbers
(the 12-bit field is ``seq % 4096``), the MPDUs waiting for (re)transmission and their
attempt counts. The recipient keeps a reorder buffer and answers each A-MPDU with a
compressed Block-Ack whose SSN is the lowest sequence number of the A-MPDU and whose bit
``j`` says whether ``SSN + j`` has been received (now or earlier). A dropped MPDU is
announced to the recipient directly (standing in for a BAR) so its buffer moves on.
"""
from __future__ import annotations

from bisect import insort
from collections import deque
from itertools import islice


from sniffsync.sim.medium import BA_BYTES, CTS_BYTES, RTS_BYTES
from sniffsync.sim.scenarios import AC_PARAMS, AC_TID

__all__ = ["Mac", "MPDU_COLS", "QOS_HDR", "LLC"]

QOS_HDR, LLC, FCS = 26, 8, 4
MPDU_COLS = ["ppdu", "index", "tx", "rx", "tid", "seq_abs", "retry", "attempt", "pkt",
             "mpdu_bytes", "rx_fate", "outcome", "why"]
ACS = ["bk", "be", "vi", "vo", "beacon"]     # access categories, as indexed by the engine's queues
_BEACON = ACS.index("beacon")
RX_START_DELAY_NS = 25_000       # aRxPHYStartDelay (OFDM): part of the CTS/BA timeout


def _ceil_us(ns: int) -> int:
    return -(-int(ns) // 1000)


def _ampdu_lengths(mpdu_bytes: list[int]) -> list[int]:
    """:func:`~sniffsync.sim.medium.ampdu_psdu_bytes` on a short list, without numpy's
    per-call overhead (one call per channel access)."""
    out, acc = [], 0
    for n in mpdu_bytes:
        sub = 4 + n
        out.append(acc + sub)
        acc += sub + (-sub) % 4
    return out


def _ba_bitmap(ssn: int, rb: list) -> int:
    """Compressed BA bitmap: bit ``j`` = ``ssn + j`` was received (below the reorder
    buffer's next expected number, or held in the buffer)."""
    bits = (1 << min(64, max(0, rb[0] - ssn))) - 1
    for s, pkt in rb[1].items():
        if pkt is not None and ssn <= s < ssn + 64:
            bits |= 1 << (s - ssn)
    return bits


class Mac:
    """Exchange logic driven by :class:`~sniffsync.sim.engine.Engine` events."""

    def __init__(self, eng):
        self.e = eng
        cfg = eng.cfg
        self.cfg = cfg
        n, k = eng.n, 5
        self.q = [[{} for _ in range(k)] for _ in range(n)]      # dst -> deque of pkt ids
        self.qlen = [[0] * k for _ in range(n)]
        self.pend_cnt = [[0] * k for _ in range(n)]
        self.sess: dict = {}          # (tx, rx, ac) -> [next_seq, pend list, info dict]
        self.rxbuf: dict = {}         # (tx, rx, ac) -> [next expected, {seq: pkt | None}]
        self.rts_fail = [[0] * k for _ in range(n)]
        self.beacon_pending = [False] * n
        self.mpdus: list[list] = []
        self.queue_drops: list[tuple] = []        # (t, node, pkt)
        self.deliver = None                       # set by traffic: fn(node, pkt, t)
        self.ip_len = None                        # set by traffic: list of IP lengths
        self.beacon_seq = 0
        self.beacon_bytes = 24 + 12 + 2 + len(cfg["ssid"].encode()) + 10 + FCS
        self.beacon_ns = eng.phy.legacy(self.beacon_bytes, cfg["beacon_rate_kbps"])
        self.acs = ["bk", "be", "vi", "vo", "beacon"]

    # ---- queues ---------------------------------------------------------------------
    def enqueue(self, i: int, a: int, dst: int, pkt: int) -> bool:
        """Queue packet ``pkt`` at node ``i`` for next hop ``dst``; False = tail drop."""
        if self.qlen[i][a] >= self.cfg["queue_limit"]:
            self.queue_drops.append((self.e.t, i, pkt))
            return False
        self.q[i][a].setdefault(dst, deque()).append(pkt)
        self.qlen[i][a] += 1
        self.e.schedule_access(i, a)
        return True

    def has_data(self, i: int, a: int) -> bool:
        if a == _BEACON:
            return self.beacon_pending[i]
        return self.qlen[i][a] > 0 or self.pend_cnt[i][a] > 0

    def tbtt(self) -> None:
        """Target beacon transmission time: queue a beacon at the AP, re-arm."""
        e = self.e
        self.beacon_pending[e.ap] = True
        e.schedule_access(e.ap, _BEACON)
        e.push(e.t + self.cfg["beacon_interval_tu"] * 1024_000, self.tbtt)

    def _session(self, i, dst, a):
        key = (i, dst, a)
        s = self.sess.get(key)
        if s is None:
            s = self.sess[key] = [0, [], {}]
        return s

    def mpdu_bytes(self, pkt: int) -> int:
        return QOS_HDR + LLC + self.ip_len[pkt] + FCS

    # ---- starting an exchange ------------------------------------------------------------
    def start_exchange(self, i: int, a: int) -> None:
        e, t = self.e, self.e.t
        if a == _BEACON:
            self.beacon_pending[i] = False
            e.exch[i] = {"kind": "beacon", "ac": a}
            tsf = t // 1000 + self.cfg["ap_tsf_offset_us"]
            self.beacon_seq += 1
            e.new_ppdu(i, -1, "beacon", a, t, self.beacon_ns, psdu_bytes=self.beacon_bytes,
                       beacon_tsf_us=tsf, mgmt_seq=self.beacon_seq % 4096)
            return
        dst = self._pick_dst(i, a)
        seqs, psdu, dur = self._plan(i, dst, a)
        ex = {"kind": "data", "ac": a, "dst": dst, "seqs": seqs, "psdu": psdu, "dur": dur}
        e.exch[i] = ex
        if self.e.nodes[i].get("rts"):
            ph = e.phy
            nav = _ceil_us(3 * e.sifs + ph.cts_ns + dur + ph.ba_ns)
            ex["rts"] = e.new_ppdu(i, dst, "rts", a, t, ph.rts_ns, dur_us=nav,
                                   psdu_bytes=RTS_BYTES, why="")
        else:
            self._send_data(i, t)

    def _pick_dst(self, i: int, a: int) -> int:
        """Retransmissions first (lowest destination index), else the oldest queued packet."""
        if self.pend_cnt[i][a]:
            for (tx, dst, ac), s in sorted(self.sess.items()):
                if tx == i and ac == a and s[1]:
                    return dst
        return min((dq[0], dst) for dst, dq in self.q[i][a].items() if dq)[1]

    def _plan(self, i: int, dst: int, a: int):
        """Largest A-MPDU (retries, then new packets) within the MPDU, BA-window and time caps."""
        cfg = self.cfg
        s = self._session(i, dst, a)
        pend, info = s[1], s[2]
        win_start = pend[0] if pend else s[0]
        room = min(cfg["max_mpdus"], cfg["ba_window"])
        old = pend[:room]
        dq = self.q[i][a].get(dst, deque())
        n_new = max(0, min(room - len(old), win_start + cfg["ba_window"] - s[0], len(dq)))
        new = list(islice(dq, n_new))
        ipl, base = self.ip_len, QOS_HDR + LLC + FCS
        psdu = _ampdu_lengths([base + ipl[info[q][0]] for q in old] + [base + ipl[p] for p in new])
        durs = self.e.phy.data_ns(psdu)
        txop = AC_PARAMS[self.acs[a]][3]
        limit = min(cfg["max_ppdu_us"], txop if txop else 1 << 40) * 1000
        k = max(1, sum(d <= limit for d in durs))
        seqs = old[:k]
        del pend[:len(seqs)]
        for p in new[:k - len(seqs)]:
            dq.popleft()
            self.qlen[i][a] -= 1
            info[s[0]] = [p, 0]
            seqs.append(s[0])
            s[0] += 1
        self.pend_cnt[i][a] -= len(old[:k])
        return seqs, int(psdu[k - 1]), int(durs[k - 1])

    def _send_data(self, i: int, start: int) -> None:
        e = self.e
        ex = e.exch[i]
        dst, a = ex["dst"], ex["ac"]
        info = self._session(i, dst, a)[2]
        pid = e.new_ppdu(i, dst, "data", a, start, ex["dur"], n_mpdus=len(ex["seqs"]),
                         psdu_bytes=ex["psdu"], dur_us=_ceil_us(e.sifs + e.phy.ba_ns))
        tid = AC_TID[self.acs[a]]
        mpdus, ipl, base = self.mpdus, self.ip_len, QOS_HDR + LLC + FCS
        first = len(mpdus)
        for idx, seq in enumerate(ex["seqs"]):
            it = info[seq]
            it[1] += 1
            mpdus.append([pid, idx, i, dst, tid, seq, it[1] > 1, it[1], it[0],
                          base + ipl[it[0]], "", "", ""])
        ex["rows"], ex["pid"] = list(range(first, len(mpdus))), pid

    # ---- end of a PPDU -----------------------------------------------------------------------
    def on_end(self, pid: int, decoded: dict) -> None:
        getattr(self, "_end_" + self.e.ppdus[pid]["kind"])(pid, decoded)

    def _end_beacon(self, pid, decoded):
        p = self.e.ppdus[pid]
        self.e.end_exchange(p["tx"], p["ac"], True)

    def _timeout(self, i, fn, *args):
        e = self.e
        e.push(e.t + e.sifs + e.slot + RX_START_DELAY_NS, self._guarded, i, e.exch[i], fn, args)

    def _guarded(self, i, ex, fn, args):
        if self.e.exch[i] is ex:
            fn(*args)

    def _end_rts(self, pid, decoded):
        e, p = self.e, self.e.ppdus[pid]
        i, rx, t = p["tx"], p["rx"], e.t
        if decoded.get(rx) and e.nav[rx] <= t and not e.txing[rx]:
            ph = e.phy
            e.new_ppdu(rx, i, "cts", p["ac"], t + e.sifs, ph.cts_ns, answers=pid,
                       psdu_bytes=CTS_BYTES, dur_us=max(0, p["dur_us"] - _ceil_us(e.sifs + ph.cts_ns)))
            return
        p["why"] = ("not_heard" if rx not in decoded else
                    ("deaf" if p["rx_deaf"] else "collided") if not decoded[rx] else "nav_busy" if e.nav[rx] > t else "deaf")
        self._timeout(i, self._fail_rts, i)

    def _end_cts(self, pid, decoded):
        e, p = self.e, self.e.ppdus[pid]
        i = p["rx"]
        if decoded.get(i):
            self.rts_fail[i][p["ac"]] = 0
            self._send_data(i, e.t + e.sifs)
        else:
            self._fail_rts(i)

    def _fail_rts(self, i):
        e = self.e
        ex = e.exch[i]
        a, dst = ex["ac"], ex["dst"]
        self.rts_fail[i][a] += 1
        give_up = self.rts_fail[i][a] >= self.cfg["rts_retry_limit"]
        s = self._session(i, dst, a)
        for seq in ex["seqs"]:
            if give_up:
                self._drop(i, dst, a, seq, [-1, -1, i, dst, AC_TID[self.acs[a]], seq,
                                            False, s[2][seq][1], s[2][seq][0], 0,
                                            "not_sent", "dropped", "rts_retry_limit"])
            else:
                insort(s[1], seq)
                self.pend_cnt[i][a] += 1
        if give_up:
            self.rts_fail[i][a] = 0
        e.end_exchange(i, a, False, reset=give_up)

    def _end_data(self, pid, decoded):
        e, p = self.e, self.e.ppdus[pid]
        i, rx, t, a = p["tx"], p["rx"], e.t, p["ac"]
        rows = e.exch[i]["rows"]
        if decoded.get(rx):
            ok = (e.rng.random(len(rows)) >= self.cfg["mpdu_error"]).tolist()
            rb = self.rxbuf.setdefault((i, rx, a), [0, {}])
            for r, good in zip(rows, ok):
                m = self.mpdus[r]
                m[10] = "ok" if good else "mpdu_error"
                if good and m[5] >= rb[0] and m[5] not in rb[1]:
                    rb[1][m[5]] = m[8]
            self._release(rx, rb, t)
            if any(ok):
                ssn = min(self.mpdus[r][5] for r in rows)
                bits = _ba_bitmap(ssn, rb)
                e.new_ppdu(rx, i, "ba", a, t + e.sifs, e.phy.ba_ns, answers=pid, psdu_bytes=BA_BYTES,
                           ba_ssn=ssn, ba_bitmap=bits, tid=AC_TID[self.acs[a]])
                return
        else:
            fate = ("not_heard" if rx not in decoded else
                    "deaf" if p["rx_deaf"] else "collided")
            for r in rows:
                self.mpdus[r][10] = fate
                self.mpdus[r][12] = "overlap " + p["collided_with"] if p["collided_with"] else ""
        self._timeout(i, self._fail_data, i, "no_ba")

    def _release(self, rx, rb, t):
        """Hand in-order MPDUs of a reorder buffer to the upper layer."""
        buf = rb[1]
        while rb[0] in buf:
            pkt = buf.pop(rb[0])
            rb[0] += 1
            if pkt is not None:
                self.deliver(rx, pkt, t)

    def _end_ba(self, pid, decoded):
        e, p = self.e, self.e.ppdus[pid]
        i = p["rx"]
        if not decoded.get(i):
            self._fail_data(i, "ba_lost")
            return
        ex = e.exch[i]
        ssn, bits = p["ba_ssn"], p["ba_bitmap"]
        s = self._session(i, ex["dst"], ex["ac"])
        for r in ex["rows"]:
            m = self.mpdus[r]
            j = m[5] - ssn
            if 0 <= j < 64 and (bits >> j) & 1:
                m[11] = "acked"
                del s[2][m[5]]
            else:
                self._retry_or_drop(i, ex["dst"], ex["ac"], m, "not_in_ba")
        e.end_exchange(i, ex["ac"], True)

    def _fail_data(self, i, why):
        e = self.e
        ex = e.exch[i]
        dropped = [self._retry_or_drop(i, ex["dst"], ex["ac"], self.mpdus[r], why)
                   for r in ex["rows"]]
        e.end_exchange(i, ex["ac"], False, reset=all(dropped))

    def _retry_or_drop(self, i, dst, a, m, why) -> bool:
        if not m[12]:
            m[12] = why
        if m[7] >= self.cfg["mpdu_retry_limit"]:
            m[11] = "dropped"
            self._drop(i, dst, a, m[5], None)
            return True
        m[11] = "retry"
        insort(self._session(i, dst, a)[1], m[5])
        self.pend_cnt[i][a] += 1
        return False

    def _drop(self, i, dst, a, seq, row):
        """Give up on ``seq``: forget it and tell the recipient to skip it."""
        del self._session(i, dst, a)[2][seq]
        if row is not None:
            self.mpdus.append(row)
        rb = self.rxbuf.setdefault((i, dst, a), [0, {}])
        if seq >= rb[0] and seq not in rb[1]:
            rb[1][seq] = None
        self._release(dst, rb, self.e.t)
