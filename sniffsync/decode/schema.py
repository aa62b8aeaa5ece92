"""The frame table's column contract: one declarative row per column.

Every stage past the reader reads these names; ``docs/columns.md`` is generated
from this table (``python -m sniffsync.decode.schema``) and a test keeps the two equal.
Missing values are nulls (pandas nullable dtypes), never zeros.
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["Column", "COLUMNS", "MERGE_COLUMNS", "DTYPES", "PHY_NAMES", "column_doc"]


class Column(NamedTuple):
    name: str
    dtype: str       # pandas dtype string
    unit: str
    source: str      # field it comes from (radiotap bit, 802.11 field, ...)
    meaning: str


PHY_NAMES = ["dsss", "cck", "ofdm", "ht", "vht", "he", "unknown"]

C = Column
COLUMNS: list[Column] = [
    # capture record
    C("sniffer", "int16", "", "input order", "index of the input file (0-based)"),
    C("frame", "int64", "", "record number", "1-based number of the frame in its file"),
    C("ts_ns", "int64", "ns", "pcap/pcapng record timestamp", "capture time, ns since the Unix epoch"),
    C("caplen", "int32", "bytes", "record header", "bytes captured"),
    C("wirelen", "int32", "bytes", "record header", "original length on the wire"),
    C("linktype", "int32", "", "pcap header / IDB", "DLT/LINKTYPE of the record's interface"),
    C("bad", "category", "", "reader", "why the frame could not be fully decoded; null when fine"),
    # radiotap
    C("rt_len", "UInt16", "bytes", "radiotap it_len; PPI/Prism/AVS header length", "radio header length"),
    C("mpdu_len", "Int32", "bytes", "wirelen - rt_len", "original 802.11 frame length (FCS included only when rt_flags 0x10 says so)"),
    C("tsft_us", "Int64", "us", "radiotap bit 0 TSFT; PPI TSF; Prism MAC time (low 32 bits); AVS mactime", "MAC timestamp of the receiving hardware"),
    C("rt_flags", "UInt8", "", "radiotap bit 1 Flags", "raw radiotap flags byte"),
    C("fcs_bad", "boolean", "", "radiotap Flags 0x40; PPI flags 0x4; CRC-32 check (Prism, AVS)", "frame failed its FCS check"),
    C("short_preamble", "boolean", "", "radiotap Flags 0x02", "DSSS short preamble"),
    C("rate_kbps", "UInt32", "kbit/s", "radiotap bit 2 Rate x500; PPI, Prism, AVS rate", "legacy data rate"),
    C("freq_mhz", "UInt16", "MHz", "radiotap bit 3 Channel; PPI; Prism/AVS channel number", "channel centre frequency"),
    C("chan_flags", "UInt16", "", "radiotap bit 3 Channel", "raw channel flags"),
    C("signal_dbm", "Int8", "dBm", "radiotap bit 5 (first occurrence)", "antenna signal"),
    C("noise_dbm", "Int8", "dBm", "radiotap bit 6 (first occurrence)", "antenna noise"),
    C("antenna", "UInt8", "", "radiotap bit 11 (first occurrence)", "antenna index"),
    C("phy", "category", "", "radiotap MCS/VHT/HE/Rate/Channel", "PHY: " + "/".join(PHY_NAMES)),
    C("mcs", "UInt8", "", "radiotap bit 19 / 21 / 23", "MCS index (HT: 0-76; VHT/HE per user 0)"),
    C("nss", "UInt8", "", "HT MCS/8+1 (32-76 by table); VHT mcs_nss; HE data6 NSTS (halved with STBC; null when 0)", "spatial streams"),
    C("bw_mhz", "UInt16", "MHz", "radiotap MCS/VHT/HE bandwidth", "channel width of the PPDU"),
    C("gi_ns", "UInt16", "ns", "radiotap MCS/VHT/HE GI", "guard interval (400/800/1600/3200)"),
    C("ldpc", "boolean", "", "radiotap MCS FEC / VHT coding / HE data1", "LDPC coding"),
    C("stbc", "UInt8", "", "radiotap MCS STBC streams / VHT,HE STBC bit", "HT: N_STBC (0-3); VHT/HE: 1 if STBC"),
    C("ness", "UInt8", "", "radiotap MCS Ness", "HT extension spatial streams"),
    C("ht_format", "category", "", "radiotap MCS flags 0x08", "HT mixed ('mf') or greenfield ('gf')"),
    C("he_format", "category", "", "radiotap HE data1 bits 0-1", "su / ext_su / mu / trig"),
    C("he_ltf_size", "UInt8", "", "radiotap HE data5", "HE-LTF size: 1, 2 or 4 (x)"),
    C("he_n_ltf", "UInt8", "", "radiotap HE data5", "number of HE-LTF symbols"),
    C("he_pe_disambig", "boolean", "", "radiotap HE data5", "PE disambiguity bit"),
    C("ampdu_ref", "Int64", "", "radiotap bit 20 reference", "A-MPDU reference number (scoped per sniffer)"),
    C("ampdu_last", "boolean", "", "radiotap bit 20 flags 0x4/0x8", "last subframe (null when not known)"),
    C("ampdu_delim_crc_bad", "boolean", "", "radiotap bit 20 flags 0x10/0x20", "delimiter CRC error"),
    C("rt_timestamp", "Int64", "see rt_timestamp_unit", "radiotap bit 22", "timestamp field value"),
    C("rt_timestamp_unit", "category", "", "radiotap bit 22 unit", "ms/us/ns (radiotap.org unit codes 0-2)"),
    C("rt_timestamp_pos", "category", "", "radiotap bit 22 sampling position", "first_mpdu_bit/plcp_sig_acq/eo_ppdu/eo_mpdu/unknown"),
    C("zero_len_psdu", "UInt8", "", "radiotap bit 26", "0-length-PSDU type (0 sounding, 1 not captured, 255 vendor)"),
    C("lsig_length", "UInt16", "bytes", "radiotap bit 27", "L-SIG length"),
    C("lsig_rate", "UInt8", "", "radiotap bit 27", "L-SIG rate code"),
    # 802.11
    C("type", "UInt8", "", "frame control", "0 mgmt, 1 control, 2 data, 3 extension"),
    C("subtype", "UInt8", "", "frame control", "subtype 0-15"),
    C("type_subtype", "UInt16", "", "frame control", "Wireshark encoding type<<4|subtype (0x1b RTS, 0x28 QoS data); control-wrapper inner"),
    C("fc_flags", "UInt8", "", "frame control byte 1", "raw flags: to/from DS, more frag, retry, pwr, more data, protected, +HTC/order"),
    C("to_ds", "boolean", "", "frame control", "To DS"),
    C("from_ds", "boolean", "", "frame control", "From DS"),
    C("retry", "boolean", "", "frame control", "Retry bit"),
    C("protected", "boolean", "", "frame control", "Protected frame (payload not decoded)"),
    C("duration_us", "UInt16", "us", "Duration/ID (bit 15 clear)", "NAV duration; null for AIDs"),
    C("aid", "UInt16", "", "Duration/ID of PS-Poll", "association ID"),
    C("ra", "UInt64", "", "address 1", "receiver address (48-bit int; colon-hex in exports)"),
    C("ta", "UInt64", "", "address 2", "transmitter address"),
    C("bssid", "UInt64", "", "address by DS bits", "BSSID (null when DS bits are 11)"),
    C("sa", "UInt64", "", "address by DS bits", "source address"),
    C("da", "UInt64", "", "address by DS bits", "destination address"),
    C("seq", "UInt16", "", "sequence control", "sequence number"),
    C("frag", "UInt8", "", "sequence control", "fragment number"),
    C("tid", "UInt8", "", "QoS control / BAR-BA control", "traffic identifier"),
    C("amsdu", "boolean", "", "QoS control bit 7", "A-MSDU present"),
    C("htc", "boolean", "", "+HTC/order bit on QoS/mgmt", "HT control field present"),
    C("ba_type", "category", "", "BA/BAR control", "basic/compressed/multi_tid/extended_compressed/gcr/glk_gcr/multi_sta"),
    C("ba_ssn", "UInt16", "", "BA/BAR starting sequence control", "starting sequence number (1st record)"),
    C("ba_bitmap", "category", "", "BA bitmap", "bitmap bytes as sent (hex in exports)"),
    C("ba_bitmap_lo", "UInt64", "", "BA bitmap, first 8 bytes little-endian", "bit i acknowledges ssn+i"),
    C("ba_n_tid", "UInt8", "", "multi-TID BA", "number of TID records"),
    C("beacon_tsf_us", "UInt64", "us", "beacon/probe resp Timestamp", "sender's TSF when the frame was built"),
    C("beacon_interval_tu", "UInt16", "TU", "beacon/probe resp", "beacon interval"),
    C("ssid", "category", "", "SSID element", "network name (null when absent)"),
    C("fcs", "UInt32", "", "last 4 bytes when present", "frame check sequence as sent"),
    C("ba_n_records", "UInt16", "", "BA/BAR information field", "records decoded (1; per TID; per AID TID Info); docs/blockack.md"),
    C("ba_info", "category", "", "BA/BAR control + information", "BA/BAR Control + Information (hex); airtime.blockack.ba_records"),
    C("assoc_aid", "UInt16", "", "(re)association response AID", "AID the AP assigns to the destination STA"),
    # payload
    C("ethertype", "UInt16", "", "LLC/SNAP, Ethernet or cooked header", "network protocol"),
    C("ip_src", "category", "", "IPv4/IPv6 header", "source address"),
    C("ip_dst", "category", "", "IPv4/IPv6 header", "destination address"),
    C("ip_proto", "UInt8", "", "IPv4 protocol / IPv6 next header", "transport protocol"),
    C("ip_len", "UInt32", "bytes", "IPv4 total length / IPv6 payload+40", "IP datagram length"),
    C("ip_id", "UInt16", "", "IPv4 identification", "IPv4 ID"),
    C("sport", "UInt16", "", "TCP/UDP header", "source port"),
    C("dport", "UInt16", "", "TCP/UDP header", "destination port"),
    C("tcp_seq", "UInt32", "", "TCP header", "sequence number (raw)"),
    C("tcp_ack", "UInt32", "", "TCP header", "acknowledgement number (raw)"),
    C("tcp_flags", "UInt16", "", "TCP header", "flags (FIN 0x01 .. CWR 0x80, NS 0x100)"),
    C("tcp_win", "UInt16", "", "TCP header", "window field, unscaled"),
    C("tcp_wscale", "UInt8", "", "TCP option 3 (SYN)", "window scale shift"),
    C("tcp_mss", "UInt16", "bytes", "TCP option 2 (SYN)", "maximum segment size"),
    C("tcp_payload_len", "Int32", "bytes", "IP length - headers", "TCP payload bytes"),
    C("tcp_tsval", "UInt32", "", "TCP option 8", "timestamp value"),
    C("tcp_tsecr", "UInt32", "", "TCP option 8", "timestamp echo reply"),
    C("tcp_sack", "boolean", "", "TCP option 5", "SACK blocks present"),
    C("udp_len", "UInt16", "bytes", "UDP header", "UDP length incl. header"),
    C("icmp_type", "UInt8", "", "ICMP / ICMPv6 header", "message type (8/0 echo request/reply; v6: 128/129)"),
    C("icmp_code", "UInt8", "", "ICMP / ICMPv6 header", "message code"),
    C("icmp_id", "UInt16", "", "ICMP echo header", "echo identifier (echo messages only)"),
    C("icmp_seq", "UInt16", "", "ICMP echo header", "echo sequence number (echo messages only)"),
    C("udp_w0", "UInt32", "", "UDP payload bytes 0-3, big-endian", "iperf2: sequence number; iperf3: send time s"),
    C("udp_w1", "UInt32", "", "UDP payload bytes 4-7, big-endian", "iperf2: send time s; iperf3: send time µs"),
    C("udp_w2", "UInt32", "", "UDP payload bytes 8-11, big-endian", "iperf2: send time µs; iperf3: sequence number"),
    C("tcp_sack_blocks", "category", "", "TCP option 5", "SACK blocks as 'LE-RE,LE-RE' (raw sequence numbers, option order)"),
]

# the columns `merge` adds to the frame table (sniffsync.sync.copies.merged_table); not
# decoded from a capture, so not in COLUMNS
MERGE_COLUMNS: list[Column] = [
    C("merged_id", "int64", "", "merge", "the transmission (group of copies) this row is"),
    C("sniffers_heard", "int64", "", "merge", "bitmask of the sniffers that heard it"),
    C("n_heard", "int16", "", "merge", "number of sniffers that heard it"),
    C("best_sniffer", "int16", "", "merge", "sniffer of the strongest copy (the row written)"),
    C("unsynced", "bool", "", "merge", "its sniffer's clock could not be synced (own clock kept)"),
    C("signal_dbm_s<k>", "Int8", "dBm", "merge", "signal of sniffer k's copy (null: not heard)"),
    C("ts_err_ns", "Int64", "ns", "merge (sync/retime.py)",
      "error bound of ts_ns: TSFT ~1 µs; protocol-inferred: the anchor's + 2 µs per step; host clock: 3 x its residual scale; null: unsynced"),
    C("ts_src", "category", "", "merge (sync/retime.py)",
      "where ts_ns came from: tsft (this copy's TSFT), other_sniffer (a TSFT sniffer's copy), protocol (SIFS/A-MPDU timing against well-placed frames), host (the host clock through the fit)"),
]
del C

DTYPES = {c.name: c.dtype for c in COLUMNS}


def column_doc() -> str:
    """Markdown table of every column, the text of docs/columns.md."""
    head = ("# Frame table columns\n\nOne row per captured frame. Generated from "
            "`sniffsync/decode/schema.py` (`python -m sniffsync.decode.schema > docs/columns.md`).\n"
            "Missing values are nulls. MAC addresses are 48-bit integers in memory and "
            "colon-hex in exports; `ba_bitmap` is hex in exports.\n\n"
            "| column | dtype | unit | source | meaning |\n|---|---|---|---|---|\n")
    rows = "".join(f"| `{c.name}` | {c.dtype} | {c.unit} | {c.source} | {c.meaning} |\n"
                   for c in COLUMNS)
    merge = ("\n## Columns `merge` adds\n\n| column | dtype | unit | source | meaning |\n|---|---|---|---|---|\n"
             + "".join(f"| `{c.name}` | {c.dtype} | {c.unit} | {c.source} | {c.meaning} |\n"
                       for c in MERGE_COLUMNS))
    return head + rows + merge


if __name__ == "__main__":
    print(column_doc(), end="")
