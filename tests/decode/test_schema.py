"""The column contract: names the issue fixes, docs in sync, dtypes nullable."""
from pathlib import Path

from sniffsync.decode.schema import COLUMNS, column_doc

ROOT = Path(__file__).resolve().parents[2]

# The names later stages and checks read (issue #2): removing one breaks the contract.
CONTRACT = """sniffer frame ts_ns caplen wirelen linktype tsft_us rt_flags fcs_bad short_preamble
rate_kbps freq_mhz signal_dbm antenna phy mcs nss bw_mhz gi_ns ldpc stbc ampdu_ref ampdu_last type
subtype type_subtype retry protected to_ds from_ds duration_us ra ta bssid seq frag tid ba_ssn
ba_bitmap beacon_tsf_us beacon_interval_tu ssid ip_src ip_dst ip_proto sport dport tcp_seq tcp_ack
tcp_flags tcp_win tcp_payload_len tcp_tsval tcp_tsecr""".split()


def test_contract_columns_present():
    names = [c.name for c in COLUMNS]
    assert set(CONTRACT) <= set(names)
    assert len(names) == len(set(names))


def test_docs_match_schema():
    assert (ROOT / "docs" / "columns.md").read_text() == column_doc()


def test_optional_fields_are_nullable():
    # "Missing values are nulls, never zeros": only record fields may be plain numpy ints
    plain = {c.name for c in COLUMNS if c.dtype in ("int16", "int32", "int64")}
    assert plain == {"sniffer", "frame", "ts_ns", "caplen", "wirelen", "linktype"}
