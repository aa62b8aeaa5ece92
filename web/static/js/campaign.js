// The campaign page's overlaid view: per metric one chart with a line per run (time since the
// run's first PPDU), and a run picker; unticking a run removes its line from every chart. Runs are
// told apart by colour and dash pattern (readable in greyscale). A classic script (no modules): the
// page is one offline file. Served (`serve CAMPAIGN`), data.links names each run's timeline: the
// picker links to it and a click on a run's line opens it around the clicked time.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("campaign-data").textContent);
  const root = document.getElementById("overlay"), picker = document.getElementById("run-picker");
  const color = d3.scaleOrdinal(d3.schemeTableau10).domain(data.runs.map((r) => r.name));
  const DASH = ["", "6 3", "2 2", "8 3 2 3", "1 3", "10 2"];
  const dash = (run) => DASH[data.runs.findIndex((r) => r.name === run) % DASH.length];
  const picked = new Set(data.runs.map((r) => r.name)), links = data.links || {};
  const HALF_NS = 250e6;    // a click opens the run's timeline this far either side of the clicked time
  const hook = window.__campaign = {picked: [...picked], drawn: {}};
  for (const r of data.runs) {
    const l = document.createElement("label"), c = document.createElement("input");
    c.type = "checkbox"; c.checked = true; c.value = r.name;
    c.addEventListener("change", () => { c.checked ? picked.add(r.name) : picked.delete(r.name); draw(); });
    const sw = document.createElement("span");
    sw.className = "swatch"; sw.style.borderTop = `3px ${dash(r.name) ? "dashed" : "solid"} ${color(r.name)}`;
    const labels = Object.entries(r.labels).map(([k, v]) => `${k}=${v}`).join(", ");
    l.append(c, " ", sw, ` ${r.name}${labels ? ` (${labels})` : ""}`);
    picker.append(l);
    if (links[r.name]) {
      const a = document.createElement("a");
      a.href = links[r.name]; a.textContent = "timeline"; a.className = "run-timeline";
      picker.append(a, " ");
    }
  }
  // one time axis for every chart: the extent of the picked runs over all metrics
  function sharedDomain() {
    const ts = data.metrics.flatMap((m) => m.series.filter((s) => picked.has(s.run)).flatMap((s) => s.t_s));
    return ts.length ? d3.extent(ts) : [0, 1];
  }
  function chart(el, m, domain) {
    el.replaceChildren();
    const h3 = document.createElement("h3");
    h3.textContent = m.title + (m.unit ? ` (${m.unit})` : "");
    el.append(h3);
    const w = Math.max(el.clientWidth || 0, 320), h = 200, mg = {l: 48, r: 12, t: 8, b: 30};
    const series = m.series.filter((s) => picked.has(s.run));
    const ys = series.flatMap((s) => s.y.filter((v) => v != null));
    const x = d3.scaleLinear().domain(domain).range([mg.l, w - mg.r]);
    const y = d3.scaleLinear().domain([0, ys.length ? d3.max(ys) || 1 : 1]).nice().range([h - mg.b, mg.t]);
    const svg = d3.select(el).append("svg").attr("width", w).attr("height", h);
    svg.append("g").attr("transform", `translate(0,${h - mg.b})`).call(d3.axisBottom(x).ticks(6).tickFormat((v) => `${v} s`));
    svg.append("g").attr("transform", `translate(${mg.l},0)`).call(d3.axisLeft(y).ticks(4));
    const line = d3.line().defined((d) => d[1] != null).x((d) => x(d[0])).y((d) => y(d[1]));
    svg.append("g").selectAll("path").data(series).join("path").attr("class", "run-line")
      .attr("data-run", (s) => s.run).attr("fill", "none").attr("stroke-width", 1.6)
      .attr("stroke", (s) => color(s.run)).attr("stroke-dasharray", (s) => dash(s.run))
      .attr("d", (s) => line(s.t_s.map((t, i) => [t, s.y[i]])))
      .style("cursor", (s) => (links[s.run] ? "pointer" : null))
      .on("click", (ev, s) => {
        if (!links[s.run]) return;
        const t = Math.max(0, x.invert(d3.pointer(ev, svg.node())[0]) * 1e9);
        location.href = `${links[s.run]}#t0=${Math.round(Math.max(0, t - HALF_NS))}&t1=${Math.round(t + HALF_NS)}`;
      })
      .append("title").text((s) => s.run + (links[s.run] ? ": click to open its timeline here" : ""));
    const lone = series.filter((s) => s.y.filter((v) => v != null).length === 1);   // a line of one point is invisible
    svg.append("g").selectAll("circle").data(lone).join("circle").attr("class", "run-point")
      .attr("r", 3).attr("fill", (s) => color(s.run))
      .attr("cx", (s) => x(s.t_s[s.y.findIndex((v) => v != null)])).attr("cy", (s) => y(s.y.find((v) => v != null)));
    const note = !series.length ? "no run picked"
      : !ys.length ? `no value in the picked runs: it needs ${m.needs || "data"}` : "";
    if (note) svg.append("text").attr("class", "empty-note").attr("x", w / 2).attr("y", h / 2).attr("text-anchor", "middle").text(note);
    hook.drawn[m.id] = series.length;
  }
  const boxes = data.metrics.map((m) => {
    const d = document.createElement("div");
    d.className = "overlay-chart"; d.dataset.id = m.id; root.append(d);
    return [d, m];
  });
  function draw() {
    const domain = hook.domain = sharedDomain();
    for (const [d, m] of boxes) chart(d, m, domain);
    hook.picked = [...picked];
  }
  draw();
  new ResizeObserver(() => draw()).observe(root);
  document.body.dataset.ready = "1";
})();
