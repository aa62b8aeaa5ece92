"""TCP/UDP analysis of a frame table, in data-flow order: ``segments`` (flow ids, MAC
duplicates), ``sequence`` (sequence classes, goodput, delivery), ``acks`` (ACKs,
retransmission kinds), ``rtt`` (RTT samples, RTO, handshakes), ``flows`` (per-direction
totals) -- numpy columns in and out, helpers in ``columns`` -- and ``frames``, the
DataFrame API over them. Per-quantity DataFrame tables (issue 14): ``inflight`` (bytes in
flight), ``icmp`` (echo RTTs), ``udp`` (loss, reordering, RFC 3550 jitter), ``wired`` (a
wired capture joined to the 802.11 frames)."""
