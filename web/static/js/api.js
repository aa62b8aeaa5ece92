// Data sources for the views. serverSource talks to the Flask API; localSource serves the
// same calls from data embedded in a self-contained report (no server, no eval).

async function getJSON(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: ${r.status}`);
  return r.json();
}

export function serverSource(base = "") {
  return {
    meta: () => getJSON(`${base}/api/meta`),
    tile: (t0, t1, px, lanes, stations = false) =>   // stations: bucketed sniffer lanes' station masks
      getJSON(`${base}/api/tile?t0=${Math.floor(t0)}&t1=${Math.ceil(t1)}&px=${px}&lanes=${lanes}`
              + (stations ? "&stations=1" : "")),
    ppdu: (id) => getJSON(`${base}/api/ppdu/${id}`),
    find: (what, after, before = false) =>
      getJSON(`${base}/api/find?what=${what}&after=${Math.max(0, Math.floor(after))}${before ? "&before=1" : ""}`),
    search: (q, after) => getJSON(`${base}/api/search?q=${encodeURIComponent(q)}&after=${Math.max(0, Math.floor(after))}`),
    tracks: (t0, t1, n) => getJSON(`${base}/api/tracks?t0=${Math.floor(t0)}&t1=${Math.ceil(t1)}&n=${n}`),
    tsg: (flow) => getJSON(`${base}/api/tsg?flow=${flow}`),
    pcapLink: (t0, t1, f = {}) => {   // the selection as a pcapng download (serve only)
      const q = new URLSearchParams({t0: Math.max(0, Math.floor(t0)), t1: Math.ceil(t1)});
      for (const k of ["sta", "kinds"]) if (f[k] != null) q.set(k, f[k].join(","));
      return `${base}/api/export.pcapng?${q}`;
    },
    analysis: (t0, t1, f = {}) => {
      const q = new URLSearchParams();
      if (t0 != null) { q.set("t0", Math.floor(t0)); q.set("t1", Math.ceil(t1)); }
      for (const k of ["sta", "kinds", "flows"]) if (f[k] != null) q.set(k, f[k].join(","));
      const qs = q.toString();
      return getJSON(`${base}/api/analysis${qs ? "?" + qs : ""}`);
    },
  };
}

// items: columns lane, sniffer_lanes (list per item), start_ns, end_ns, kind, severity, ppdu,
// and the detail columns shown on hover (ta, ra, phy, mcs, nss, bw_mhz, n_mpdus, airtime_us, ...).
const DETAIL = ["ta", "ra", "phy", "mcs", "nss", "bw_mhz", "rate_mbps", "n_mpdus", "airtime_us", "failed_seqs", "heard_by"];

export function localSource(data) {
  const it = data.timeline.items, nsta = data.timeline.meta.lanes.station.length;
  data.timeline.meta.sta_bits ||= nsta <= 31 ? [...Array(nsta).keys()] : [...Array(30).keys(), -1];
  const n = it.start_ns.length;
  const byId = new Map(it.ppdu.map((id, i) => [id, i]));
  return {
    meta: async () => data.timeline.meta,
    ppdu: async (id) => {
      const i = byId.get(id);
      return i == null ? {ppdu: id} : Object.fromEntries([["ppdu", id], ["kind", data.timeline.meta.kinds[it.kind[i]]],
                                                         ["start_ns", it.start_ns[i]], ...DETAIL.map((k) => [k, it[k][i]])]);
    },
    analysis: async (t0, t1, f = {}) => (t0 == null && !Object.keys(f).length ? data.analysis
                                                                            : localAnalysis(data, t0, t1, f)),
    tracks: async () => data.tracks || {tracks: []},
    tsg: async (i) => (data.tsg || [])[i] ||       // the graphs of the report's window (viz/report.py)
      {data: null, why: `the report embeds the time-sequence graphs of its first ${(data.tsg || []).length} flows; serve shows them all`},
    find: async (what, after, before = false) => {   // from the embedded items' worst event (4: collision, 3: failed/overlap)
      const sev = {collision: [4], failed: [3], unanswered: [2], event: [1, 2, 3, 4]}[what] || [];
      let best = -1;
      for (let i = 0; i < n; i++) {
        if (!sev.includes(it.severity[i]) || (before ? it.start_ns[i] >= after : it.start_ns[i] < after)) continue;
        if (best < 0 || (before ? it.start_ns[i] > it.start_ns[best] : it.start_ns[i] < it.start_ns[best])) best = i;
      }
      return best < 0 ? null : {ppdu: it.ppdu[best], kind: what, start_ns: it.start_ns[best], end_ns: it.end_ns[best]};
    },      // the report's window at a fixed resolution
    tile: async (t0, t1, px, lanes) => {
      const lanesOf = (i) => lanes === "sniffer" ? it.sniffer_lanes[i] : [it.lane[i]];
      const sel = [];
      for (let i = 0; i < n; i++) if (it.start_ns[i] < t1 && it.end_ns[i] > t0) sel.push(i);
      const names = data.timeline.meta.lanes[lanes], K = data.timeline.meta.kinds.length;
      if (sel.length <= 4 * px) {
        const out = {lane: [], start_ns: [], end_ns: [], kind: [], severity: [], ppdu: []};
        for (const i of sel) for (const l of lanesOf(i)) {
          out.lane.push(l); out.start_ns.push(it.start_ns[i]); out.end_ns.push(it.end_ns[i]);
          out.kind.push(it.kind[i]); out.severity.push(it.severity[i]); out.ppdu.push(it.ppdu[i]);
        }
        return {mode: "items", t0_ns: t0, t1_ns: t1, px, lanes: names, items: out};
      }
      const w = (t1 - t0) / px;
      const busy = names.map(() => new Float64Array(px)), sev = names.map(() => new Int8Array(px));
      const count = names.map(() => new Int32Array(px));
      const kw = names.map(() => new Float64Array(px * K));
      // sniffer lanes: per bucket the bitmask of the stations heard in it (as viz/tilestations.py;
      // the first 30 station lanes own a bit, the others share bit 30: meta.sta_bits says so)
      const sm = lanes === "sniffer" ? names.map(() => new Int32Array(px)) : null;
      for (const i of sel) for (const l of lanesOf(i)) {
        const a = Math.max(it.start_ns[i], t0), b = Math.min(it.end_ns[i], t1);
        const fa = Math.max(0, Math.floor((a - t0) / w)), fb = Math.min(px - 1, Math.floor((b - 1 - t0) / w));
        count[l][Math.max(0, Math.min(px - 1, Math.floor((it.start_ns[i] - t0) / w)))] += 1;
        for (let k = fa; k <= fb; k++) {
          const lo = Math.max(a, t0 + k * w), hi = Math.min(b, t0 + (k + 1) * w);
          busy[l][k] += Math.max(0, hi - lo);
          kw[l][k * K + it.kind[i]] += Math.max(0, hi - lo);
          sev[l][k] = Math.max(sev[l][k], it.severity[i]);
          if (sm) sm[l][k] |= 1 << Math.min(it.lane[i], 30);
        }
      }
      const kind = names.map((_, l) => Array.from({length: px}, (_, k) => {
        let best = -1, bw = 0;
        for (let c = 0; c < K; c++) if (kw[l][k * K + c] > bw) { bw = kw[l][k * K + c]; best = c; }
        return best;
      }));
      const edges = Array.from({length: px + 1}, (_, k) => t0 + k * w);
      return {mode: "buckets", t0_ns: t0, t1_ns: t1, px, lanes: names, edges_ns: edges,
              busy_ns: busy.map((a) => Array.from(a)), count: count.map((a) => Array.from(a)), kind,
              severity: sev.map((a) => Array.from(a)), ...(sm ? {sta_mask: sm.map((a) => Array.from(a))} : {})};
    },
  };
}

// The report's selection, computed in the page from what it embeds: the time series of the whole
// run's analysis cut to the range and flows; the PPDU panels from the embedded window's items.
function intHist(vals) {
  if (!vals.length) return {x: [], y: []};
  const lo = Math.min(...vals), hi = Math.max(...vals), y = new Array(hi - lo + 1).fill(0);
  for (const v of vals) y[v - lo]++;
  return {x: Array.from({length: hi - lo + 1}, (_, i) => lo + i), y};
}

export function localAnalysis(data, t0, t1, f) {
  const A = data.analysis, it = data.timeline.items, off = data.timeline.meta.offset_ns || 0;
  const lo = t0 == null ? -Infinity : t0, hi = t1 == null ? Infinity : t1;
  const flowsAll = A.flows || [];
  const keep = f.flows ? new Set(f.flows.filter((v) => v !== "").map((i) => (flowsAll[+i] || {}).label)) : null;
  const inT = (t) => t - off >= lo && t - off < hi;                    // run-relative -> window-relative
  const out = {range_ns: [t0, t1], filters: f, summary: A.summary, sync: A.sync, notes: A.notes};
  out.flows = keep ? flowsAll.filter((x) => keep.has(x.label)) : flowsAll;
  if (A.goodput) {
    const idx = A.goodput.t_ns.map((t, i) => (inT(t) ? i : -1)).filter((i) => i >= 0);
    out.goodput = {t_ns: idx.map((i) => A.goodput.t_ns[i]),
                   series: A.goodput.series.filter((s) => !keep || keep.has(s.label)).map((s) => ({label: s.label, mbps: idx.map((i) => s.mbps[i])}))};
  }
  if (A.jain) {
    const idx = A.jain.t_ns.map((t, i) => (inT(t) ? i : -1)).filter((i) => i >= 0);
    if (keep && out.goodput) {    // Jain over the kept flows that moved data in the window
      out.jain = {t_ns: out.goodput.t_ns, airtime: [], goodput: out.goodput.t_ns.map((_, k) => {
        const x = out.goodput.series.map((s) => s.mbps[k]).filter((v) => v != null && v > 0);
        const s1 = x.reduce((a, b) => a + b, 0), s2 = x.reduce((a, b) => a + b * b, 0);
        return s2 > 0 ? +(s1 * s1 / (x.length * s2)).toFixed(3) : null;
      })};
    } else {
      out.jain = {t_ns: idx.map((i) => A.jain.t_ns[i]), goodput: idx.map((i) => A.jain.goodput[i]),
                  airtime: (A.jain.airtime || []).length ? idx.map((i) => A.jain.airtime[i]) : []};
    }
  }
  out.cdf = [];
  if (A.rtt) {
    out.rtt = {series: A.rtt.series.filter((s) => !keep || keep.has(s.label)).map((s) => {
      const idx = s.t_ns.map((t, i) => (inT(t) ? i : -1)).filter((i) => i >= 0);
      return {label: s.label, t_ns: idx.map((i) => s.t_ns[i]), rtt_ms: idx.map((i) => s.rtt_ms[i]),
              qdelay_ms: idx.map((i) => s.qdelay_ms[i])};
    })};
  }
  // PPDU panels: the embedded items that start in the range and pass the station/kind filters
  const kinds = data.timeline.meta.kinds, sta = f.sta ? new Set(f.sta) : null, kd = f.kinds ? new Set(f.kinds) : null;
  const sel = [];
  for (let i = 0; i < it.start_ns.length; i++) {
    if (it.start_ns[i] < lo || it.start_ns[i] >= hi) continue;
    if (sta && !sta.has(it.ta[i])) continue;
    if (kd && !kd.has(kinds[it.kind[i]])) continue;
    sel.push(i);
  }
  const busy = new Map();
  for (const i of sel) if (it.ta[i] != null) busy.set(it.ta[i], (busy.get(it.ta[i]) || 0) + (it.end_ns[i] - it.start_ns[i]));
  const us = [...busy].map(([s, ns]) => [s, Math.floor(ns / 1000)]).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const tot = Math.max(1, us.reduce((a, [, v]) => a + v, 0));
  if (sel.length) out.airtime_share = us.map(([s, v]) => ({station: s, share_pct: 100 * v / tot}));
  const data_ = sel.filter((i) => kinds[it.kind[i]] === "data");
  const first = sel.length ? Math.min(...sel.map((i) => it.start_ns[i])) : 0;
  const bin = 1e9, span = sel.length ? Math.max(...sel.map((i) => it.end_ns[i])) - first : 0;
  const nb = Math.max(1, Math.ceil(span / bin)), y = new Array(nb).fill(0);
  for (const i of sel) y[Math.min(nb - 1, Math.floor((it.start_ns[i] - first) / bin))] += (it.failed_seqs[i] || []).length;
  out.hist = {failed_per_10s: {x: y.map((_, k) => `${((first + off + k * bin) / 1e9).toFixed(1)} s`), y, bin_s: 1},
              mpdus_per_ampdu: intHist(data_.map((i) => it.n_mpdus[i]).filter((v) => v != null)),
              mcs: intHist(data_.map((i) => it.mcs[i]).filter((v) => v != null))};
  const rts = new Map();
  for (const i of sel) {
    if (kinds[it.kind[i]] !== "rts" || it.ta[i] == null) continue;
    const r = rts.get(it.ta[i]) || {station: it.ta[i], rts: 0, cts: 0, collisions: 0};
    r.rts++; if (it.severity[i] === 4) r.collisions++; else if (it.severity[i] !== 2) r.cts++;
    rts.set(it.ta[i], r);
  }
  out.rts = [...rts.values()].map((r) => ({...r, ratio: +(r.cts / r.rts).toFixed(4)}));
  out.approx = `(offline report: PPDU panels from the ${sel.length} PPDUs of the embedded window that pass; ` +
    "an RTS with a collision counts as unanswered; failed MPDUs from each PPDU's failed sequence numbers; " +
    "Jain of a flow selection over the kept flows with goodput in a window; no Jain CDF for a selection.)";
  return out;
}

// The report's search: MACs among the embedded window's PPDUs, IPs/ports among the flows.
function localSearch(data, q, after) {
  const it = data.timeline.items;
  if (/^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/.test(q)) {
    let best = -1;
    for (let i = 0; i < it.start_ns.length; i++) {
      if ((it.ta[i] === q || it.ra[i] === q) && it.start_ns[i] >= after && (best < 0 || it.start_ns[i] < it.start_ns[best])) best = i;
    }
    return best < 0 ? {none: `no PPDU to or from ${q} in this report's window`}
      : {ppdu: {ppdu: it.ppdu[best], start_ns: it.start_ns[best], end_ns: it.end_ns[best]}};
  }
  if (/^seq\s*[0-9]{1,4}$/.test(q)) return {none: "sequence numbers are searched by `sniffsync serve` (the report does not embed MPDUs)"};
  if (/^[0-9]{1,3}(\.[0-9]{1,3}){3}$|^[0-9]{1,5}$/.test(q)) {
    const hit = (data.analysis.flows || []).map((f, i) => [f, i])
      .filter(([f]) => f.label.split("→").some((e) => { const k = e.lastIndexOf(":"); return e.slice(0, k) === q || e.slice(k + 1) === q; }))
      .map(([, i]) => i);
    return hit.length ? {flows: hit} : {none: `no flow with ${q} at either end`};
  }
  return {none: "search for a MAC (aa:bb:cc:dd:ee:ff), an IPv4 address, a port or 'seq N'"};
}
