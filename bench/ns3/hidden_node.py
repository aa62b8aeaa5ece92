"""ns-3 hidden-node scenario with per-PPDU ground truth (issue 13 item 4).

AP + STA1 (RTS/CTS, UDP uplink) + STA2 (no RTS, UDP uplink), HT20 MCS5 A-MPDUs on
channel 36, range 100 m, STAs 60 m either side of the AP (hidden from each other).
Three sniffers: A beside the AP, B beside STA1, C beside STA2. Each writes a radiotap
pcap of what its PHY decoded (ns-3: TSFT = end of the PPDU). The truth is taken from
every transmitter's ``PhyTxPsduBegin`` trace: one row per PPDU sent, with its start,
ns-3's own duration for it, the MPDUs' headers and sequence numbers.

Usage: python3 bench/ns3/hidden_node.py OUTDIR [--seconds 1.0] [--seed 1] [--snap 100]
Needs ``pip install ns3`` (ns-3.44 Python bindings). Writes OUTDIR/sniffer{A,B,C}.pcap.gz
(records cut to ``--snap`` bytes, original length kept) and OUTDIR/truth_tx.csv.
"""
from __future__ import annotations

import argparse
import gzip
import os
import struct
import sys

CPP = r"""
#include "ns3/wifi-module.h"
#include <fstream>
namespace sniffsync_truth {
std::ofstream out;
void TxBegin(std::string ctx, ns3::WifiConstPsduMap psdus, ns3::WifiTxVector txv, double w) {
  auto psdu = psdus.begin()->second;
  ns3::Time dur = ns3::WifiPhy::CalculateTxDuration(psdus, txv, ns3::WIFI_PHY_BAND_5GHZ);
  const ns3::WifiMacHeader& h = psdu->GetHeader(0);
  out << ctx.substr(10, ctx.find('/', 10) - 10) << ',' << ns3::Simulator::Now().GetNanoSeconds() << ','
      << dur.GetNanoSeconds() << ',' << h.GetAddr2() << ',' << h.GetAddr1() << ',' << h.GetTypeString()
      << ',' << psdu->GetNMpdus() << ',' << psdu->GetSize() << ',' << h.GetDuration().GetMicroSeconds() << ',';
  for (std::size_t i = 0; i < psdu->GetNMpdus(); ++i) {
    const ns3::WifiMacHeader& hi = psdu->GetHeader(i);
    out << (i ? ";" : "") << ((hi.IsData()) ? (int)hi.GetSequenceNumber() : -1);
  }
  out << ',' << (psdu->IsAggregate() ? 1 : 0) << '\n';
}
void Connect(const std::string& path) {
  out.open(path);
  out << "node,tx_start_ns,duration_ns,ta,ra,type,n_mpdus,psdu_bytes,nav_us,seqs,aggregate\n";
  ns3::Config::Connect("/NodeList/*/DeviceList/*/$ns3::WifiNetDevice/Phy/PhyTxPsduBegin",
                       ns3::MakeCallback(&TxBegin));
}
void Close() { out.close(); }
}
"""


