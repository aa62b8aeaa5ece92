// The analysis views under the timeline; render(data) redraws them all (after a brush too).
import {lines} from "./lines.js";
import {bars} from "./bars.js";
import {table} from "./table.js";

const hist = (h) => (h ? h.x.map((v, i) => ({label: String(v), value: h.y[i]})) : []);

// Redrawn when the panels change width, so charts always fill them.
let last = null, observed = null, lastW = 0;
function watch(root) {
  if (observed === root) return;
  observed = root;
  let t = null;
  new ResizeObserver(() => {
    if (root.clientWidth === lastW) return;
    clearTimeout(t);
    t = setTimeout(() => { if (last) renderAnalysis(root, last); }, 60);
  }).observe(root);
}

export function renderAnalysis(root, a) {
  last = a; lastW = root.clientWidth; watch(root);
  const $ = (id) => root.querySelector(`#${id}`);
  const notes = a.notes || {}, ranged = a.range_ns && a.range_ns[0] != null;
  const selected = ranged || (a.filters && Object.values(a.filters).some((v) => v != null));
  const inRange = (what) => selected ? `no ${what} in the selection` : `no ${what}`;
  const noFlow = (what) => notes.flows || inRange(what);
  const g = a.goodput || {t_ns: [], series: []};
  lines($("goodput"), g.series.map((s) => ({label: s.label, x: g.t_ns, y: s.mbps})), {yLabel: "goodput Mb/s", empty: noFlow("goodput windows")});
  const j = a.jain || {t_ns: [], goodput: [], airtime: []};
  lines($("jain"), [{label: "Jain (goodput)", x: j.t_ns, y: j.goodput},
                    ...(j.airtime && j.airtime.length ? [{label: "Jain (airtime)", x: j.t_ns, y: j.airtime}] : [])],
        {yLabel: "Jain's index", yDomain: [0, 1], empty: noFlow("fairness windows")});
  lines($("cdf"), (a.cdf || []).map((c) => ({label: c.run, x: c.x, y: c.p})),
        {yLabel: selected ? "CDF (whole run, not the selection)" : "CDF", xIsValue: true, step: true,
         yDomain: [0, 1], xLabel: "Jain's index",
         empty: notes.flows || (selected ? "whole run only: clear the selection to see it" : "no fairness windows")});
  const r = a.rtt || {series: []};
  lines($("rtt"), r.series.flatMap((s) => [{label: `${s.label} RTT`, x: s.t_ns, y: s.rtt_ms},
                                           {label: `${s.label} queueing`, x: s.t_ns, y: s.qdelay_ms}]),
        {yLabel: "ms", empty: notes.flows || (selected ? "no RTT samples in the selection"
                                                      : "no RTT samples: no TCP segment's ACK was matched")});
  bars($("airtime"), (a.airtime_share || []).map((s) => ({label: s.station, value: +s.share_pct.toFixed(1)})),
       {yLabel: "airtime %", empty: inRange("PPDUs")});
  const fb = a.hist && a.hist.failed_per_10s;
  bars($("failed"), hist(fb), {yLabel: `failed MPDUs per ${fb ? fb.bin_s : 10} s`, color: "#e15759"});
  bars($("ampdu"), hist(a.hist && a.hist.mpdus_per_ampdu), {yLabel: "A-MPDUs by size", empty: inRange("data PPDUs")});
  bars($("mcs"), hist(a.hist && a.hist.mcs), {yLabel: "PPDUs by MCS", empty: notes.mcs || inRange("data PPDUs")});
  table($("rts"), a.rts || [], [["station", "station"], ["rts", "RTS sent"], ["cts", "CTS received"],
                                ["ratio", "CTS/RTS"], ["collisions", "RTS/CTS collisions"]],
        inRange("RTS sent"));
  table($("flows"), a.flows || [], [["label", "flow"], ["bytes", "bytes"], ["goodput_mbps", "goodput Mb/s"],
                                    ["retransmissions", "retrans."], ["rtt_p50_ms", "RTT p50 ms"]],
        notes.flows || "no flows");
  const sync = $("sync");
  if (sync) {
    sync.closest("section").hidden = !a.sync;
    if (a.sync) table(sync, a.sync, [["sniffer", "sniffer"], ["anchors", "anchors"], ["drift_ppm", "drift ppm"],
                                     ["p50_us", "p50 µs"], ["p99_us", "p99 µs"], ["frames_in", "frames in"],
                                     ["duplicates", "duplicates"]]);
  }
  const rec = $("reception");
  if (rec) {
    rec.closest("section").hidden = !a.reception;
    if (a.reception) table(rec, a.reception, [["sniffer", "sniffer"], ["frames", "frames"],
                                              ["fcs_checked", "FCS checked"], ["fcs_bad", "bad FCS"],
                                              ["fcs_bad_pct", "bad %"], ["fcs_bad_known_ta", "from known stations"]]);
  }
  (window.__sniffsync ||= {}).analysis = {rendered: true, flows: (a.flows || []).length};
}
