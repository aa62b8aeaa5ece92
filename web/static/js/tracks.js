// Counter tracks under the timeline (Perfetto-style): one canvas per metric on the timeline's
// own x scale, so zooming or panning the timeline moves every track. Data come in buckets
// (about one per 2 px) for the visible range, like the lanes' tiles; a fold hides a track.
// A track is drawn when its data arrive (or the selection, a fold, the width change); a frame of
// a pan or zoom only moves and stretches the drawn canvases with a CSS transform, as the lanes.
const TRACK_H = 54, PX_PER_BUCKET = 2;
const TRACKS_SETTLE_MS = 120;   // tracks are refetched (and redrawn) once the view rests this long: not between key presses
const color = d3.scaleOrdinal(d3.schemeTableau10);
const FLOW_TRACKS = ["goodput", "rtt", "qdelay", "inflight"];     // per-flow series: follow the flow selection

export function tracks(root, source, tl) {
  const hook = (window.__sniffsync ||= {}).tracks = {fetches: 0, domain: null, drawn: {}, folded: []};
  const folded = new Set();
  let data = null, view = null, timer = null, seq = 0, rows = new Map();
  let drawnX = null, drawnW = 0;      // the x scale and width the canvases were drawn at
  let only = null;      // {sta: Set|null, flows: Set|null}: the selection's stations and flows (per-station/flow series)
  const shown = (t, s) => {
    if (!only) return true;
    if (/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/.test(s.label)) return !only.sta || only.sta.has(s.label);
    if (FLOW_TRACKS.includes(t.id)) return !only.flows || only.flows.has(s.label);
    return true;
  };

  function build(d) {
    if (rows.size) return;
    for (const t of d.tracks) {
      const row = d3.select(root).append("div").attr("class", "track").attr("data-id", t.id);
      const head = row.append("div").attr("class", "track-head");
      head.append("button").attr("type", "button").attr("class", "fold").text("▾")
        .on("click", () => toggle(t.id));
      head.append("span").attr("class", "track-title").text(`${t.title} (${t.unit})`);
      const lg = head.append("span").attr("class", "track-legend");
      if (t.series.length > 1) {
        lg.selectAll("span").data(t.series).join("span").style("--c", (_, i) => color(i)).text((s) => s.label)
          .classed("off", (s) => !shown(t, s));     // a selection made before the first answer
      }
      const plot = row.append("div").attr("class", "track-plot").style("height", `${TRACK_H}px`);
      const clip = plot.append("div").attr("class", "track-clip");
      const canvas = clip.append("canvas").style("transform-origin", "0 0").style("will-change", "transform").node();
      const max = plot.append("span").attr("class", "track-max"), zero = plot.append("span").attr("class", "track-zero").text("0");
      rows.set(t.id, {row, canvas, head, clip, max, zero});
    }
  }

  function toggle(id) {
    folded.has(id) ? folded.delete(id) : folded.add(id);
    const r = rows.get(id);
    r.row.classed("folded", folded.has(id));
    r.head.select("button.fold").text(folded.has(id) ? "▸" : "▾");
    hook.folded = [...folded];
    draw();
  }

  function move() {      // this frame's view: each drawn canvas moved and stretched from drawnX to x
    if (!drawnX || !view) return;
    const [a, b] = drawnX.domain(), x = view.x, k = (x(b) - x(a)) / (drawnX(b) - drawnX(a)), c = x(a) - k * drawnX(a);
    const tr = Math.abs(k - 1) < 1e-9 && Math.abs(c) < 1e-6 ? "none" : `matrix(${k},0,0,1,${c},0)`;
    for (const r of rows.values()) if (r.canvas.style.transform !== tr) r.canvas.style.transform = tr;
  }

  function draw() {
    if (!data || !view) return;
    const {x, left, right, width} = view, dpr = window.devicePixelRatio || 1;
    drawnX = x.copy(); drawnW = width;
    const n = data.n, w = (data.t1_ns - data.t0_ns) / n;
    for (const t of data.tracks) {
      const r = rows.get(t.id);
      if (!r) continue;
      const c = r.canvas;
      if (folded.has(t.id)) { c.style.display = "none"; continue; }
      c.style.display = "block";
      if (c.width !== width * dpr || c.height !== TRACK_H * dpr) {   // a resize reallocates: only when it changed
        c.width = width * dpr; c.height = TRACK_H * dpr;
        c.style.width = `${width}px`; c.style.height = `${TRACK_H}px`;
        c.style.left = `${-left}px`;            // the clip box spans the plot; the canvas the whole width
        r.clip.style("left", `${left}px`).style("width", `${right - left}px`);
      }
      c.style.transform = "none";
      const ctx = c.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, width, TRACK_H);
      ctx.fillStyle = "#fafafa"; ctx.fillRect(left, 0, right - left, TRACK_H);
      const fixed = t.id === "jain" || t.id === "util" ? 1 : null;
      let ymax = fixed || 0;
      if (!fixed) for (const s of t.series) if (shown(t, s)) for (const v of s.y) if (v != null && v > ymax) ymax = v;
      ymax = ymax || 1;
      const y = (v) => TRACK_H - 4 - (v / ymax) * (TRACK_H - 12);
      ctx.save(); ctx.beginPath(); ctx.rect(left, 0, right - left, TRACK_H); ctx.clip();
      let drawn = 0;
      t.series.forEach((s, si) => {
        if (!shown(t, s)) return;
        ctx.fillStyle = ctx.strokeStyle = t.id === "util" ? "#4e79a7" : t.id === "failed" && si === 0 ? "#e15759" : color(si);
        if (t.how === "count" || t.how === "busy") {       // bars: a value per bucket
          for (let k = 0; k < n; k++) {
            const v = s.y[k];
            if (!v) continue;
            const a = x(data.t0_ns + k * w), b = x(data.t0_ns + (k + 1) * w);
            const top = y(v);
            ctx.fillRect(a, top, Math.max(1, b - a - (t.how === "count" ? 0.5 : 0)), TRACK_H - 4 - top);
            drawn++;
          }
        } else {                                            // lines; steps hold their value across the bucket
          ctx.lineWidth = 1.5; ctx.beginPath();
          let pen = false;
          for (let k = 0; k < n; k++) {
            const v = s.y[k];
            if (v == null) { pen = t.how === "mean" ? pen : false; continue; }
            const a = x(data.t0_ns + k * w), b = x(data.t0_ns + (k + 1) * w);
            if (t.how === "step") {
              if (pen) ctx.lineTo(a, y(v)); else ctx.moveTo(a, y(v));
              ctx.lineTo(b, y(v));
            } else if (pen) ctx.lineTo((a + b) / 2, y(v)); else ctx.moveTo((a + b) / 2, y(v));
            pen = true; drawn++;
          }
          ctx.stroke();
          if (t.how === "mean") {                           // points too: a lone sample is visible
            for (let k = 0; k < n; k++) {
              const v = s.y[k];
              if (v == null) continue;
              const m = x(data.t0_ns + (k + 0.5) * w);
              ctx.fillRect(m - 1.5, y(v) - 1.5, 3, 3);
            }
          }
        }
      });
      ctx.restore();
      ctx.fillStyle = "#555"; ctx.font = "10px sans-serif";
      if (!drawn) { ctx.textAlign = "center"; ctx.fillText("no samples in view", (left + right) / 2, TRACK_H / 2 + 3); ctx.textAlign = "start"; }
      r.max.text(`max ${+ymax.toFixed(3)}`);
      hook.drawn[t.id] = drawn;
    }
  }

  async function fetchData() {
    if (!view) return;
    const [d0, d1] = view.x.domain(), mine = ++seq;
    const n = Math.max(1, Math.min(2000, Math.round((view.right - view.left) / PX_PER_BUCKET)));
    const d = await source.tracks(Math.max(0, d0), Math.min(view.span, d1), n);
    if (mine !== seq || !d || !d.tracks) return;
    build(d);
    data = d; hook.fetches++; hook.domain = [d.t0_ns, d.t1_ns]; hook.n = d.n;
    draw();
  }

  tl.onView((v) => {    // every frame of a zoom/pan: move what is drawn; a resize redraws; refetch when it settles
    view = v;
    if (v.width !== drawnW) draw(); else move();
    clearTimeout(timer); timer = setTimeout(fetchData, TRACKS_SETTLE_MS);
  });
  return {
    refresh: fetchData,
    select(sta, flows) {   // show only these stations' / flows' series (null: all); legends follow
      only = sta || flows ? {sta: sta && new Set(sta), flows: flows && new Set(flows)} : null;
      for (const t of data ? data.tracks : []) {
        rows.get(t.id)?.row.selectAll(".track-legend span").classed("off", (s) => !shown(t, s));
      }
      hook.selected = only ? {sta: sta, flows: flows} : null;
      draw();
    },
  };
}
