// The merged-trace timeline: one lane per station (or sniffer), each PPDU a rectangle spanning
// its airtime, drawn on canvas from pixel-scaled tiles; d3-zoom from the whole run to µs.
// Shift-drag brushes a time range; hover shows a PPDU's details; click pins them.
import {KIND_COLOR, SEVERITY_COLOR, SEVERITY_NAME} from "./colors.js";
import {timeUnit, formatNs, rows, phyText} from "./format.js";

const MARGIN = {left: 150, right: 14, top: 10, bottom: 30};
const LANE_H = 26;
const TILE_SETTLE_MS = 40;     // a view resting this long gets its tile

export async function timeline(root, source, {onBrush = () => {}, onPick = () => {}, onSettle = () => {}} = {}) {
  const meta = await source.meta();
  const span = Math.max(meta.span_ns, 1000);
  let laneMode = "station";
  root.replaceChildren();
  const wrap = d3.select(root).classed("timeline", true).style("position", "relative");
  // the lanes' canvas sits in a clip box over the plot: a frame of a pan or zoom moves and stretches
  // it with a CSS transform (the compositor's job: no canvas redraw, no raster, no upload) until the
  // next tile is drawn into it; the box's striped background shows where the bitmap does not reach
  const clip = wrap.append("div").attr("class", "lanes-clip").style("position", "absolute").style("overflow", "hidden");
  const canvas = clip.append("canvas").style("position", "absolute").style("transform-origin", "0 0")
    .style("will-change", "transform").node();
  const svg = wrap.append("svg").style("position", "relative").style("display", "block");
  const gLabels = svg.append("g"), gAxis = svg.append("g").attr("class", "axis");
  const gBrush = svg.append("g").attr("class", "brush");
  const baseLabel = svg.append("text").attr("class", "axis-base").attr("x", 4);
  const tip = wrap.append("div").attr("class", "tip").style("display", "none");
  const tipDl = tip.append("dl").node();
  const x0 = d3.scaleLinear().domain([0, span]);
  let x = x0.copy(), width = 0, height = 0, tile = null, seq = 0, timer = null, pinned = null;
  const DIM = 1000;      // added to a kind's colour key when the selection dims the shape
  let dim = null;        // (lane, kind, laneMode, ppdu) -> true: the selection's filters exclude it (lanefilter.js)
  let tipItem = null;    // {ppdu, start_ns, end_ns, lane, dy} of the shown tooltip: it follows its item or goes
  const details = new Map(), viewers = [];
  const tellView = () => { for (const f of viewers) f({x, left: left(), right: right(), width, span}); };
  const hook = (window.__sniffsync ||= {}).timeline = {domain: [0, span], drawn: 0, markers: 0, mode: null, tiles: 0};

  const lanes = () => meta.lanes[laneMode];
  const laneY = (l) => MARGIN.top + l * LANE_H;
  const left = () => MARGIN.left, right = () => width - MARGIN.right;

  function layout() {
    width = Math.max(root.clientWidth || 0, 600);
    height = MARGIN.top + lanes().length * LANE_H + MARGIN.bottom;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = width * dpr; canvas.height = height * dpr;
    canvas.style.width = `${width}px`; canvas.style.height = `${height}px`;
    canvas.style.left = `${-left()}px`; canvas.style.top = `${-MARGIN.top}px`;   // page geometry as a full-width canvas
    clip.style("left", `${left()}px`).style("top", `${MARGIN.top}px`)
      .style("width", `${right() - left()}px`).style("height", `${lanes().length * LANE_H}px`);
    canvas.getContext("2d").setTransform(dpr, 0, 0, dpr, 0, 0);
    svg.attr("width", width).attr("height", height);
    x0.range([left(), right()]);
    zoom.extent([[left(), 0], [right(), height]]).translateExtent([[left(), 0], [right(), height]]);
    gLabels.selectAll("text").data(lanes()).join("text")
      .attr("x", 6).attr("y", (_, i) => laneY(i) + LANE_H / 2 + 4).attr("class", "lane-label").text((d) => d);
    gAxis.attr("transform", `translate(0,${height - MARGIN.bottom})`);
    baseLabel.attr("y", height - 4);
    brush.extent([[left(), MARGIN.top], [right(), height - MARGIN.bottom]]);
    gBrush.call(brush);
    x = d3.zoomTransform(svg.node()).rescaleX(x0);
    renderTile();                    // the bitmap follows the new size
    drawAxis(); tellView();
  }

  function drawAxis() {
    const [d0, d1] = x.domain(), u = timeUnit(d1 - d0);
    const base = u.unit === "µs" ? Math.floor(d0 / 1e6) * 1e6 : 0;   // deep zoom: label from a ms base
    gAxis.call(d3.axisBottom(x).ticks(Math.max(2, Math.floor(width / 110)))
      .tickFormat((t) => `${((t - base) / u.div).toFixed(u.digits)} ${u.unit}`));
    baseLabel.text(base ? `+${formatNs(base, 1e7)}` : "");
    hook.domain = [d0, d1];
  }

  // a user's wheel or drag can fire several zoom events per frame, keys come faster than frames:
  // the axis, the lanes' transform, the tooltip and the viewers (counter tracks, graphs) are
  // updated once per animation frame, not once per event
  let frame = 0;
  const paint = () => { frame = 0; drawAxis(); draw(); tellView(); };
  function requestPaint() { if (!frame) frame = requestAnimationFrame(paint); }

  // A tile is drawn once, when it arrives, into the canvas at the scale of that moment (tileX);
  // a frame of a pan or zoom only sets the canvas's CSS transform from tileX to x. Redrawing the
  // canvas per frame (even one drawImage of a cached bitmap) cost a canvas flush and a copy to
  // the compositor per frame: 40-50 % of the renderer's CPU in software Chromium.
  let tileX = null;
  function stripes(ctx) {
    lanes().forEach((_, l) => {
      ctx.fillStyle = l % 2 ? "#f7f7f7" : "#ffffff";
      ctx.fillRect(left(), laneY(l), right() - left(), LANE_H);
    });
  }
  function renderTile() {
    const c = canvas.getContext("2d");
    c.clearRect(0, 0, width, height);
    stripes(c);
    tileX = x.copy();
    if (tile) shapes(c, tileX);
    canvas.style.transform = "none";
  }

  function draw(ctx = null) {   // ctx: an SVG recorder (export.js); none: this frame's transform
    if (ctx) {                  // vector export: the shapes themselves at the current scale
      ctx.clearRect(0, 0, width, height);
      stripes(ctx);
      if (tile) shapes(ctx, x);
      return;
    }
    hook.paints = (hook.paints || 0) + 1;
    if (!tileX) return;
    const [a, b] = tileX.domain(), k = (x(b) - x(a)) / (tileX(b) - tileX(a));
    const c = x(a) - k * tileX(a);
    canvas.style.transform = Math.abs(k - 1) < 1e-9 && Math.abs(c) < 1e-6 ? "none" : `matrix(${k},0,0,1,${c},0)`;
  }

  function shapes(ctx, x) {   // the tile's rectangles and event markers at scale x
    let drawn = 0, markers = 0, dimmed = 0;
    ctx.save();
    ctx.beginPath(); ctx.rect(left(), 0, right() - left(), height); ctx.clip();
    // shapes are gathered per colour: one fillStyle per colour, then fillRect (Chromium's fast
    // path; one path of thousands of rects filled at once cost more) and the markers' triangles
    // as one path per colour instead of a path and a fill each
    const rects = new Map(), marks = new Map(), lo = left() - 8, hi = right() + 8;
    const put = (m, key, ...v) => { let a = m.get(key); if (!a) m.set(key, a = []); a.push(...v); };
    if (tile.mode === "items") {
      const it = tile.items;
      for (let i = 0; i < it.start_ns.length; i++) {
        const a = x(it.start_ns[i]), b = x(it.end_ns[i]);
        if (b < left() || a > right()) continue;
        const y = laneY(it.lane[i]);
        const dk = dim && dim(it.lane[i], it.kind[i], laneMode, it.ppdu[i]) ? DIM : 0;
        dimmed += dk > 0;
        put(rects, it.kind[i] + dk, Math.max(lo, a), y + 6, Math.max(1, Math.min(hi, b) - Math.max(lo, a)), LANE_H - 10);
        drawn++;
        if (it.severity[i] > 0) { put(marks, it.severity[i], a, Math.max(3, b - a), y); markers++; }
      }
    } else {
      const e = tile.edges_ns;
      tile.busy_ns.forEach((busy, l) => {
        const y = laneY(l), kind = tile.kind[l], sev = tile.severity[l], sm = tile.sta_mask ? tile.sta_mask[l] : null;
        for (let k = 0; k < busy.length; k++) {
          const a = x(e[k]), b = x(e[k + 1]);
          if (b < lo || a > hi) continue;
          const dk = dim && dim(l, kind[k], laneMode, undefined, sm ? sm[k] : undefined) ? DIM : 0;
          if (busy[k] > 0) {
            const h = Math.max(1, Math.min(1, busy[k] / (e[k + 1] - e[k])) * (LANE_H - 10));
            put(rects, Math.max(0, kind[k]) + dk, a, y + LANE_H - 4 - h, Math.max(1, b - a), h);
            drawn++; dimmed += dk > 0;
          }
          if (sev[k] > 0) { put(marks, sev[k], a, Math.max(3, b - a), y); markers++; }
        }
      });
    }
    const vector = !ctx.canvas;    // the SVG recorder: one element per shape, as before
    for (const [k, r] of rects) {       // key = kind (+ DIM when the selection excludes it)
      ctx.fillStyle = KIND_COLOR[k % DIM];
      ctx.globalAlpha = k >= DIM ? 0.12 : 1;
      for (let i = 0; i < r.length; i += 4) ctx.fillRect(r[i], r[i + 1], r[i + 2], r[i + 3]);
    }
    ctx.globalAlpha = 1;
    for (const [sev, m] of marks) {     // event marker: a bar and a triangle above the lane
      ctx.fillStyle = SEVERITY_COLOR[sev];
      for (let i = 0; i < m.length; i += 3) ctx.fillRect(m[i], m[i + 2] + 2, m[i + 1], 3);
      if (!vector) ctx.beginPath();
      for (let i = 0; i < m.length; i += 3) {
        const a = m[i], w = m[i + 1], y = m[i + 2];
        if (vector) ctx.beginPath();
        ctx.moveTo(a + w / 2 - 4, y); ctx.lineTo(a + w / 2 + 4, y); ctx.lineTo(a + w / 2, y + 6);
        if (vector) ctx.fill(); else ctx.closePath();
      }
      if (!vector) ctx.fill();
    }
    ctx.restore();
    if (!vector) Object.assign(hook, {drawn, markers, dimmed, mode: tile.mode});
  }

  // One tile request at a time: a view that changes while one is out (keys pressed in a row)
  // is fetched when it returns, for the view as it is then; the answer in between is still
  // drawn (stretched) if its lanes are current. Under load, a request per key press queued
  // behind the others on the server, each waiting longer.
  let inflight = null, queued = null;
  function fetchTile() {
    if (inflight) {
      queued ||= inflight.catch(() => {}).then(() => { queued = null; return fetchTile(); });
      return queued;
    }
    const [d0, d1] = x.domain(), mine = ++seq, mode = laneMode;
    const px = Math.max(1, Math.round(right() - left()));
    // the station masks of bucketed sniffer lanes cost the server as much as the tile: asked for
    // only while a station/flow filter is on (a separate URL: the HTTP and server caches key on it)
    const sta = mode === "sniffer" && !!(dim && dim.masks);
    inflight = source.tile(Math.max(0, d0), Math.min(span, d1), px, mode, sta).then((t) => {
      if (mine !== seq || mode !== laneMode) return;
      tile = t; hook.tiles++; renderTile(); onSettle();
      hook.firstTileMs ??= performance.now();   // first lanes drawn, ms after navigation start (bench_ui.py)
    }).finally(() => { inflight = null; });
    return inflight;
  }
  // the tile of a moving view is asked for once it rests TILE_SETTLE_MS; callers of settled() (keys)
  // are answered when that tile is drawn
  let waiting = [];
  function fetchNow() {
    clearTimeout(timer);
    const w = waiting, p = fetchTile();
    waiting = [];
    p.catch(() => {}).then(() => w.forEach((ok) => ok()));
    return p;
  }
  function schedule() { clearTimeout(timer); timer = setTimeout(fetchNow, TILE_SETTLE_MS); }
  const settled = () => new Promise((ok) => waiting.push(ok));

  const zoom = d3.zoom().scaleExtent([1, Math.max(1, span / 20000)])   // 20 µs across at most zoom
    .filter((ev) => !ev.shiftKey && !ev.button)
    .on("zoom", (ev) => {
      x = ev.transform.rescaleX(x0); hook.domain = x.domain(); requestPaint(); schedule();
      if (pinned == null && ev.sourceEvent) hideTip(); else placeTip();   // the hovered item moved away
    });
  const brush = d3.brushX().filter((ev) => ev.shiftKey)
    .on("end", (ev) => onBrush(ev.selection ? ev.selection.map((p) => x.invert(p)) : null));

  function setDomain(t0, t1) {   // programmatic (keys, links, resize): drawn in the next frame
    const k = (right() - left()) / (x0(t1) - x0(t0));
    svg.call(zoom.transform, d3.zoomIdentity.translate(left() - k * x0(t0), 0).scale(k));
  }

  function itemAt(mx, my) {
    if (!tile || tile.mode !== "items") return null;
    const lane = Math.floor((my - MARGIN.top) / LANE_H), it = tile.items;
    let best = null, bestD = 4;
    for (let i = 0; i < it.start_ns.length; i++) {
      if (it.lane[i] !== lane) continue;
      const a = x(it.start_ns[i]), b = Math.max(a + 1, x(it.end_ns[i]));
      const d = mx < a ? a - mx : mx > b ? mx - b : 0;
      if (d < bestD) { bestD = d; best = i; }
    }
    return best;
  }

  async function showTip(i, mx, my) {
    const it = tile.items, id = it.ppdu[i];
    if (!details.has(id)) details.set(id, await source.ppdu(id));
    const d = details.get(id);
    rows(tipDl, [["kind", meta.kinds[it.kind[i]]], ["TA", d.ta], ["RA", d.ra],
      ["start", formatNs(it.start_ns[i], 1e7)], ["airtime", `${d.airtime_us} µs`],
      ["PHY", phyText(d)],
      ["MPDUs", d.n_mpdus], ["failed seqs", (d.failed_seqs || []).join(", ") || "none"],
      ["event", it.severity[i] ? SEVERITY_NAME[it.severity[i]] : "none"],
      ["heard by", (d.heard_by || []).join(", ")]]);
    tipItem = {ppdu: id, start_ns: it.start_ns[i], end_ns: it.end_ns[i], lane: it.lane[i], dx: mx - x(it.start_ns[i]), dy: my};
    tip.style("display", "block");
    placeTip();
    hook.tip = tip.node().textContent;
  }
  function hideTip() {
    tip.style("display", "none"); tip.classed("pinned", false);
    tipItem = null; pinned = null; hook.tipVisible = false;
  }
  // the tooltip stays next to its item while it is on screen, and goes when it is not
  function placeTip() {
    if (!tipItem) return;
    const a = x(tipItem.start_ns), b = Math.max(a + 1, x(tipItem.end_ns));
    if (b < left() || a > right() || tipItem.lane >= lanes().length) { hideTip(); return; }
    const ax = Math.min(Math.max(a + tipItem.dx, a), b);
    tip.style("left", `${Math.max(0, Math.min(ax + 12, width - 260))}px`).style("top", `${tipItem.dy + 12}px`);
    hook.tipVisible = true;
  }

  svg.on("mousemove", (ev) => {
    if (pinned != null) return;
    const [mx, my] = d3.pointer(ev, svg.node()), i = itemAt(mx, my);
    if (i == null) { hideTip(); return; }
    showTip(i, mx, my);
  }).on("mouseleave", () => { if (pinned == null) hideTip(); })
    .on("click", (ev) => {
      const [mx, my] = d3.pointer(ev, svg.node()), i = itemAt(mx, my);
      const pin = pinned == null && i != null ? tile.items.ppdu[i] : null;
      if (i == null) { hideTip(); onPick(null); return; }
      showTip(i, mx, my).then(() => { pinned = pin; tip.classed("pinned", pin != null); onPick(pin); });
    });

  svg.call(zoom).on("dblclick.zoom", null);
  layout();
  await fetchTile();
  // a resize keeps the visible time range (the zoom transform is in pixels: re-derive it)
  let lastW = root.clientWidth;
  new ResizeObserver(() => {
    if (root.clientWidth === lastW) return;
    lastW = root.clientWidth;
    const [d0, d1] = x.domain();
    layout(); setDomain(d0, d1); renderTile(); schedule();
  }).observe(root);

  return {
    drawTo(ctx) { draw(ctx); return {width, height}; },   // the lanes onto another 2-D context (SVG export)
    zoomTo(t0, t1) {   // programmatic zoom (also a test hook)
      setDomain(t0, t1);
      return fetchNow();
    },
    setLanes(mode) { hideTip(); laneMode = mode; tile = null; layout(); return fetchTile(); },
    setDim(f) {
      dim = f; gLabels.selectAll("text").classed("dimmed", (_, l) => !!(dim && dim(l, -1, laneMode))); renderTile();
      // a filter switched on over bucketed sniffer lanes: the tile again, with its station masks
      if (dim && dim.masks && tile && laneMode === "sniffer" && tile.mode === "buckets" && !tile.sta_mask) fetchTile();
    },
    domain: () => x.domain(),
    laneMode: () => laneMode,
    clearBrush() { gBrush.call(brush.move, null); },
    pinned: () => pinned,
    pinnedStart: () => (pinned != null && tipItem ? tipItem.start_ns : null),
    async pick(id) {   // pin a PPDU of the current tile programmatically (URL state, "find next")
      if (id == null) { hideTip(); onPick(null); return false; }
      const i = tile && tile.mode === "items" ? tile.items.ppdu.indexOf(id) : -1;
      if (i < 0) return false;
      const a = x(tile.items.start_ns[i]), b = Math.max(a + 1, x(tile.items.end_ns[i]));
      await showTip(i, (a + b) / 2, laneY(tile.items.lane[i]) + LANE_H / 2);
      pinned = id; tip.classed("pinned", true); onPick(id);
      return true;
    },
    key(k) {   // W/S zoom about the centre, A/D pan a quarter of the view
      const [d0, d1] = x.domain(), w = d1 - d0, c = (d0 + d1) / 2;
      const nw = k === "w" ? w / 2 : k === "s" ? w * 2 : w, shift = k === "a" ? -w / 4 : k === "d" ? w / 4 : 0;
      let a = c + shift - nw / 2, b = c + shift + nw / 2;
      if (b - a > span) { a = 0; b = span; }
      if (a < 0) { b -= a; a = 0; }
      if (b > span) { a -= b - span; b = span; }
      setDomain(a, b);            // the zoom event scheduled the tile: keys in a row ask for one
      return settled();
    },
    onView(f) { viewers.push(f); f({x, left: left(), right: right(), width, span}); },
    itemScreenPos(ppdu) {   // test hook: where a drawn PPDU sits on screen
      if (!tile || tile.mode !== "items") return null;
      const i = tile.items.ppdu.indexOf(ppdu);
      if (i < 0) return null;
      const r = svg.node().getBoundingClientRect();
      return {x: r.left + (x(tile.items.start_ns[i]) + Math.max(x(tile.items.start_ns[i]) + 1, x(tile.items.end_ns[i]))) / 2,
              y: r.top + laneY(tile.items.lane[i]) + LANE_H / 2};
    },
  };
}
