#!/bin/sh
# Regenerate the tshark oracle fixtures for tests/test_frames_vs_tshark.py.
# Made with: TShark (Wireshark) 4.0.17 (Git v4.0.17 packaged as 4.0.17-0+deb12u3), Debian 12.
# The test needs only the committed *.tsv.gz files, never tshark itself.
# Usage: sh tests/data/tshark/make_fixtures.sh   (from anywhere)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
caps="$here/../captures"

# One -e per frame-table column that has a tshark counterpart (mapping in the test file).
# -E occurrence=f: first occurrence only (extended radiotap bitmaps repeat signal/antenna).
FIELDS="
frame.number frame.time_epoch frame.len frame.cap_len
radiotap.mactime radiotap.flags radiotap.flags.fcs radiotap.flags.badfcs radiotap.flags.preamble
radiotap.present.rate radiotap.datarate radiotap.channel.freq radiotap.channel.flags
radiotap.dbm_antsignal radiotap.dbm_antnoise radiotap.antenna
radiotap.mcs.index radiotap.mcs.bw radiotap.mcs.gi radiotap.mcs.fec radiotap.mcs.stbc radiotap.mcs.format
radiotap.vht.mcs.0 radiotap.vht.nss.0 radiotap.vht.bw radiotap.vht.gi radiotap.vht.coding.0 radiotap.vht.stbc
radiotap.he.data_1 radiotap.he.data_3.data_mcs radiotap.he.data_3.coding radiotap.he.data_3.stbc
radiotap.he.data_5.data_bw_ru_allocation radiotap.he.data_5.gi radiotap.he.data_6.nsts
radiotap.he.data_1.ppdu_format radiotap.he.data_5.ltf_symbol_size
radiotap.ampdu.reference radiotap.ampdu.flags.lastknown radiotap.ampdu.flags.last
wlan.fc.type_subtype wlan.flags wlan.fc.tods wlan.fc.fromds wlan.fc.retry wlan.fc.protected
wlan.duration wlan.aid wlan.ra wlan.ta wlan.bssid wlan.sa wlan.da wlan.seq wlan.frag wlan.qos.tid
wlan.qos.amsdupresent wlan.ba.basic.tidinfo wlan.ba.control.ba_type wlan.fixed.ssc.sequence wlan.ba.bm
wlan.fixed.timestamp wlan.fixed.beacon wlan.ssid wlan.fcs
llc.type ip.src ip.dst ip.proto ip.len ip.id ipv6.src ipv6.dst ipv6.nxt
tcp.srcport tcp.dstport udp.srcport udp.dstport udp.length
tcp.seq_raw tcp.ack_raw tcp.flags tcp.window_size_value tcp.len
tcp.options.mss_val tcp.options.wscale.shift tcp.options.timestamp.tsval tcp.options.timestamp.tsecr
"
args=""
for f in $FIELDS; do args="$args -e $f"; done

tshark --version | head -1 > "$here/TSHARK_VERSION"
for cap in "$caps"/*.pcap "$caps"/*.pcapng; do
    name=$(basename "$cap")
    # shellcheck disable=SC2086
    tshark -r "$cap" -n -T fields -E header=y -E separator=/t -E occurrence=f -E quote=n \
        -o tcp.relative_sequence_numbers:FALSE $args 2>/dev/null \
        | gzip -9n > "$here/$name.tsv.gz"
    echo "$name: $(zcat "$here/$name.tsv.gz" | tail -n +2 | wc -l) frames"
done
