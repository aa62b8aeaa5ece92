// A TCP flow's time-sequence graph (Stevens / tcptrace style) on the timeline's own time axis:
// each data segment a vertical bar from seq to seq + len (retransmissions in red), the ACK line
// and the receive-window line (ACK + advertised window) as steps; each SACK block an orange bar
// beside its ACK (from the block's left to right edge: bytes the receiver holds above the ACK). Zooming or panning the
// timeline moves it; y fits the points in view.
const TSG_NS = "http://www.w3.org/2000/svg", TSG_H = 260, TSG_PT = 10, TSG_PB = 22;

export function tsgPanel(root, source, tl) {
  const plot = root.querySelector(".tsg-plot"), title = root.querySelector("h2");
  let g = null, view = null;
  const state = (window.__sniffsync ||= {}).tsg = {flow: null, drawn: {data: 0, retx: 0, acks: 0}};
  function draw() {
    if (!g || !view || root.hidden) return;
    plot.replaceChildren();
    if (!g.data) { const p = document.createElement("p"); p.className = "empty-note"; p.textContent = g.why; plot.append(p); return; }
    const {x, left, right, width} = view, [t0, t1] = x.domain(), d = g.data, k = g.acks;
    const inD = d.t_ns.map((t, i) => (t >= t0 && t <= t1 ? i : -1)).filter((i) => i >= 0);
    const inK = k.t_ns.map((t, i) => (t >= t0 && t <= t1 ? i : -1)).filter((i) => i >= 0);
    const sk = g.sack || {t_ns: [], le: [], re: []};
    const inS = sk.t_ns.map((t, i) => (t >= t0 && t <= t1 ? i : -1)).filter((i) => i >= 0);
    const ys = [...inD.flatMap((i) => [d.seq[i], d.seq[i] + d.len[i]]), ...inK.flatMap((i) => [k.ack[i], k.ack[i] + k.win[i]]),
                ...inS.flatMap((i) => [sk.le[i], sk.re[i]])];
    const before = k.t_ns.findIndex((t) => t >= t0) - 1;         // the step entering the view
    if (before >= 0) ys.push(k.ack[before], k.ack[before] + k.win[before]);
    const lo = ys.length ? Math.min(...ys) : 0, hi = ys.length ? Math.max(...ys) : 1;
    const y = d3.scaleLinear().domain([lo, hi > lo ? hi : lo + 1]).range([TSG_H - TSG_PB, TSG_PT]).nice();
    const svg = d3.select(plot).append("svg").attr("xmlns", TSG_NS).attr("width", width).attr("height", TSG_H);
    svg.append("g").attr("transform", `translate(${left},0)`).call(d3.axisLeft(y).ticks(5).tickFormat(d3.format("~s")));
    svg.append("g").attr("transform", `translate(0,${TSG_H - TSG_PB})`).call(d3.axisBottom(x).ticks(Math.max(2, Math.floor(width / 110))).tickFormat(() => ""));
    const c = svg.append("g");       // every point is in view; the steps are clamped to it
    const step = (key) => {      // the ACK or window line: a step after each ACK (and from the last one before the view)
      const first = k.t_ns.findIndex((t) => t >= t0), from = Math.max(0, (first < 0 ? k.t_ns.length : first) - 1);
      const pts = [];
      for (let i = from; i < k.t_ns.length && k.t_ns[i] <= t1; i++) {
        const v = key === "ack" ? k.ack[i] : k.ack[i] + k.win[i], xx = Math.max(left, x(k.t_ns[i]));
        if (pts.length) pts.push([xx, pts[pts.length - 1][1]]);
        pts.push([xx, y(v)]);
      }
      if (pts.length) pts.push([right, pts[pts.length - 1][1]]);
      return pts;
    };
    c.append("path").attr("class", "tsg-win").attr("d", d3.line()(step("win")) || "")
      .attr("fill", "none").attr("stroke", "#2e7d32").attr("stroke-dasharray", "4 3");
    c.append("path").attr("class", "tsg-ack").attr("d", d3.line()(step("ack")) || "")
      .attr("fill", "none").attr("stroke", "#555");
    c.selectAll("line.seg").data(inD).join("line").attr("class", (i) => (d.retx[i] ? "seg retx" : "seg"))
      .attr("x1", (i) => x(d.t_ns[i])).attr("x2", (i) => x(d.t_ns[i]))
      .attr("y1", (i) => y(d.seq[i])).attr("y2", (i) => Math.min(y(d.seq[i]) - 2, y(d.seq[i] + d.len[i])))
      .attr("stroke", (i) => (d.retx[i] ? "#b00020" : "#1f5fa8")).attr("stroke-width", (i) => (d.retx[i] ? 3 : 1.5));
    c.selectAll("line.sack").data(inS).join("line").attr("class", "sack")     // beside the ACK, 3 px right
      .attr("x1", (i) => x(sk.t_ns[i]) + 3).attr("x2", (i) => x(sk.t_ns[i]) + 3)
      .attr("y1", (i) => y(sk.le[i])).attr("y2", (i) => Math.min(y(sk.le[i]) - 2, y(sk.re[i])))
      .attr("stroke", "#e07b00").attr("stroke-width", 2.5);
    const lg = svg.append("g").attr("transform", `translate(${left + 8},${TSG_PT + 4})`).attr("font-size", 11);
    [["data segment", "#1f5fa8"], ["retransmission", "#b00020"], ["ACK", "#555"], ["ACK + window", "#2e7d32"], ["SACK block", "#e07b00"]]
      .forEach(([t, col], i) => lg.append("text").attr("x", i * 120).attr("y", 0).attr("fill", col).text(t));
    state.drawn = {data: inD.length, retx: inD.filter((i) => d.retx[i]).length, acks: inK.length, sack: inS.length, domain: [t0, t1]};
  }
  tl.onView((v) => { view = v; draw(); });
  return {
    async show(i, label) {
      if (!source.tsg) { root.hidden = false; g = {data: null, why: "the time-sequence graph needs serve (the report embeds no segments)"}; draw(); return; }
      if (state.flow === i && !root.hidden) { root.hidden = true; state.flow = null; return; }
      g = await source.tsg(i);
      state.flow = i; state.graph = g;
      title.textContent = `Time-sequence graph · ${label}` +
        (g.stride > 1 ? ` (report: every ${g.stride}th point of the window)` : "");
      root.hidden = false;
      draw();
    },
    hide() { root.hidden = true; state.flow = null; },
  };
}
