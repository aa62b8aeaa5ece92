#!/bin/sh
# tshark's reading of the PPI / Prism / AVS captures in ../captures/radio/ (oracle of
# tests/decode/test_radio_headers.py; tshark is not needed at test time).
# A-MPDU reassembly of PPI is off so every subframe keeps its own fields.
# Usage: sh tests/data/tshark_radio/make_fixtures.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
caps="$here/../captures/radio"
FIELDS="frame.number frame.len
wlan_radio.phy wlan_radio.data_rate wlan_radio.frequency wlan_radio.channel wlan_radio.signal_dbm
wlan_radio.noise_dbm wlan_radio.timestamp wlan_radio.short_preamble
ppi.80211-common.tsft ppi.80211-common.flags.fcs ppi.80211-common.flags.fcs-invalid ppi.80211-common.chan.flags
ppi.80211n-mac.flags ppi.80211n-mac.ampdu_id ppi.80211n-mac-phy.mcs ppi.80211n-mac-phy.dbmant0.signal
ppi.80211n-mac-phy.dbmant0.noise
prism.did.mactime prism.did.rssi prism.did.rate prism.did.channel prism.did.noise prism.did.frmlen
wlancap.length wlancap.mactime wlancap.channel wlancap.data_rate wlancap.antenna wlancap.ssi_type
wlancap.dbm_antsignal wlancap.dbm_antnoise wlancap.preamble
wlan.fc.type_subtype wlan.ta wlan.seq"
args=""
for f in $FIELDS; do args="$args -e $f"; done
tshark --version | head -1 > "$here/TSHARK_VERSION"
for cap in "$caps"/*.pcap; do
    name=$(basename "$cap")
    # shellcheck disable=SC2086
    tshark -r "$cap" -n -o ppi.reassemble:FALSE -T fields -E header=y -E separator=/t \
        -E occurrence=f -E quote=n $args 2>/dev/null > "$here/$name.tsv"
    echo "$name: $(tail -n +2 "$here/$name.tsv" | wc -l) frames"
done
