"""Paths of the committed capture and tshark fixtures the campaign tests read."""
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
CAPTURE = DATA / "captures" / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap"
TSHARK_FRAMES = DATA / "tshark" / "ns3-11n-ht20-hidden-snifferA-nearAP.pcap.tsv.gz"
TSHARK_TCP = DATA / "tshark_tcp" / "ns3-hidden-snifferA-nearAP.tsv"
