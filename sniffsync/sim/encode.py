"""Frame bytes, built column-wise: 802.11 MPDUs (+ LLC/IPv4/TCP|UDP) and radiotap headers.

Each frame kind has a fixed header layout; a kind's headers are one ``(n, H)`` uint8
array written field by field (:func:`_put`), then scattered into one buffer of all
frames back to back. Payload bytes are zeros, so IPv4, TCP and UDP checksums are
computed exactly from the headers alone. The FCS is a real CRC-32.
"""
from __future__ import annotations

import zlib

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from sniffsync.decode.radiotap import FIELDS

__all__ = ["KINDS", "mpdu_bytes", "radiotap_headers", "assemble", "rt_layout", "SERVER_MAC"]

KINDS = {"beacon": 0, "rts": 1, "cts": 2, "ba": 3, "data": 4}
FC0 = np.array([0x80, 0xB4, 0xC4, 0x94, 0x88], np.uint8)      # type/subtype byte per kind
HDR = np.array([24, 16, 10, 28, 26], np.int64)                  # 802.11 header bytes (no FCS)
SERVER_MAC = 0x0200000001FE
_RATES_IE = bytes([1, 8, 0x8C, 0x12, 0x98, 0x24, 0xB0, 0x48, 0x60, 0x6C])   # 6B..54 Mb/s
_LLC = np.array([0xAA, 0xAA, 0x03, 0, 0, 0, 0x08, 0x00], np.uint8)


def _put(arr: np.ndarray, off: int, values, fmt: str) -> None:
    """Write ``values`` (one per row) at column ``off`` of ``arr`` in numpy format ``fmt``."""
    v = np.ascontiguousarray(np.asarray(values).astype(np.int64).astype(fmt))
    arr[:, off:off + v.dtype.itemsize] = v.view(np.uint8).reshape(len(arr), -1)


def _mac(arr: np.ndarray, off: int, values) -> None:
    v = np.asarray(values, np.int64)
    arr[:, off:off + 6] = ((v[:, None] >> np.arange(40, -1, -8)) & 0xFF).astype(np.uint8)


def _csum(words: np.ndarray) -> np.ndarray:
    """Internet checksum of rows of big-endian 16-bit words (int64 sums)."""
    s = words.sum(axis=1)
    for _ in range(3):
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def _be16(b: np.ndarray) -> np.ndarray:
    b = b.astype(np.int64)
    return b[:, 0::2] * 256 + b[:, 1::2]


