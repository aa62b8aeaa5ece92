"""ns-3.44 UL OFDMA scenario behind tests/data/tshark_ba/ns3-11ax-ulofdma-ap-multista.pcap (not run by the tests).

python3 ns3_ulofdma.py /tmp/ul  ->  /tmp/ul-0-0.pcap (the AP's PHY); the committed file keeps its
association responses, its 12 multi-STA Block Acks and the 8 frames before each
(tshark -Y ... -F pcap -w, then editcap -s 200).
"""
import sys
from ns import ns
out = sys.argv[1]
ns.RngSeedManager.SetSeed(1)
ns.Config.SetDefault("ns3::RrMultiUserScheduler::EnableUlOfdma", ns.BooleanValue(True))
ns.Config.SetDefault("ns3::RrMultiUserScheduler::EnableBsrp", ns.BooleanValue(False))
ns.Config.SetDefault("ns3::MultiUserScheduler::AccessReqInterval", ns.TimeValue(ns.MicroSeconds(1500)))
ap = ns.NodeContainer(); ap.Create(1)
stas = ns.NodeContainer(); stas.Create(4)
chan = ns.CreateObject[ns.MultiModelSpectrumChannel]()
chan.AddPropagationLossModel(ns.CreateObject[ns.LogDistancePropagationLossModel]())
chan.SetPropagationDelayModel(ns.CreateObject[ns.ConstantSpeedPropagationDelayModel]())
phy = ns.SpectrumWifiPhyHelper()
phy.SetChannel(chan)
phy.Set("ChannelSettings", ns.StringValue("{36, 20, BAND_5GHZ, 0}"))
phy.SetPcapDataLinkType(ns.WifiPhyHelper.DLT_IEEE802_11_RADIO)
wifi = ns.WifiHelper()
wifi.SetStandard(ns.WIFI_STANDARD_80211ax)
wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager", "DataMode", ns.StringValue("HeMcs5"),
                             "ControlMode", ns.StringValue("OfdmRate6Mbps"))
mac = ns.WifiMacHelper()
ssid = ns.Ssid("ulofdma")
mac.SetType("ns3::StaWifiMac", "Ssid", ns.SsidValue(ssid))
sta_devs = wifi.Install(phy, mac, stas)
mac.SetType("ns3::ApWifiMac", "Ssid", ns.SsidValue(ssid))
mac.SetMultiUserScheduler("ns3::RrMultiUserScheduler")
ap_dev = wifi.Install(phy, mac, ap)
mob = ns.MobilityHelper()
pos = ns.ListPositionAllocator()
for x in (0, 5, -5, 0, 0):
    pos.Add(ns.Vector(x, 5 if x == 0 and pos.GetSize() > 2 else 0, 0))
mob.SetPositionAllocator(pos)
mob.SetMobilityModel("ns3::ConstantPositionMobilityModel")
mob.Install(ap); mob.Install(stas)
stack = ns.InternetStackHelper(); stack.Install(ap); stack.Install(stas)
addr = ns.Ipv4AddressHelper(); addr.SetBase(ns.Ipv4Address("10.1.0.0"), ns.Ipv4Mask("255.255.255.0"))
ap_if = addr.Assign(ap_dev); addr.Assign(sta_devs)
server = ns.UdpServerHelper(9)
sapp = server.Install(ap.Get(0)); sapp.Start(ns.Seconds(0)); sapp.Stop(ns.Seconds(3))
client = ns.UdpClientHelper(ap_if.GetAddress(0).ConvertTo(), 9)
client.SetAttribute("MaxPackets", ns.UintegerValue(100000))
client.SetAttribute("Interval", ns.TimeValue(ns.MicroSeconds(400)))
client.SetAttribute("PacketSize", ns.UintegerValue(700))
capp = client.Install(stas); capp.Start(ns.Seconds(1)); capp.Stop(ns.Seconds(1.3))
phy.EnablePcap(out, ap_dev.Get(0))
ns.Simulator.Stop(ns.Seconds(1.4))
ns.Simulator.Run()
ns.Simulator.Destroy()
