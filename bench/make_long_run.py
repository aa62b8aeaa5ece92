"""Write a long multi-sniffer run (hours, tens of millions of frames) as tcpdump would.

    python bench/make_long_run.py OUT --hours 6 --sniffers 3 --rate 500 --snaplen 160 --seed 1

One 5 GHz BSS (an AP and ``--stations`` stations) on the true clock: beacons every
102.4 TU from the AP (a few hundred µs late when it waits for the medium), and exchanges
back to back with random gaps: A-MPDUs of 2-16 QoS-data subframes answered by a
Block-Ack (a third of them after RTS/CTS), single data frames and short (TCP-ACK-like)
frames answered by an ACK, 5 % of single frames retried. ``--rate`` is frames per second
on the air. Each sniffer hears an overlapping subset (per transmitter a probability:
the first sits by the AP, the others by half of the stations each) and writes a classic
pcap (µs stamps, LINKTYPE 127) with snaplen ``--snaplen`` (caplen < len: the FCS of long
frames is cut, as with ``tcpdump -s``). Radiotap: TSFT (= the PPDU's end, µs), Flags
(FCS at end), Rate or MCS, Channel, signal, A-MPDU status.

Clocks (the truth file, ``truth.json``): sniffer s's TSF reads
``true + offset_s + phase_s(true) + jitter`` (jitter per PPDU, Gaussian; TSFT rounded to
µs), where ``phase_s`` integrates a drift that follows a temperature profile: ppm at
knots every ``KNOT_S`` s (a base ppm + a sinusoidal temperature cycle of 1.5-3 h and
+/- 10-18 ppm + a small random walk), linear in between (:func:`local_ns` evaluates it exactly). Host stamps: the
true epoch time + an NTP-like offset + exponential latency, non-decreasing. The bench
scores a merge against these clocks, never against our fit.

Streams: one ``CHUNK_S`` of air at a time, numpy per chunk (no loop per packet).
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np

CHUNK_S = 10                 # seconds of air generated at a time
KNOT_S = 60                  # the truth's drift knots (s)
T0_EPOCH_NS = 1_767_225_600_000_000_000      # 2026-01-01 00:00 UTC: the run's true start
BEACON_US, SIFS_US, DIFS_US = 102_400, 16, 34
NDBPS = np.array([26, 52, 78, 104, 156, 208, 234, 260])     # HT20 1SS long GI, MCS 0-7
# kind -> (type/subtype byte, legacy rate Mb/s (0: HT))
BEACON, RTS, CTS, DATA, ACK, BA = range(6)
FC0 = np.array([0x80, 0xB4, 0xC4, 0x88, 0xD4, 0x94], np.uint8)
RATE = np.array([6, 24, 24, 0, 24, 24])
# radiotap layouts: (present word, length); offsets of the fields used below
RT_LEGACY, RT_HT, RT_AMPDU = (0x2F, 23), (0x8002B, 26), (0x18002B, 36)
FRAME_W = 256                # bytes of each 802.11 frame built (>= snaplen - 23)
BEACON_LEN = 180             # MPDU bytes with FCS


def airtime_us(kind, length, mcs):
    """TXTIME (µs) of a PPDU of ``length`` PSDU bytes: OFDM legacy or HT-mixed 20 MHz."""
    rate = RATE[kind]
    bits = 16 + 8 * length + 6
    legacy = 20 + 4 * -(-bits // np.maximum(4 * rate, 1))
    ht = 36 + 4 * -(-bits // NDBPS[mcs])
    return np.where(rate > 0, legacy, ht)


def mac(i):
    """``(n, 6)`` uint8 addresses: node i -> 02:00:00:00:00:i+1, -1 -> broadcast."""
    i = np.asarray(i)
    out = np.zeros((len(i), 6), np.uint8)
    out[:, 0], out[:, 5] = 2, (i + 1) & 0xFF
    out[i < 0] = 0xFF
    return out


# ---- the truth: clocks ----------------------------------------------------------------

def make_truth(hours, sniffers, seed, snaplen):
    """Per sniffer its clock; a run of fewer hours gets the start of a longer one's."""
    n_knots = int(hours * 3600 / KNOT_S) + 2
    t = np.arange(n_knots) * KNOT_S
    clocks = []
    for s in range(sniffers):
        rng = np.random.default_rng([seed, s])
        period_s = rng.uniform(1.5, 3.0) * 3600      # a temperature cycle (HVAC, day/night)
        amp, phi, base = rng.uniform(10.0, 18.0), rng.uniform(0, 2 * np.pi), rng.uniform(-25, 25)
        offset = int(rng.integers(1, 10_000) * 1_000_000_000 + rng.integers(0, 10**9))
        host_off = int(rng.normal(0, 2e6))
        walk = np.cumsum(rng.normal(0, 0.05, n_knots))               # last: a prefix of a longer run's
        ppm = base + amp * np.sin(2 * np.pi * t / period_s + phi) + walk
        clocks.append({"offset_ns": offset, "knot_s": KNOT_S, "ppm": np.round(ppm, 4).tolist(),
                       "jitter_ns": 200.0, "host_offset_ns": host_off,
                       "host_latency_ns": 30_000.0, "snaplen": snaplen[s % len(snaplen)]})
    return {"t0_epoch_ns": T0_EPOCH_NS, "hours": hours, "clocks": clocks}


