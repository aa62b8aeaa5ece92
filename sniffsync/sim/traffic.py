"""Upper layers of the simulation: UDP CBR and TCP bulk flows, routing through the AP.

Endpoints are the radio nodes (index ``0..n-1``) and one wired ``server`` (index ``n``)
behind the AP (fixed one-way delay). Every packet is one row of a columnar packet table
(lists appended once per packet; numpy arrays at the end for the encoder).

TCP is a NewReno-style sender without window inflation: slow start, congestion
avoidance, fast retransmit on three duplicate ACKs with partial-ACK retransmission,
RFC 6298 RTO (min ``rto_min_ns``, exponential back-off, go-back-N), a three-way
handshake, the timestamp option on every segment and cumulative delayed ACKs (every second segment or 40 ms).
"""
from __future__ import annotations

import numpy as np

from sniffsync.sim.scenarios import AC_PARAMS

__all__ = ["Traffic", "PKT_COLS"]

PKT_COLS = ["flow", "proto", "src", "dst", "ip_id", "sport", "dport", "tcp_seq", "tcp_ack",
            "tcp_flags", "tcp_win", "tsval", "tsecr", "payload", "hdr", "created_ns"]
SYN, ACK, PSH, SYNACK = 0x02, 0x10, 0x08, 0x12
TCP_HDR = {SYN: 40, SYNACK: 40}      # SYN options: MSS, SACK-perm, TS, NOP, WS = 20 bytes
TCP_DATA_HDR = 32                    # NOP NOP TS = 12 bytes of options
AC_INDEX = {a: i for i, a in enumerate(AC_PARAMS)}


