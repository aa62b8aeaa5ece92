#!/bin/sh
# The iperf2 header oracle (Wireshark 4.0.17's iperf2 dissector). Run from this directory;
# the capture is written by make_capture.py (hand-built datagrams, designed answers there).
set -e
tshark -r ../captures/udp/iperf2_hand.pcap -d udp.port==5001,iperf2 -T fields -E header=y \
  -E separator=/t -e frame.number -e frame.time_epoch -e ip.src -e ip.id -e udp.srcport \
  -e iperf2.udp.sequence -e iperf2.udp.sec -e iperf2.udp.usec > iperf2_hand.tsv 2>/dev/null
