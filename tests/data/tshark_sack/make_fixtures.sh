#!/bin/sh
# The SACK oracle (Wireshark 4.0.17), run from this directory after make_capture.py: every TCP
# frame's time, ends, raw seq/ack, length and SACK block edges (raw), for tests/decode/test_tcp_sack.py
# and tests/web/test_tsg_sack.py.
set -e
tshark -r ../captures/tcp/sack_hand.pcap -Y tcp -o tcp.relative_sequence_numbers:FALSE \
  -T fields -E header=y -E separator=/t \
  -e frame.number -e frame.time_epoch -e ip.src -e tcp.srcport -e ip.dst -e tcp.dstport \
  -e tcp.seq -e tcp.ack -e tcp.len -e tcp.options.sack_le -e tcp.options.sack_re \
  -e tcp.analysis.retransmission > sack_hand.tsv 2>/dev/null
