"""How the ns-3 bodies in tests/decode/test_block_ack_variants.py were made (not run by the tests):
ns-3.44 (pip package ns3 3.44.post0) CtrlBAckResponseHeader / CtrlBAckRequestHeader::Serialize
through the cppyy bindings. `python3 ns3_encode.py` prints the BA/BAR Control + Information bytes.
"""
from ns import ns
import cppyy
def ser(h):
    p = ns.Packet()
    p.AddHeader(h)
    n = p.GetSize()
    v = cppyy.gbl.std.vector['uint8_t'](n)
    p.CopyData(v.data(), n)
    return bytes(ord(v[i]) if isinstance(v[i], str) else v[i] for i in range(n)).hex()
BT = ns.BlockAckType
def resp(variant, lens, setup):
    h = ns.CtrlBAckResponseHeader()
    v = cppyy.gbl.std.vector['uint8_t']()
    for l in lens: v.push_back(l)
    h.SetType(BT(variant, v))
    setup(h)
    return ser(h)
for L in (8, 32, 64, 128):
    def s(h):
        h.SetTidInfo(5, 0); h.SetStartingSequence(100, 0); h.SetReceivedPacket(100, 0); h.SetReceivedPacket(100 + 8*L - 1, 0)
    try: print("compressed", L, resp(BT.COMPRESSED, [L], s))
    except Exception as e: print("compressed", L, "ERR", e)
def ms(h):
    for i, L in enumerate([4, 8, 16, 32, 64, 128]):
        h.SetAid11(i + 1, i); h.SetAckType(False, i); h.SetTidInfo(i % 8, i); h.SetStartingSequence(10 * i, i); h.SetReceivedPacket(10 * i + 1, i)
try: print("multista", resp(BT.MULTI_STA, [4, 8, 16, 32, 64, 128], ms))
except Exception as e: print("multista ERR", e)
def ms2(h):
    h.SetAid11(7, 0); h.SetAckType(True, 0); h.SetTidInfo(3, 0)
    h.SetAid11(2045, 1); h.SetAckType(True, 1); h.SetTidInfo(14, 1); h.SetUnassociatedStaAddress(ns.Mac48Address("00:11:22:33:44:55"), 1)
    h.SetAid11(9, 2); h.SetAckType(False, 2); h.SetTidInfo(6, 2); h.SetStartingSequence(4095, 2); h.SetReceivedPacket(0, 2)
pass
for L in (8, 32):
    def g(h):
        h.SetStartingSequence(7, 0); h.SetGcrGroupAddress(ns.Mac48Address("01:00:5e:00:00:01")); h.SetReceivedPacket(8, 0)
    try: print("gcr", L, resp(BT.GCR, [L], g))
    except Exception as e: print("gcr", L, "ERR", e)
def b(h):
    h.SetTidInfo(3, 0); h.SetStartingSequence(2, 0); h.SetReceivedPacket(2, 0); h.SetReceivedFragment(4, 1)
print("basic", resp(BT.BASIC, [128], b))
for var in ("COMPRESSED", "GCR", "BASIC", "EXTENDED_COMPRESSED"):
    try:
        r = ns.CtrlBAckRequestHeader(); r.SetType(ns.BlockAckReqType(getattr(ns.BlockAckReqType, var))); r.SetTidInfo(6); r.SetStartingSequence(33)
        if var == "GCR": r.SetGcrGroupAddress(ns.Mac48Address("01:00:5e:00:00:01"))
        print("bar", var, ser(r))
    except Exception as e: print("bar", var, "ERR", e)
