// Drill-down of a clicked PPDU: capture completeness, who heard it, its MPDUs with their fate,
// the Block-Ack bitmap bit by bit, and the frame exchange around it as linked boxes (NAV shown).
import {rows, formatNs, phyText} from "./format.js";
import {table} from "./table.js";
import {KIND_COLOR} from "./colors.js";

const FATE_COLOR = {delivered: "#59a14f", retried_delivered: "#edc948", retried_lost: "#f28e2b", lost: "#e15759"};

export function renderDrill(root, d, kinds) {
  const hook = (window.__sniffsync ||= {}).drill = {ppdu: d ? d.ppdu : null};
  root.hidden = !d;
  if (!d) return;
  root.querySelector("h2").textContent = `PPDU ${d.ppdu}: ${d.kind} ${d.ta || "—"} → ${d.ra || "—"}`;
  const cap = d.capture || {};
  rows(root.querySelector(".facts"), [
    ["start", formatNs(d.start_ns, 1e7)], ["airtime", `${d.airtime_us} µs`], ["PHY", phyText(d)],
    ["capture", cap.complete == null ? null : `${cap.complete} (extent from ${cap.extent_src})`],
    ["captured airtime", cap.captured_airtime_ns == null ? null : `${cap.captured_airtime_ns / 1000} µs`],
    ["signal (first copy)", d.signal_dbm == null ? null : `${d.signal_dbm} dBm`],
    ["heard by", (d.heard_by || []).join(", ")], ["events", (d.events || []).join(", ") || "none"]]);
  const mp = d.mpdus || [];
  table(root.querySelector(".mpdus"), mp, [["seq", "seq"], ["tid", "TID"], ["retry", "retry"],
                                           ["length", "bytes"], ["fate", "fate"]],
        d.mpdus ? "no MPDUs (not a data PPDU)" : "MPDU details not available here");
  root.querySelectorAll(".mpdus tbody tr").forEach((tr, i) => { tr.style.color = FATE_COLOR[mp[i].fate] || ""; });
  bitmap(root.querySelector(".bitmap"), d.ba, d.frames_loaded === false);
  exchange(root.querySelector(".exchange"), d.exchange || [], d.ppdu, kinds);
  hook.mpdus = mp.length; hook.bits = d.ba ? d.ba.bits : null; hook.exchange = (d.exchange || []).map((e) => e.kind);
}

function bitmap(el, ba, noFrames) {
  el.replaceChildren();
  const svg = d3.select(el).append("svg");
  if (!ba) {
    svg.attr("width", 700).attr("height", 20).append("text").attr("class", "empty-note").attr("y", 14)
      .text(noFrames ? "Block-Ack bitmaps, NAV and MPDU lengths need the frame table: this run came from the cache "
                       + "without it (restart with --no-cache to see them)"
                     : "no Block-Ack answered this PPDU in its exchange");
    return;
  }
  const bits = ba.bits, mine = new Set(ba.seqs), C = 11, per = 64;
  svg.attr("width", 20 + Math.min(bits.length, per) * C).attr("height", 30 + Math.ceil(bits.length / per) * C);
  svg.append("text").attr("y", 11).attr("class", "y-label")
    .text(`Block-Ack (PPDU ${ba.ppdu}) SSN ${ba.ssn}: bit i acknowledges seq SSN+i; outlined = an MPDU of this PPDU`);
  svg.append("g").attr("transform", "translate(0,16)").selectAll("rect").data([...bits]).join("rect")
    .attr("class", (b) => `bit bit${b}`)
    .attr("x", (_, i) => (i % per) * C).attr("y", (_, i) => Math.floor(i / per) * C).attr("width", C - 2).attr("height", C - 2)
    .attr("fill", (b, i) => b === "1" ? "#59a14f" : mine.has((ba.ssn + i) % 4096) ? "#e15759" : "#ddd")
    .attr("stroke", (_, i) => mine.has((ba.ssn + i) % 4096) ? "#222" : "none")
    .append("title").text((b, i) => `seq ${(ba.ssn + i) % 4096}: ${b === "1" ? "acknowledged" : "not acknowledged"}`);
}

function exchange(el, ex, self, kinds) {
  el.replaceChildren();
  if (!ex.length) return;
  const w = Math.max(el.clientWidth || 0, 400), h = 112, m = 10;
  const t0 = ex[0].start_ns, t1 = Math.max(...ex.map((e) => e.end_ns));
  const x = d3.scaleLinear().domain([t0, t1]).range([m, w - m]);
  // two rows: what the clicked PPDU's transmitter sent (top), what its peer sent (bottom);
  // CTS/ACK carry no TA: sent by the station they are not addressed to
  const A = (ex.find((e) => e.ppdu === self) || ex[0]).ta;
  const row = (e) => ((e.ta ? e.ta === A : e.ra !== A) ? 0 : 1);
  const y = (e) => 24 + row(e) * 34;
  const nth = new Map(), seen = [0, 0];
  for (const e of ex) nth.set(e, seen[row(e)]++);        // position within its row, for staggering
  const svg = d3.select(el).append("svg").attr("width", w).attr("height", h);
  const g = svg.selectAll("g.ex").data(ex).join("g").attr("class", "ex");
  g.append("rect").attr("x", (e) => x(e.start_ns)).attr("y", y).attr("height", 20)
    .attr("width", (e) => Math.max(3, x(e.end_ns) - x(e.start_ns)))
    .attr("fill", (e) => KIND_COLOR[kinds.indexOf(e.kind)] || "#999")
    .attr("stroke", (e) => e.ppdu === self ? "#b00020" : "none").attr("stroke-width", 2);
  // labels above the top row and below the bottom one, alternately staggered so neighbours do not overlap
  g.append("text").attr("class", "ex-label").attr("x", (e) => x(e.start_ns))
    .attr("y", (e) => row(e) ? y(e) + 31 + (nth.get(e) % 2) * 10 : y(e) - 3 - (nth.get(e) % 2) * 10)
    .text((e) => `${e.kind.toUpperCase()}${e.nav_us ? ` NAV ${e.nav_us} µs` : ""}`);
  svg.selectAll("line.link").data(ex.slice(1)).join("line").attr("class", "link")
    .attr("x1", (_, i) => x(ex[i].end_ns)).attr("y1", (_, i) => y(ex[i]) + 10)
    .attr("x2", (e) => x(e.start_ns)).attr("y2", (e) => y(e) + 10)
    .attr("stroke", "#555");
  // arrowheads drawn as triangles: an SVG marker needs a fragment reference, which the report forbids
  svg.selectAll("path.head").data(ex.slice(1)).join("path").attr("class", "head").attr("fill", "#555")
    .attr("d", (e, i) => {
      const x1 = x(ex[i].end_ns), y1 = y(ex[i]) + 10, x2 = x(e.start_ns), y2 = y(e) + 10;
      const ang = Math.atan2(y2 - y1, x2 - x1), L = 7, W = 3.5;
      const bx = x2 - L * Math.cos(ang), by = y2 - L * Math.sin(ang);
      return `M${x2},${y2}L${bx - W * Math.sin(ang)},${by + W * Math.cos(ang)}L${bx + W * Math.sin(ang)},${by - W * Math.cos(ang)}Z`;
    });
  svg.append("text").attr("class", "y-label").attr("x", m).attr("y", h - 2)
    .text(`${formatNs(t0, 1e7)} … ${formatNs(t1, 1e7)} · top: sent by ${A || "?"} · bottom: by its peer`);
}