def build(seconds: float, seed: int, outdir: str):
    import cppyy
    from ns import ns
    cppyy.cppdef(CPP)
    t = cppyy.gbl.sniffsync_truth
    ns.RngSeedManager.SetSeed(seed)
    ns.Config.SetDefault("ns3::WifiMacQueue::MaxSize", ns.StringValue("2000p"))
    nodes = ns.NodeContainer()
    nodes.Create(6)                    # 0 AP, 1 STA1, 2 STA2, 3 snifA, 4 snifB, 5 snifC
    chan = ns.YansWifiChannelHelper()
    chan.SetPropagationDelay("ns3::ConstantSpeedPropagationDelayModel")
    chan.AddPropagationLoss("ns3::RangePropagationLossModel", "MaxRange", ns.DoubleValue(100.0))
    phy = ns.YansWifiPhyHelper()
    phy.SetChannel(chan.Create())
    phy.Set("ChannelSettings", ns.StringValue("{36, 20, BAND_5GHZ, 0}"))
    phy.SetPcapDataLinkType(ns.WifiPhyHelper.DLT_IEEE802_11_RADIO)
    ssid = ns.Ssid("hidden")

    def install(node_ids, mac_type, rts, extra=()):
        wifi = ns.WifiHelper()
        wifi.SetStandard(ns.WIFI_STANDARD_80211n)
        wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager", "DataMode", ns.StringValue("HtMcs5"),
                                     "ControlMode", ns.StringValue("OfdmRate24Mbps"),
                                     "RtsCtsThreshold", ns.UintegerValue(0 if rts else 65535))
        mac = ns.WifiMacHelper()
        mac.SetType(mac_type, *extra)
        nc = ns.NodeContainer()
        for i in node_ids:
            nc.Add(nodes.Get(i))
        return wifi.Install(phy, mac, nc)

    ap = install([0], "ns3::ApWifiMac", False, ("Ssid", ns.SsidValue(ssid)))
    sta1 = install([1], "ns3::StaWifiMac", True, ("Ssid", ns.SsidValue(ssid)))
    sta2 = install([2], "ns3::StaWifiMac", False, ("Ssid", ns.SsidValue(ssid)))
    snif = install([3, 4, 5], "ns3::StaWifiMac", False,
                   ("Ssid", ns.SsidValue(ns.Ssid("nobody")), "ActiveProbing", ns.BooleanValue(False)))
    pos = ns.ListPositionAllocator()
    for x, y in [(0, 0), (-60, 0), (60, 0), (0, 1), (-60, 1), (60, 1)]:
        pos.Add(ns.Vector(x, y, 0))
    mob = ns.MobilityHelper()
    mob.SetPositionAllocator(pos)
    mob.SetMobilityModel("ns3::ConstantPositionMobilityModel")
    mob.Install(nodes)
    stack = ns.InternetStackHelper()
    stack.Install(nodes)
    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.0"))
    devs = ns.NetDeviceContainer()
    for d in (ap, sta1, sta2, snif):
        devs.Add(d)
    ifs = addr.Assign(devs)
    ap_ip = ifs.GetAddress(0)
    sink = ns.UdpServerHelper(9)
    sapp = sink.Install(nodes.Get(0))
    sapp.Start(ns.Seconds(0.5))
    for node, rate_mbps, start in [(1, 14.0, 1.0), (2, 9.0, 1.01)]:
        cl = ns.UdpClientHelper(ap_ip.ConvertTo(), 9)
        cl.SetAttribute("MaxPackets", ns.UintegerValue(10 ** 7))
        cl.SetAttribute("Interval", ns.TimeValue(ns.Seconds(1000 * 8 / (rate_mbps * 1e6))))
        cl.SetAttribute("PacketSize", ns.UintegerValue(1000))
        app = cl.Install(nodes.Get(node))
        app.Start(ns.Seconds(start))
    phy.EnablePcap(os.path.join(outdir, "raw-snifA"), snif.Get(0), True, True)
    phy.EnablePcap(os.path.join(outdir, "raw-snifB"), snif.Get(1), True, True)
    phy.EnablePcap(os.path.join(outdir, "raw-snifC"), snif.Get(2), True, True)
    t.Connect(os.path.join(outdir, "truth_tx.csv"))
    ns.Simulator.Stop(ns.Seconds(1.0 + seconds))
    ns.Simulator.Run()
    t.Close()            # Simulator::Destroy and interpreter teardown crash under cppyy: main os._exit()s


def cut_pcap(src: str, dst: str, snap: int, t0_us: int):
    """Copy a pcap keeping records from ``t0_us`` on, each cut to ``snap`` bytes (orig. length kept)."""
    data = open(src, "rb").read()
    out = [data[:16] + struct.pack("<I", snap) + data[20:24]]
    off = 24
    while off + 16 <= len(data):
        sec, usec, incl, orig = struct.unpack_from("<IIII", data, off)
        rec = data[off + 16: off + 16 + incl]
        off += 16 + incl
        if sec * 1_000_000 + usec < t0_us:
            continue
        keep = rec[:snap]
        out.append(struct.pack("<IIII", sec, usec, len(keep), orig) + keep)
    with gzip.GzipFile(dst, "wb", mtime=0) as f:
        f.write(b"".join(out))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--snap", type=int, default=100)
    a = ap.parse_args(argv)
    os.makedirs(a.outdir, exist_ok=True)
    build(a.seconds, a.seed, a.outdir)
    for s in "ABC":
        raw = os.path.join(a.outdir, f"raw-snif{s}")
        cut_pcap(raw, os.path.join(a.outdir, f"sniffer{s}.pcap.gz"), a.snap, 1_000_000)
        os.remove(raw)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
