#!/bin/sh
# tshark's reading of ns-3 hidden-node sniffer B with its radiotap TSFT stripped by
# tests/sync/degrade.py (oracle of tests/sync/test_no_tsft.py: the stripped headers
# dissect cleanly; tshark is not needed at test time).
# Usage (from the repository root): sh tests/data/tshark_degrade/make_fixtures.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
PYTHONPATH=$PWD python3 -c "
import sys; sys.path[:0] = ['tests/sync']
from degrade import degrade
degrade('tests/data/captures/ns3-11n-ht20-hidden-snifferB-nearSTA1.pcap', '$tmp/B.pcap',
        strip=1.0, ppm=-18, offset_ns=7_200_000_000, jitter_us=20, seed=3)"
tshark -r "$tmp/B.pcap" -T fields -E occurrence=f -e radiotap.present.tsft -e radiotap.length \
    -e wlan.fc.type_subtype -e wlan.seq -e radiotap.dbm_antsignal -e wlan_radio.frequency \
    > "$here/B_stripped.tsv"
tshark --version | head -1 > "$here/TSHARK_VERSION"
rm -r "$tmp"
