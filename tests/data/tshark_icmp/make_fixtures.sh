#!/bin/sh
# The ICMP echo oracle (Wireshark 4.0.17). Run from this directory.
# The capture: as root, `dumpcap -i lo -f "icmp or icmp6" -w ping_lo.pcapng -a duration:3`
# while `python3 make_capture.py` sends 12 echo requests to 127.0.0.1 and 12 to ::1 over raw
# sockets (the kernel answers) and one IPv4 request with a wrong checksum (left unanswered).
set -e
tshark -r ../captures/icmp/ping_lo.pcapng -T fields -E header=y -E separator=/t \
  -e frame.number -e frame.time_epoch -e ip.src -e ipv6.src -e icmp.type -e icmpv6.type \
  -e icmp.ident -e icmp.seq -e icmpv6.echo.identifier -e icmpv6.echo.sequence_number \
  -e icmp.resptime -e icmpv6.resptime -e icmp.resp_in -e icmpv6.resp_in \
  > ping_lo.tsv 2>/dev/null
