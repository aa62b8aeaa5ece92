#!/bin/sh
# Regenerate the tshark oracle fixtures (Wireshark 4.0.17). Run from this directory.
# One TSV per ns-3 hidden-node capture: raw header fields (used to build a frame table
# when the reader is not wanted) and Wireshark's TCP analysis of the same frames.
set -e
for s in A-nearAP B-nearSTA1 C-nearSTA2; do
  tshark -r ../captures/ns3-11n-ht20-hidden-sniffer$s.pcap -Y "tcp or udp" \
    -o tcp.relative_sequence_numbers:TRUE -o tcp.analyze_sequence_numbers:TRUE \
    -T fields -E header=y -E occurrence=f -E separator=/t \
    -e frame.number -e frame.time_epoch -e wlan.ta -e wlan.ra -e wlan.seq -e wlan.fc.retry \
    -e ip.src -e ip.dst -e ip.proto -e ip.len -e tcp.srcport -e tcp.dstport \
    -e udp.srcport -e udp.dstport -e udp.length \
    -e tcp.seq_raw -e tcp.ack_raw -e tcp.flags -e tcp.window_size_value -e tcp.len \
    -e tcp.options.timestamp.tsval -e tcp.options.timestamp.tsecr \
    -e tcp.analysis.retransmission -e tcp.analysis.fast_retransmission \
    -e tcp.analysis.spurious_retransmission -e tcp.analysis.out_of_order \
    -e tcp.analysis.duplicate_ack -e tcp.analysis.ack_rtt -e tcp.analysis.bytes_in_flight \
    -e tcp.analysis.initial_rtt -e tcp.stream \
    > ns3-hidden-sniffer$s.tsv 2>/dev/null
done
# Delivered bytes oracle (issue 13 item 6): every TCP frame's stream, direction, relative
# sequence/ACK numbers, payload length and flags; the receiver's cumulative ACK progress
# per direction is what reached the application (see tests/tcp/test_holes.py).
for s in A-nearAP B-nearSTA1; do   # C hears none of the receiver's ACKs
  tshark -r ../captures/ns3-11n-ht20-hidden-sniffer$s.pcap -Y tcp \
    -o tcp.relative_sequence_numbers:TRUE -T fields -E header=y -E separator=/t \
    -e frame.time_epoch -e tcp.stream -e ip.src -e tcp.srcport -e ip.dst -e tcp.dstport \
    -e tcp.seq -e tcp.len -e tcp.ack -e tcp.flags -e wlan.fc.retry \
    > ns3-hidden-acks-sniffer$s.tsv 2>/dev/null
done