def local_ns(clock: dict, true_ns):
    """The sniffer's TSF (ns, no jitter) at true time ``true_ns`` (ns since the run's start):
    offset + integral of the piecewise-linear drift."""
    t = np.asarray(true_ns, np.float64)
    k_ns = clock["knot_s"] * 1e9
    ppm = np.asarray(clock["ppm"], np.float64)
    cum = np.r_[0.0, np.cumsum((ppm[1:] + ppm[:-1]) / 2 * k_ns * 1e-6)]
    k = np.clip((t // k_ns).astype(np.int64), 0, len(ppm) - 2)
    dt = t - k * k_ns
    phase = cum[k] + (ppm[k] * dt + (ppm[k + 1] - ppm[k]) * dt ** 2 / (2 * k_ns)) * 1e-6
    return clock["offset_ns"] + t + phase


def true_ns_of(clock: dict, local):
    """Inverse of :func:`local_ns` (fixed point: the drift is << 1)."""
    local = np.asarray(local, np.float64)
    t = local - clock["offset_ns"]
    for _ in range(4):
        t = t - (local_ns(clock, t) - local)
    return t


# ---- the air: one chunk ------------------------------------------------------------------

class Air:
    """Carries sequence counters, ids and the last host stamps from chunk to chunk."""

    def __init__(self, rng, stations, rate):
        self.rng, self.n_sta, self.rate = rng, stations, rate
        self.seq = np.zeros(stations + 1, np.int64)     # per transmitter
        self.ppdu_id = 0

    def chunk(self, t0_us, t1_us):
        """Frames of ``[t0, t1)`` µs in time order: dict of per-frame arrays."""
        rng, n_sta = self.rng, self.n_sta
        n_ex = rng.poisson(self.rate * (t1_us - t0_us) / 1e6 / 5.5)
        ampdu = rng.random(n_ex) < 0.45
        rts = ampdu & (rng.random(n_ex) < 0.33)
        short = ~ampdu & (rng.random(n_ex) < 0.4)
        nsub = np.where(ampdu, rng.integers(2, 17, n_ex), 1)
        sta = rng.integers(1, n_sta + 1, n_ex)
        up = rng.random(n_ex) < 0.5
        tx, rx = np.where(up, sta, 0), np.where(up, 0, sta)
        mcs = rng.integers(2, 8, n_ex)
        sub_len = np.where(ampdu, 1538, np.where(short, 82, rng.integers(200, 1538, n_ex)))
        psdu = np.where(ampdu, nsub * (sub_len + 4 + (-(sub_len + 4) % 4)), sub_len)
        air_d = airtime_us(np.full(n_ex, DATA), psdu, mcs)
        air_r = np.where(ampdu, airtime_us(np.full(n_ex, BA), 32, 0), airtime_us(np.full(n_ex, ACK), 14, 0))
        air_rts, air_cts = airtime_us(np.array([RTS]), 20, 0)[0], airtime_us(np.array([CTS]), 14, 0)[0]
        pre = np.where(rts, air_rts + SIFS_US + air_cts + SIFS_US, 0)
        dur = pre + air_d + SIFS_US + air_r
        gap_mean = max(DIFS_US, (t1_us - t0_us - dur.sum()) / max(n_ex, 1))
        gap = DIFS_US + rng.exponential(gap_mean - DIFS_US + 1, n_ex).astype(np.int64)
        start = t0_us + np.cumsum(gap + dur) - dur
        # beacons at TBTT (late by the medium); exchanges overlapping one are deferred (dropped)
        tbtt = np.arange(-(-t0_us // BEACON_US), -(-t1_us // BEACON_US)) * BEACON_US
        b_start = tbtt + rng.integers(0, 300, len(tbtt))
        b_air = airtime_us(np.array([BEACON]), BEACON_LEN, 0)[0]
        j = np.searchsorted(b_start, start + dur + DIFS_US)
        ok = (start + dur < t1_us) & ((j == 0) | (b_start[np.maximum(j - 1, 0)] + b_air + DIFS_US < start))
        ok &= (j >= len(b_start)) | (b_start[np.minimum(j, len(b_start) - 1)] > start + dur)
        e = np.flatnonzero(ok)
        # frames of each kept exchange: [RTS, CTS,] data x nsub, response
        count = np.where(rts, 2, 0)[e] + nsub[e] + 1
        ex = np.repeat(e, count)
        pos = np.arange(len(ex)) - np.repeat(np.cumsum(count) - count, count)
        d0 = np.where(rts, 2, 0)[ex]
        kind = np.where(pos < d0, np.where(pos == 0, RTS, CTS),
                        np.where(pos < d0 + nsub[ex], DATA, np.where(ampdu[ex], BA, ACK)))
        data_end = start[ex] + pre[ex] + air_d[ex]
        t_end = np.select([kind == RTS, kind == CTS, kind == DATA],
                          [start[ex] + air_rts, start[ex] + air_rts + SIFS_US + air_cts, data_end],
                          data_end + SIFS_US + air_r[ex])
        f_tx = np.where((kind == DATA) | (kind == RTS), tx[ex], rx[ex])
        f_rx = np.where((kind == DATA) | (kind == RTS), rx[ex], tx[ex])
        length = np.select([kind == RTS, kind == DATA, kind == BA], [20, sub_len[ex], 32], 14)
        nav = np.select([kind == RTS, kind == CTS, kind == DATA],
                        [dur[ex] - air_rts, dur[ex] - air_rts - SIFS_US - air_cts,
                         SIFS_US + air_r[ex]], 0)
        retry = (kind == DATA) & ~ampdu[ex] & (rng.random(len(ex)) < 0.05)
        amp = (kind == DATA) & ampdu[ex]
        frames = {"t_end": t_end, "kind": kind, "tx": f_tx, "rx": f_rx, "len": length, "nav": nav,
                  "retry": retry, "mcs": mcs[ex], "ampdu": amp, "last": amp & (pos == d0 + nsub[ex] - 1),
                  "nsub": nsub[ex], "ex": ex}
        nb = len(tbtt)
        beacons = {"t_end": b_start + b_air, "kind": np.full(nb, BEACON), "tx": np.zeros(nb, np.int64),
                   "rx": np.full(nb, -1), "len": np.full(nb, BEACON_LEN), "nav": np.zeros(nb, np.int64),
                   "retry": np.zeros(nb, bool), "mcs": np.zeros(nb, np.int64), "ampdu": np.zeros(nb, bool),
                   "last": np.zeros(nb, bool), "nsub": np.ones(nb, np.int64), "ex": np.full(nb, -1)}
        f = {k: np.concatenate([frames[k], beacons[k]]) for k in frames}
        o = np.argsort(f["t_end"], kind="stable")
        f = {k: v[o] for k, v in f.items()}
        self._numbers(f)
        return f

    def _numbers(self, f) -> None:
        """Sequence numbers per transmitter (a retry repeats its frame's), A-MPDU ids, the
        BA's SSN, the FCS (random per transmission)."""
        n = len(f["kind"])
        has_seq = (f["kind"] == DATA) | (f["kind"] == BEACON)
        new = has_seq & ~f["retry"]
        tx = np.where(has_seq, f["tx"], -1)
        o = np.argsort(tx, kind="stable")
        grp_start = np.r_[0, np.flatnonzero(np.diff(tx[o])) + 1]
        c = np.cumsum(new[o])
        base = np.repeat(c[grp_start] - new[o][grp_start], np.diff(np.r_[grp_start, n]))
        rank = np.empty(n, np.int64)
        rank[o] = c - base - 1
        txs = np.maximum(f["tx"], 0)
        f["seq"] = np.where(has_seq, (self.seq[txs] + np.maximum(rank, 0)) % 4096, 0)
        np.add.at(self.seq, txs[new], 1)
        # a PPDU id per frame (the subframes of an A-MPDU share theirs); the BA acks its A-MPDU
        first = np.r_[True, (f["ex"][1:] != f["ex"][:-1]) | ~f["ampdu"][1:] | ~f["ampdu"][:-1]]
        f["ppdu"] = self.ppdu_id + np.cumsum(first) - 1
        self.ppdu_id = int(f["ppdu"][-1]) + 1 if n else self.ppdu_id
        ba = np.flatnonzero(f["kind"] == BA)
        f["ssn"] = np.zeros(n, np.int64)
        f["ssn"][ba] = f["seq"][ba - f["nsub"][ba]]
        f["fcs"] = self.rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)


def frame_bytes(f, ap_tsf_us) -> np.ndarray:
    """``(n, FRAME_W)`` uint8: each 802.11 frame as sent (its first FRAME_W bytes, FCS
    included when it fits)."""
    n = len(f["kind"])
    m = np.zeros((n, FRAME_W), np.uint8)
    k = f["kind"]
    up = f["tx"] > 0
    m[:, 0] = FC0[k]
    m[:, 1] = np.where(k == DATA, np.where(up, 0x01, 0x02), 0) | np.where(f["retry"], 0x08, 0)
    m[:, 2:4] = f["nav"].astype("<u2").view(np.uint8).reshape(n, 2)
    m[:, 4:10] = mac(f["rx"])
    two = k != CTS
    two &= k != ACK
    m[two, 10:16] = mac(f["tx"][two])
    seqc = (f["seq"] << 4).astype("<u2").view(np.uint8).reshape(n, 2)
    d = np.flatnonzero(k == DATA)
    m[d, 16:22] = mac(np.where(up[d], f["rx"][d] + 100, f["tx"][d] + 100))   # the far end
    m[d, 22:24] = seqc[d]
    m[d, 24] = 0                                                              # QoS: TID 0
    m[d, 26:34] = np.frombuffer(b"\xaa\xaa\x03\x00\x00\x00\x08\x00", np.uint8)
    ip_len = (f["len"][d] - 34 - 4).astype(">u2").view(np.uint8).reshape(-1, 2)
    m[d, 34], m[d, 36:38], m[d, 42], m[d, 43] = 0x45, ip_len, 64, 17
    m[d, 46:50] = [10, 0, 0, 1]
    m[d, 49] = f["tx"][d] + 1
    m[d, 50:54] = [10, 0, 1, 1]
    m[d, 53] = f["rx"][d] + 1
    m[d, 54:56], m[d, 56:58] = [0x13, 0x89], [0x13, 0x8A]                    # UDP 5001 -> 5002
    m[d, 58:60] = (f["len"][d] - 34 - 4 - 20).astype(">u2").view(np.uint8).reshape(-1, 2)
    b = np.flatnonzero(k == BEACON)
    m[b, 16:22] = mac(np.zeros(len(b), np.int64))
    m[b, 22:24] = seqc[b]
    m[b, 24:32] = np.asarray(ap_tsf_us, np.int64)[b].astype("<u8").view(np.uint8).reshape(-1, 8)
    m[b, 32], m[b, 34], m[b, 35] = 0x64, 0x11, 0x04
    m[b, 36:45] = np.frombuffer(b"\x00\x07testbed", np.uint8)
    m[b, 45:55] = np.frombuffer(b"\x01\x08\x8c\x12\x98\x24\xb0\x48\x60\x6c", np.uint8)
    a = np.flatnonzero(k == BA)
    m[a, 16], m[a, 17] = 0x04, 0x00                                           # compressed, TID 0
    m[a, 18:20] = (f["ssn"][a] << 4).astype("<u2").view(np.uint8).reshape(-1, 2)
    bitmap = (np.left_shift(np.uint64(1), f["nsub"][a - 1].astype(np.uint64)) - np.uint64(1))
    m[a, 20:28] = bitmap.astype("<u8").view(np.uint8).reshape(-1, 8)
    fits = np.flatnonzero(f["len"] <= FRAME_W)
    at = f["len"][fits] - 4
    fcs = f["fcs"][fits].astype("<u4").view(np.uint8).reshape(-1, 4)
    for i in range(4):
        m[fits, at + i] = fcs[:, i]
    return m


def records(f, m, rows, tsft_us, host_us, snaplen, signal) -> bytes:
    """The pcap records of frames ``rows`` (headers, radiotap, frame bytes cut at snaplen)."""
    k = f["kind"][rows]
    layout = np.where(f["ampdu"][rows], 2, np.where(k == DATA, 1, 0))
    rt_len = np.array([RT_LEGACY[1], RT_HT[1], RT_AMPDU[1]])[layout]
    present = np.array([RT_LEGACY[0], RT_HT[0], RT_AMPDU[0]], np.uint32)[layout]
    n = len(rows)
    width = 16 + 36 + FRAME_W
    x = np.zeros((n, width), np.uint8)
    wire = rt_len + f["len"][rows]
    cap = np.minimum(wire, snaplen)
    hdr = np.zeros((n, 4), np.uint32)
    hdr[:, 0], hdr[:, 1] = host_us // 1_000_000, host_us % 1_000_000
    hdr[:, 2], hdr[:, 3] = cap, wire
    x[:, :16] = hdr.astype("<u4").view(np.uint8)
    r = x[:, 16:]
    r[:, 2] = rt_len
    r[:, 4:8] = present.astype("<u4").view(np.uint8).reshape(n, 4)
    r[:, 8:16] = tsft_us.astype("<u8").view(np.uint8).reshape(n, 8)
    r[:, 16] = 0x10                                          # FCS at end
    r[:, 17] = np.where(layout == 0, 2 * RATE[k], 0)
    r[:, 18:22] = np.array([5180, 0x0140], "<u2").view(np.uint8)
    r[:, 22] = signal.astype(np.int8).view(np.uint8)
    ht = layout > 0
    r[ht, 23], r[ht, 25] = 0x07, f["mcs"][rows][ht]
    a = layout == 2
    r[a, 28:32] = f["ppdu"][rows][a].astype("<u4").view(np.uint8).reshape(-1, 4)
    r[a, 32] = 0x04 | np.where(f["last"][rows][a], 0x08, 0)
    body = m[rows]
    for lay, rl in enumerate((RT_LEGACY[1], RT_HT[1], RT_AMPDU[1])):
        g = layout == lay
        r[g, rl:rl + FRAME_W] = body[g, :width - 16 - rl]
    keep = np.arange(width)[None, :] < (16 + cap)[:, None]
    return x[keep].tobytes()


# ---- sniffers ------------------------------------------------------------------------------

def hear_prob(sniffers, stations):
    """Per sniffer and transmitter: sniffer 0 by the AP, the others by a share of the stations."""
    p = np.full((sniffers, stations + 1), 0.35)
    p[0, :] = 0.9
    p[:, 0] = 0.97
    for s in range(1, sniffers):
        near = (np.arange(1, stations + 1) % (sniffers - 1)) == (s - 1) % max(sniffers - 1, 1)
        p[s, 1:][near] = 0.97
    return p


def write_run(out: Path, hours, sniffers, rate, snaplen, seed, stations=6, progress=True) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    truth = make_truth(hours, sniffers, seed, snaplen)
    rng = np.random.default_rng(seed + 1000)
    air, p = Air(rng, stations, rate), hear_prob(sniffers, stations)
    names = [f"sniffer{chr(65 + s)}" for s in range(sniffers)]
    files = [open(out / f"{n}.pcap.part", "wb") for n in names]
    for fh, c in zip(files, truth["clocks"]):
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, c["snaplen"], 127))
    last_host = np.zeros(sniffers, np.int64)
    frames_in = np.zeros(sniffers, np.int64)
    trans = multi = 0
    end_us = int(hours * 3600e6)
    for t0 in range(0, end_us, CHUNK_S * 1_000_000):
        f = air.chunk(t0, min(t0 + CHUNK_S * 1_000_000, end_us))
        n = len(f["kind"])
        m = frame_bytes(f, f["t_end"] + 5_000_000_000)        # the AP's TSF: true + 5000 s
        heard = rng.random((sniffers, n)) < p[:, f["tx"]]
        trans += int(heard.any(0).sum())
        multi += int((heard.sum(0) >= 2).sum())
        true_ns = f["t_end"] * 1000
        for s, (fh, c) in enumerate(zip(files, truth["clocks"])):
            rows = np.flatnonzero(heard[s])
            jit = rng.normal(0, c["jitter_ns"], n)[f["ppdu"] - f["ppdu"][0]] if n else np.zeros(0)
            tsft = np.rint((local_ns(c, true_ns[rows]) + jit[rows]) / 1000).astype(np.int64)
            host = T0_EPOCH_NS + true_ns[rows] + c["host_offset_ns"] + rng.exponential(c["host_latency_ns"], len(rows))
            host_us = np.maximum.accumulate(np.r_[last_host[s], (host // 1000).astype(np.int64)])[1:]
            last_host[s] = host_us[-1] if len(host_us) else last_host[s]
            signal = -40 - 10 * s - rng.integers(0, 30, len(rows))
            fh.write(records(f, m, rows, tsft, host_us, c["snaplen"], signal))
            frames_in[s] += len(rows)
        if progress and t0 % (600 * 1_000_000) == 0:
            print(f"{t0 / 3.6e9:.2f} h: {frames_in.sum():,} frames", file=sys.stderr, flush=True)
    for fh, n in zip(files, names):
        fh.close()
        os.replace(out / f"{n}.pcap.part", out / f"{n}.pcap")
    truth.update(names=names, files=[f"{n}.pcap" for n in names], frames_in=frames_in.tolist(),
                 transmissions=trans, heard_by_2_or_more=multi, rate=rate, seed=seed, stations=stations)
    (out / "truth.json").write_text(json.dumps(truth))
    return truth


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--hours", type=float, default=6.0)
    ap.add_argument("--sniffers", type=int, default=3)
    ap.add_argument("--rate", type=float, default=500.0, help="frames per second on the air")
    ap.add_argument("--snaplen", type=int, nargs="+", default=[160], help="per sniffer (cycled)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stations", type=int, default=6)
    a = ap.parse_args(argv)
    if not all(64 <= s <= FRAME_W + RT_LEGACY[1] for s in a.snaplen):
        ap.error(f"--snaplen must be within 64..{FRAME_W + RT_LEGACY[1]}")
    t = write_run(a.out, a.hours, a.sniffers, a.rate, a.snaplen, a.seed, a.stations)
    print(f"{sum(t['frames_in']):,} frames ({t['frames_in']}), {t['transmissions']:,} transmissions, "
          f"{t['heard_by_2_or_more']:,} heard by >= 2", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
