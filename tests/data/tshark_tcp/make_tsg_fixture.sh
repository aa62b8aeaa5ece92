#!/bin/sh
# The time-sequence graph oracle (Wireshark 4.0.17), run from this directory: every TCP frame's
# time, stream, ends, relative seq/ack, length, calculated window (value << scale) and
# Wireshark's retransmission flag (tests/web/test_tsg.py).
set -e
tshark -r ../captures/ns3-11n-ht20-hidden-snifferA-nearAP.pcap -Y tcp \
  -o tcp.relative_sequence_numbers:TRUE -o tcp.analyze_sequence_numbers:TRUE \
  -T fields -E header=y -E separator=/t \
  -e frame.time_epoch -e tcp.stream -e ip.src -e tcp.srcport -e ip.dst -e tcp.dstport \
  -e tcp.seq -e tcp.len -e tcp.ack -e tcp.window_size -e tcp.analysis.retransmission -e wlan.fc.retry \
  > ns3-hidden-tsg-snifferA-nearAP.tsv 2>/dev/null
