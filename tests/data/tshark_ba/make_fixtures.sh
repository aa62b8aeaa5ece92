#!/bin/sh
# tshark oracle for tests/decode/test_block_ack_variants.py: the Block Ack fields of every
# BA / BAR / (re)association response of the captures that have them, and of the
# hand-built frames in hand_ba.pcap (written by the test module, run as a script).
# joined by ','. Made with TShark (Wireshark) 4.0.17 (Debian 12 4.0.17-0+deb12u3).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
caps="$here/../captures"
FIELDS="frame.number wlan.fc.type_subtype wlan.ba.control.ba_type wlan.ba.basic.tidinfo
wlan.fixed.ssc.fragment wlan.fixed.ssc.sequence wlan.ba.bm wlan.ba.bm.missing_frame
wlan.ba.multi_sta.aid11 wlan.ba.multi_sta.ack_type wlan.ba.multi_sta.tid wlan.ba.multi_sta.ra
wlan.ba.gcr_group_addr wlan.bar.mtid.tidinfo.value wlan.fixed.aid"
args=""
for f in $FIELDS; do args="$args -e $f"; done
run() {
    # shellcheck disable=SC2086
    tshark -r "$1" -n -Y 'wlan.fc.type_subtype in {0x18, 0x19, 0x01, 0x03}' -T fields -E header=y \
        -E separator=/t -E occurrence=a -E aggregator=, -E quote=n $args 2>/dev/null | gzip -9n > "$2"
}
for name in aircrack_pmkid_ba_bar.pcap ns3-11ax-ulofdma-ap-multista.pcap; do
    run "$here/$name" "$here/$name.tsv.gz"
done
for name in ns3-11ax-he80-snifferA-s256.pcap ns3-11ac-vht80-snifferA-s256.pcap \
            ns3-11n-ht20-hidden-snifferA-nearAP.pcap wltrace_trace.pcap fragattacks_ping_D_BP_bcast_ra-fromap.pcapng; do
    run "$caps/$name" "$here/$name.tsv.gz"
done
(cd "$here/../../.." && PYTHONPATH=. python3 tests/decode/test_block_ack_variants.py)
run "$here/hand_ba.pcap" "$here/hand_ba.pcap.tsv.gz"
