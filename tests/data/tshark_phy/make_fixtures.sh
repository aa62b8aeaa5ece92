#!/bin/sh
# Regenerate the tshark oracle fixtures of tests/test_ppdu.py / tests/test_phy.py.
# Run from this directory with Wireshark 4.0.17's tshark on PATH.
set -e
FIELDS="frame.number radiotap.mactime frame.len frame.cap_len radiotap.length radiotap.flags.fcs
 radiotap.flags.preamble wlan.fc.type_subtype wlan.ra wlan.ta wlan.fc.retry radiotap.datarate
 radiotap.channel.freq radiotap.dbm_antsignal radiotap.mcs.index radiotap.mcs.bw radiotap.mcs.gi
 radiotap.mcs.format radiotap.mcs.fec radiotap.mcs.stbc radiotap.vht.mcs.0 radiotap.vht.nss.0
 radiotap.vht.bw radiotap.vht.gi radiotap.vht.coding.0 radiotap.vht.stbc
 radiotap.he.data_1.ppdu_format radiotap.he.data_3.data_mcs radiotap.he.data_3.coding
 radiotap.he.data_5.data_bw_ru_allocation radiotap.he.data_5.gi radiotap.he.data_5.ltf_symbol_size
 radiotap.ampdu.reference radiotap.ampdu.flags.last wlan_radio.phy wlan_radio.duration
 wlan_radio.preamble"
ARGS=""
for f in $FIELDS; do ARGS="$ARGS -e $f"; done
for cap in ns3-11n-ht20-hidden-snifferA-nearAP ns3-11ac-vht80-snifferA-s256 ns3-11ax-he80-snifferA-s256; do
  tshark -r ../captures/$cap.pcap -T fields -E header=y -E separator=/t -E occurrence=f $ARGS \
    | gzip -9n > $cap.tsv.gz
done
