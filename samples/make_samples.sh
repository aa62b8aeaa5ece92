#!/bin/sh
# Regenerates the shipped sample outputs (see docs/scenarios.md). Deterministic: same bytes
# every time (gzip -n drops the timestamp). Frames are cut to 128 bytes (wire length kept);
# pcaps and the large truth CSVs are gzip-compressed (sniffsync and tshark read .gz directly).
set -e
cd "$(dirname "$0")"
rm -rf hidden-node fairness clean
python -m sniffsync simulate hidden-node -o hidden-node --seconds 2 --set snaplen=128
python -m sniffsync simulate fairness -o fairness --seconds 3 --set snaplen=128 --set mcs=0
python -m sniffsync simulate clean -o clean --seconds 0.5 --set snaplen=128
gzip -9n ./*/*.pcap ./*/truth/captured_*.csv ./*/truth/mpdus.csv ./*/truth/ppdus.csv
