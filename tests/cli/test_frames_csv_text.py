"""Small CSV batches are formatted without Arrow (sniffsync.export.csvtext): the bytes must be
those of Arrow's CSV writer, the oracle here, on captures of every link layer and format."""
import os

import pytest

from sniffsync.cli.main import main
from sniffsync.export import csvtext

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "captures")
CAPS = ["ns3-11n-ht20-hidden-snifferC-nearSTA2.pcap", "wltrace_trace.pcap",
        "tcpdump_ieee802.11_exthdr.pcap", "fragattacks_ping_D_BP_bcast_ra-fromap.pcapng",
        "radio/pypacker_packets_prism.pcap", "radio/handbuilt_ppi_ht.pcap"]


def _frames(capsysbinary, monkeypatch, small, argv):
    monkeypatch.setattr(csvtext, "SMALL", small)
    capsysbinary.readouterr()
    assert main(["frames", "-q", *argv]) == 0
    return capsysbinary.readouterr().out


@pytest.mark.parametrize("cap", CAPS)
def test_text_rows_equal_arrow_csv(cap, capsysbinary, monkeypatch):
    argv = [os.path.join(DATA, cap)]
    arrow = _frames(capsysbinary, monkeypatch, -1, argv)
    text = _frames(capsysbinary, monkeypatch, 10**9, argv)
    assert arrow.count(b"\n") > 1 and text == arrow


def test_columns_subset_and_two_files(capsysbinary, monkeypatch):
    argv = [os.path.join(DATA, CAPS[1]), os.path.join(DATA, CAPS[3]),
            "--columns", "sniffer,ts_ns,ra,phy,bad,retry,mcs,ssid"]
    assert _frames(capsysbinary, monkeypatch, 10**9, argv) == _frames(capsysbinary, monkeypatch, -1, argv)


def test_header_as_arrow_writes_it():
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    from sniffsync.decode.schema import COLUMNS
    names = [c.name for c in COLUMNS] + ['odd "name", with comma']
    sink = io.BytesIO()
    pacsv.write_csv(pa.table({n: pa.array([], pa.int64()) for n in names}), sink,
                    write_options=pacsv.WriteOptions(quoting_style="needed"))
    assert csvtext.header(names) == sink.getvalue()