def _l3(pk: dict, sel: np.ndarray, ip_of, mss: int) -> np.ndarray:
    """LLC/SNAP + IPv4 + TCP/UDP headers of packets ``sel`` as an ``(n, 8 + 20 + 40)`` array."""
    n = sel.size
    a = np.zeros((n, 68), np.uint8)
    a[:, 0:8] = _LLC
    ip = a[:, 8:28]
    proto, hdr = pk["proto"][sel], pk["hdr"][sel]
    ip_len, src, dst = pk["ip_len"][sel], ip_of(pk["src"][sel]), ip_of(pk["dst"][sel])
    ip[:, 0], ip[:, 8], ip[:, 9] = 0x45, 64, proto
    _put(ip, 2, ip_len, ">u2")
    _put(ip, 4, pk["ip_id"][sel], ">u2")
    _put(ip, 6, np.full(n, 0x4000), ">u2")                 # DF
    _put(ip, 12, src, ">u4")
    _put(ip, 16, dst, ">u4")
    _put(ip, 10, _csum(_be16(ip)), ">u2")
    l4 = a[:, 28:68]
    _put(l4, 0, pk["sport"][sel], ">u2")
    _put(l4, 2, pk["dport"][sel], ">u2")
    tcp = proto == 6
    l4len = ip_len - 20
    # TCP
    _put(l4, 4, np.where(tcp, pk["tcp_seq"][sel], 0), ">u4")
    _put(l4, 8, np.where(tcp, pk["tcp_ack"][sel], 0), ">u4")
    l4[:, 12] = np.where(tcp, (hdr // 4) << 4, 0)
    l4[:, 13] = np.where(tcp, pk["tcp_flags"][sel], 0)
    _put(l4, 14, np.where(tcp, pk["tcp_win"][sel], 0), ">u2")
    syn = tcp & (hdr == 40)
    opt = np.zeros((n, 20), np.uint8)
    opt[:, 0:4] = [1, 1, 8, 10]                              # NOP NOP TS
    _put(opt, 4, pk["tsval"][sel], ">u4")
    _put(opt, 8, pk["tsecr"][sel], ">u4")
    synopt = np.zeros((n, 20), np.uint8)
    synopt[:, 0:2], synopt[:, 4:8], synopt[:, 16:20] = [2, 4], [4, 2, 8, 10], [1, 3, 3, 7]
    _put(synopt, 2, np.full(n, mss + 12), ">u2")            # MSS option counts TS bytes back
    _put(synopt, 8, pk["tsval"][sel], ">u4")
    _put(synopt, 12, pk["tsecr"][sel], ">u4")
    l4[:, 20:40] = np.where(syn[:, None], synopt, np.where(tcp[:, None] & (hdr == 32)[:, None],
                                                           opt, 0))
    # UDP: length at 4, checksum at 6; clear the TCP-only bytes
    udp = ~tcp
    l4[udp, 4:40] = 0
    l4[udp, 4], l4[udp, 5] = l4len[udp] >> 8, l4len[udp] & 0xFF
    # checksum over pseudo-header + header (payload is zeros); header length = hdr bytes
    mask = np.arange(40)[None, :] < hdr[:, None]
    words = _be16(np.where(mask, l4, 0))
    pseudo = (src >> 16) + (src & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF) + proto + l4len
    c = _csum(np.concatenate([words, pseudo[:, None]], axis=1))
    c = np.where(udp & (c == 0), 0xFFFF, c)          # UDP: 0 would mean "no checksum"
    at = np.where(tcp, 16, 6)
    rows = np.arange(n)
    l4[rows, at], l4[rows, at + 1] = c >> 8, c & 0xFF
    return a


def mpdu_bytes(fr: dict, pk: dict, cfg: dict, ip_of) -> tuple[np.ndarray, np.ndarray]:
    """Every frame's MPDU bytes, FCS included: ``(buf uint8, off int64[n + 1])``.

    ``fr`` columns: kind, fc1, dur_us, ra, ta, a3, seq, tid, pkt, beacon_tsf_us, ba_ssn,
    ba_bitmap, length (MPDU bytes incl. FCS).
    """
    n = fr["kind"].size
    length = fr["length"]
    off = np.concatenate([[0], np.cumsum(length)])
    buf = np.zeros(int(off[-1]), np.uint8)
    kind = fr["kind"]
    ssid = cfg["ssid"].encode()
    for k in range(len(KINDS)):
        rows = np.flatnonzero(kind == k)
        if not rows.size:
            continue
        width = int(HDR[k]) + (68 if k == 4 else 12 + 2 + len(ssid) + 10 if k == 0 else 0)
        h = np.zeros((rows.size, width), np.uint8)
        h[:, 0], h[:, 1] = FC0[k], fr["fc1"][rows]
        _put(h, 2, fr["dur_us"][rows], "<u2")
        _mac(h, 4, fr["ra"][rows])
        if k != 2:
            _mac(h, 10, fr["ta"][rows])
        if k in (0, 4):
            _mac(h, 16, fr["a3"][rows])
            _put(h, 22, fr["seq"][rows] % 4096 * 16, "<u2")
        if k == 0:
            _put(h, 24, fr["beacon_tsf_us"][rows], "<u8")
            _put(h, 32, np.full(rows.size, cfg["beacon_interval_tu"]), "<u2")
            _put(h, 34, np.full(rows.size, 0x0001), "<u2")           # ESS
            h[:, 36:38] = [0, len(ssid)]
            h[:, 38:38 + len(ssid)] = np.frombuffer(ssid, np.uint8)
            h[:, 38 + len(ssid):] = np.frombuffer(_RATES_IE, np.uint8)
        if k == 3:
            _put(h, 16, 0x0004 | (fr["tid"][rows] << 12), "<u2")      # compressed BA
            _put(h, 18, fr["ba_ssn"][rows] % 4096 * 16, "<u2")
            _put(h, 20, fr["ba_bitmap"][rows].astype(np.uint64), "<u8")
        if k == 4:
            _put(h, 24, fr["tid"][rows], "<u2")                       # QoS: TID, normal ack
            l3 = _l3(pk, fr["pkt"][rows], ip_of, cfg["mss"])
            hl = 26 + 8 + 20 + pk["hdr"][fr["pkt"][rows]]
            h[:, 26:] = np.where(np.arange(68)[None, :] < (hl - 26)[:, None], l3, 0)
        _scatter(buf, off[rows], h, np.minimum(width, length[rows] - 4))
    ends = off[1:] - 4
    mv = memoryview(buf)
    fcs = np.fromiter((zlib.crc32(mv[a:b]) for a, b in zip(off[:-1].tolist(), ends.tolist())),
                      np.uint32, n)
    buf[ends[:, None] + np.arange(4)] = fcs.view(np.uint8).reshape(n, 4)
    return buf, off


def rt_layout(bits: list[int]) -> tuple[dict, int]:
    """Offsets of radiotap fields ``bits`` (ascending) and the header length (radiotap.org)."""
    pos, out = 8, {}
    for b in bits:
        f = FIELDS[b]
        pos += (-pos) % f.align
        out[b] = pos
        pos += f.size
    return out, pos


_BW_VHT = {20: 0, 40: 1, 80: 4, 160: 11}
_BW_HE = {20: 0, 40: 1, 80: 2, 160: 3}
_GI_HE = {800: 0, 1600: 1, 3200: 2}
_PHY_BIT = {"ht": 19, "vht": 21, "he": 23}


def radiotap_headers(cfg: dict, sn: dict, is_data: np.ndarray, rate_kbps: np.ndarray,
                     obs: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """Radiotap headers of the frames one sniffer writes, as ``[(rows, (n, L) uint8)]``.

    Legacy frames: TSFT, Flags, Rate, Channel, dBm signal. Data frames: TSFT, Flags,
    Channel, dBm signal, A-MPDU status (optional) and the MCS / VHT / HE field.
    """
    out = []
    flags = 0x10 if sn["fcs"] else 0
    phy = cfg["phy"]
    for data in (False, True):
        rows = np.flatnonzero(is_data == data)
        if not rows.size:
            continue
        bits = [0, 1] + ([] if data else [2]) + [3, 5]
        if data:
            bits += ([20] if sn["ampdu_status"] else []) + [_PHY_BIT[phy]]
            bits.sort()
        lay, length = rt_layout(bits)
        h = np.zeros((rows.size, length), np.uint8)
        _put(h, 2, np.full(rows.size, length), "<u2")
        _put(h, 4, np.full(rows.size, sum(1 << b for b in bits)), "<u4")
        _put(h, lay[0], obs["tsft_us"][rows], "<u8")
        h[:, lay[1]] = flags
        if 2 in lay:
            h[:, lay[2]] = rate_kbps[rows] // 500
        _put(h, lay[3], np.full(rows.size, cfg["freq_mhz"]), "<u2")
        _put(h, lay[3] + 2, np.full(rows.size, 0x0140), "<u2")      # 5 GHz, OFDM
        h[:, lay[5]] = obs["signal_dbm"][rows].astype(np.int8).view(np.uint8)
        if 20 in lay:
            _put(h, lay[20], obs["ampdu_ref"][rows], "<u4")
            _put(h, lay[20] + 4, 0x04 | np.where(obs["last"][rows], 0x08, 0), "<u2")
        mcs, nss, bw, gi, ldpc = cfg["mcs"], cfg["nss"], cfg["bw_mhz"], cfg["gi_ns"], cfg["ldpc"]
        if 19 in lay:
            o = lay[19]
            h[:, o] = 0x1F
            h[:, o + 1] = (1 if bw == 40 else 0) | (0x04 if gi == 400 else 0) | (0x10 if ldpc else 0)
            h[:, o + 2] = mcs + 8 * (nss - 1)
        if 21 in lay:
            o = lay[21]
            _put(h, o, np.full(rows.size, 0x0045), "<u2")           # STBC, GI, BW known
            h[:, o + 2] = 0x04 if gi == 400 else 0
            h[:, o + 3] = _BW_VHT[bw]
            h[:, o + 4] = (mcs << 4) | nss
            h[:, o + 8] = 1 if ldpc else 0
        if 23 in lay:
            o = lay[23]
            # data1: SU, MCS/coding/STBC/BW known; data2: GI + LTF count known;
            # data5: BW, GI, LTF size 2x (code 2), LTF count code 0 = 1 symbol (N_STS 1)
            d = [0x0020 | 0x0080 | 0x0200 | 0x4000, 0x0002 | 0x0004,
                 (mcs << 8) | (0x2000 if ldpc else 0), 0,
                 _BW_HE[bw] | (_GI_HE[gi] << 4) | (2 << 6) | ({1: 0, 2: 1, 3: 2, 4: 2}[nss] << 8),
                 nss & 0xF]
            for j, v in enumerate(d):
                _put(h, o + 2 * j, np.full(rows.size, v), "<u2")
        out.append((rows, h))
    return out


def assemble(parts, buf, off, frame_rows, fcs: bool, snaplen: int):
    """Radiotap + MPDU bytes of each written frame: ``(data, off, wirelen)`` for the writer."""
    n = frame_rows.size
    rt_len = np.zeros(n, np.int64)
    for rows, h in parts:
        rt_len[rows] = h.shape[1]
    mlen = off[frame_rows + 1] - off[frame_rows] - (0 if fcs else 4)
    wire = rt_len + mlen
    cap = np.minimum(wire, snaplen) if snaplen else wire
    out_off = np.concatenate([[0], np.cumsum(cap)])
    data = np.zeros(int(out_off[-1]), np.uint8)
    for rows, h in parts:
        _scatter(data, out_off[rows], h, np.minimum(h.shape[1], cap[rows]))
    body = np.maximum(cap - rt_len, 0)
    _ragged_copy(data, out_off[:-1] + rt_len, buf, off[frame_rows], body)
    return data, out_off, wire


_BLOCK_BYTES = 4 << 20          # rows copied per numpy call: bounded temporary memory


def _by_length(lens: np.ndarray):
    """``(length, rows)`` for each distinct positive length, rows cut into bounded blocks."""
    order = np.argsort(lens, kind="stable")
    uniq, first = np.unique(lens[order], return_index=True)
    for ln, rows in zip(uniq.tolist(), np.split(order, first[1:])):
        if ln > 0:
            step = max(1, _BLOCK_BYTES // ln)
            for lo in range(0, rows.size, step):
                yield ln, rows[lo:lo + step]


def _scatter(dst: np.ndarray, at: np.ndarray, rows_u8: np.ndarray, widths: np.ndarray) -> None:
    """``dst[at[i]:at[i] + widths[i]] = rows_u8[i, :widths[i]]`` for every row ``i``.

    Rows of one width go in one fancy-indexed assignment on a sliding-window view of
    ``dst`` (a memcpy per row in C, no per-byte index arrays).
    """
    for w, rows in _by_length(np.asarray(widths, np.int64)):
        sliding_window_view(dst, w, writeable=True)[at[rows]] = rows_u8[rows, :w]


def _ragged_copy(dst, dst_at, src, src_at, lens) -> None:
    """``dst[dst_at[i]:+lens[i]] = src[src_at[i]:+lens[i]]`` for every ``i`` (see :func:`_scatter`)."""
    for ln, rows in _by_length(np.asarray(lens, np.int64)):
        sliding_window_view(dst, ln, writeable=True)[dst_at[rows]] = \
            sliding_window_view(src, ln)[src_at[rows]]