class Traffic:
    """Packet table, routing and the flows' state machines, driven by the engine's events."""

    def __init__(self, eng, flows: list[dict]):
        self.e = eng
        self.cfg = eng.cfg
        self.server = eng.n
        self.pk = {c: [] for c in PKT_COLS}
        self._cols = [self.pk[c] for c in PKT_COLS]
        self.ip_len: list[int] = []
        eng.mac.ip_len = self.ip_len
        eng.mac.deliver = self.forward
        names = {nm: i for i, nm in enumerate(eng.names)}
        names["server"] = self.server
        self.flows = []
        self.delivered: list[tuple] = []          # (flow, t_ns, payload bytes) at the app
        for k, f in enumerate(flows):
            st = dict(f, id=k, src=names[f["src"]], dst=names[f["dst"]], ac=AC_INDEX[f["ac"]],
                      sport=40000 + k, dport=5001 if f["kind"] == "tcp" else 6001,
                      start=int(round(f["start_s"] * 1e9)),
                      stop=int(round(f["stop_s"] * 1e9)) if f.get("stop_s") is not None else None)
            self.flows.append(st)
            eng.push(st["start"], self._start, k)

    # ---- packets and routing ------------------------------------------------------------
    def packet(self, f, src, dst, sport, dport, **kw) -> int:
        pid = len(self.ip_len)
        get = kw.get
        row = (f["id"], 6 if f["kind"] == "tcp" else 17, src, dst, pid & 0xFFFF, sport, dport,
               get("tcp_seq", 0), get("tcp_ack", 0), get("tcp_flags", 0), get("tcp_win", 0),
               get("tsval", 0), get("tsecr", 0), get("payload", 0), get("hdr", 8), self.e.t)
        for col, v in zip(self._cols, row):          # same order as PKT_COLS
            col.append(v)
        self.ip_len.append(20 + row[14] + row[13])
        return pid

    def emit(self, pkt: int) -> None:
        """Send ``pkt`` from its source endpoint."""
        src = self.pk["src"][pkt]
        if src == self.server:
            self.e.push(self.e.t + self.cfg["wired_delay_ns"], self.forward, self.e.ap, pkt,
                        self.e.t + self.cfg["wired_delay_ns"])
        else:
            self.forward(src, pkt, self.e.t)

    def forward(self, node: int, pkt: int, t: int) -> None:
        """Packet ``pkt`` is at ``node`` (by radio, wire, or freshly made): route it."""
        dst, ap = self.pk["dst"][pkt], self.e.ap
        if dst == node:
            self.receive(node, pkt)
        elif node == ap and dst == self.server:
            self.e.push(t + self.cfg["wired_delay_ns"], self.receive, self.server, pkt)
        else:
            hop = dst if node == ap else ap
            ac = self.flows[self.pk["flow"][pkt]]["ac"]
            self.e.mac.enqueue(node, ac, hop, pkt)

    def receive(self, ep: int, pkt: int) -> None:
        f = self.flows[self.pk["flow"][pkt]]
        if f["kind"] == "udp":
            self.delivered.append((f["id"], self.e.t, self.pk["payload"][pkt]))
        elif ep == f["dst"]:
            self._tcp_rx(f, pkt)
        else:
            self._tcp_ack_rx(f, pkt)

    def _start(self, k: int) -> None:
        f = self.flows[k]
        if f["kind"] == "udp":
            size = int(f.get("payload", self.cfg["udp_payload"]))
            f["size"] = size
            f["gap"] = max(1, int(round((size + 28) * 8 * 1e9 / f["rate_bps"])))
            self._udp(k)
        else:
            self._tcp_open(f)

    def _udp(self, k: int) -> None:
        f, t = self.flows[k], self.e.t
        if f["stop"] is not None and t >= f["stop"]:
            return
        self.emit(self.packet(f, f["src"], f["dst"], f["sport"], f["dport"], payload=f["size"]))
        self.e.push(t + f["gap"], self._udp, k)

    # ---- TCP sender -------------------------------------------------------------------------
    def _tsval(self, f) -> int:
        return (self.e.t // 1_000_000 + 1000 * f["id"] + 7) & 0xFFFFFFFF

    def _tcp_open(self, f) -> None:
        f.update(isn=(0x1000_0000 * (f["id"] + 1) + 12345) & 0xFFFFFFFF, irs=0x2000_0000 + f["id"],
                 est=False, una=0, nxt=0, cwnd=2.0, ssth=1e9, dup=0, rec=-1, inrec=False,
                 srtt=None, rttvar=0, rto=self.cfg["rto_init_ns"], gen=0, sent={}, rexmit=set(),
                 rcv_nxt=0, ooo=set(), last_ts=0, syn_seen=False)
        self._send_syn(f)

    def _send_syn(self, f) -> None:
        pkt = self.packet(f, f["src"], f["dst"], f["sport"], f["dport"], tcp_seq=f["isn"],
                          tcp_flags=SYN, tcp_win=65535, tsval=self._tsval(f), hdr=TCP_HDR[SYN])
        self.emit(pkt)
        self._arm(f)

    def _arm(self, f) -> None:
        f["gen"] += 1
        self.e.push(self.e.t + f["rto"], self._rto, f["id"], f["gen"])

    def _seg(self, f, k: int) -> None:
        mss = self.cfg["mss"]
        if k in f["sent"]:
            f["rexmit"].add(k)
        else:
            f["sent"][k] = self.e.t
        pkt = self.packet(f, f["src"], f["dst"], f["sport"], f["dport"],
                          tcp_seq=(f["isn"] + 1 + k * mss) & 0xFFFFFFFF,
                          tcp_ack=(f["irs"] + 1) & 0xFFFFFFFF, tcp_flags=ACK | PSH,
                          tcp_win=(self.cfg["rwnd_segs"] * mss) >> 7 & 0xFFFF,
                          tsval=self._tsval(f), tsecr=f["last_ts"], payload=mss, hdr=TCP_DATA_HDR)
        self.emit(pkt)

    def _pump(self, f) -> None:
        """Send new segments while the window allows and the flow is on."""
        if not f["est"] or (f["stop"] is not None and self.e.t >= f["stop"]):
            return
        wnd = min(int(f["cwnd"]), self.cfg["rwnd_segs"])
        was_idle = f["nxt"] == f["una"]
        while f["nxt"] - f["una"] < wnd:
            self._seg(f, f["nxt"])
            f["nxt"] += 1
        if was_idle and f["nxt"] > f["una"]:
            self._arm(f)

    def _rto(self, k: int, gen: int) -> None:
        f = self.flows[k]
        if gen != f["gen"]:
            return
        f["rto"] = min(2 * f["rto"], 60_000_000_000)
        if not f["est"]:
            self._send_syn(f)
            return
        if f["nxt"] == f["una"]:
            return
        f["ssth"] = max((f["nxt"] - f["una"]) / 2, 2.0)
        f["cwnd"], f["dup"], f["inrec"] = 1.0, 0, False
        f["nxt"] = f["una"]                     # go-back-N
        self._seg(f, f["nxt"])
        f["nxt"] += 1
        self._arm(f)

    def _tcp_ack_rx(self, f, pkt) -> None:
        """An ACK (or the SYN-ACK) reaches the TCP sender."""
        t, pk = self.e.t, self.pk
        if pk["tcp_flags"][pkt] == SYNACK:
            if not f["est"]:
                f["est"], f["rto"] = True, self.cfg["rto_init_ns"]
                f["last_ts"] = pk["tsval"][pkt]
                f["gen"] += 1
                self._pump(f)
            return
        if not f["est"]:
            return
        f["last_ts"] = pk["tsval"][pkt]
        ack = ((pk["tcp_ack"][pkt] - f["isn"] - 1) & 0xFFFFFFFF) // self.cfg["mss"]
        if ack > f["una"]:
            last = ack - 1
            if last in f["sent"] and last not in f["rexmit"]:
                self._rtt(f, t - f["sent"][last])
            acked = ack - f["una"]
            f["una"] = max(f["una"], ack)
            f["nxt"] = max(f["nxt"], f["una"])
            f["dup"] = 0
            if f["inrec"]:
                if ack > f["rec"]:
                    f["inrec"], f["cwnd"] = False, f["ssth"]
                else:
                    self._seg(f, f["una"])      # partial ACK: next hole
            elif f["cwnd"] < f["ssth"]:
                f["cwnd"] += acked
            else:
                f["cwnd"] += acked / f["cwnd"]
            if f["nxt"] > f["una"]:
                self._arm(f)
            else:
                f["gen"] += 1
            self._pump(f)
        elif ack == f["una"] and f["nxt"] > f["una"]:
            f["dup"] += 1
            if f["dup"] == 3 and not f["inrec"]:
                f["ssth"] = max((f["nxt"] - f["una"]) / 2, 2.0)
                f["cwnd"], f["rec"], f["inrec"] = f["ssth"], f["nxt"] - 1, True
                self._seg(f, f["una"])

    def _rtt(self, f, r: int) -> None:
        if f["srtt"] is None:
            f["srtt"], f["rttvar"] = r, r / 2
        else:
            f["rttvar"] = 0.75 * f["rttvar"] + 0.25 * abs(f["srtt"] - r)
            f["srtt"] = 0.875 * f["srtt"] + 0.125 * r
        f["rto"] = max(self.cfg["rto_min_ns"], int(f["srtt"] + 4 * f["rttvar"]))

    # ---- TCP receiver -------------------------------------------------------------------------
    def _tcp_rx(self, f, pkt) -> None:
        pk = self.pk
        mss = self.cfg["mss"]
        back = dict(tsval=self._tsval(f), tsecr=pk["tsval"][pkt])
        if pk["tcp_flags"][pkt] == SYN:
            f["syn_seen"] = True
            ack = self.packet(f, f["dst"], f["src"], f["dport"], f["sport"], tcp_seq=f["irs"],
                              tcp_ack=(f["isn"] + 1) & 0xFFFFFFFF, tcp_flags=SYNACK,
                              tcp_win=65535, hdr=TCP_HDR[SYNACK], **back)
            self.emit(ack)
            return
        k = ((pk["tcp_seq"][pkt] - f["isn"] - 1) & 0xFFFFFFFF) // mss
        if k >= f["rcv_nxt"]:
            f["ooo"].add(k)
        start = f["rcv_nxt"]
        while f["rcv_nxt"] in f["ooo"]:
            f["ooo"].discard(f["rcv_nxt"])
            f["rcv_nxt"] += 1
        if f["rcv_nxt"] > start:
            self.delivered.append((f["id"], self.e.t, (f["rcv_nxt"] - start) * mss))
        # delayed ACK (RFC 1122/5681): every second in-order segment, else within 40 ms;
        # out-of-order or hole-filling segments are ACKed at once
        if f["rcv_nxt"] == start + 1 and not f["ooo"] and not f.get("held"):
            f["held"], f["back"] = True, back
            f["dgen"] = f.get("dgen", 0) + 1
            self.e.push(self.e.t + 40_000_000, self._delack, f["id"], f["dgen"])
            return
        self._send_ack(f, back)

    def _delack(self, k: int, gen: int) -> None:
        f = self.flows[k]
        if f.get("held") and gen == f["dgen"]:
            self._send_ack(f, f["back"])

    def _send_ack(self, f, back) -> None:
        mss = self.cfg["mss"]
        f["held"] = False
        ack = self.packet(f, f["dst"], f["src"], f["dport"], f["sport"],
                          tcp_seq=(f["irs"] + 1) & 0xFFFFFFFF,
                          tcp_ack=(f["isn"] + 1 + f["rcv_nxt"] * mss) & 0xFFFFFFFF, tcp_flags=ACK,
                          tcp_win=(self.cfg["rwnd_segs"] * mss) >> 7 & 0xFFFF, hdr=TCP_DATA_HDR,
                          **back)
        self.emit(ack)

    def table(self) -> dict:
        """The packet table as numpy columns (plus ``ip_len``)."""
        out = {c: np.asarray(v, np.int64) for c, v in self.pk.items()}
        out["ip_len"] = np.asarray(self.ip_len, np.int64)
        return out
