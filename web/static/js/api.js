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
    tile: (t0, t1, px, lanes) =>
      getJSON(`${base}/api/tile?t0=${Math.floor(t0)}&t1=${Math.ceil(t1)}&px=${px}&lanes=${lanes}`),
    ppdu: (id) => getJSON(`${base}/api/ppdu/${id}`),
    find: (what, after) => getJSON(`${base}/api/find?what=${what}&after=${Math.max(0, Math.floor(after))}`),
    tracks: (t0, t1, n) => getJSON(`${base}/api/tracks?t0=${Math.floor(t0)}&t1=${Math.ceil(t1)}&n=${n}`),
    analysis: (t0, t1) => getJSON(t0 == null ? `${base}/api/analysis`
      : `${base}/api/analysis?t0=${Math.floor(t0)}&t1=${Math.ceil(t1)}`),
  };
}

// items: columns lane, sniffer_lanes (list per item), start_ns, end_ns, kind, severity, ppdu,
// and the detail columns shown on hover (ta, ra, phy, mcs, nss, bw_mhz, n_mpdus, airtime_us, ...).
const DETAIL = ["ta", "ra", "phy", "mcs", "nss", "bw_mhz", "rate_mbps", "n_mpdus", "airtime_us", "failed_seqs", "heard_by"];

export function localSource(data) {
  const it = data.timeline.items;
  const n = it.start_ns.length;
  const byId = new Map(it.ppdu.map((id, i) => [id, i]));
  return {
    meta: async () => data.timeline.meta,
    ppdu: async (id) => {
      const i = byId.get(id);
      return i == null ? {ppdu: id} : Object.fromEntries([["ppdu", id], ["kind", data.timeline.meta.kinds[it.kind[i]]],
                                                         ["start_ns", it.start_ns[i]], ...DETAIL.map((k) => [k, it[k][i]])]);
    },
    analysis: async () => data.analysis,
    tracks: async () => data.tracks || {tracks: []},
    find: async (what, after) => {   // from the embedded items' worst event (severity 4: collision, 3: failed/overlap)
      const sev = {collision: [4], failed: [3], unanswered: [2]}[what] || [];
      let best = -1;
      for (let i = 0; i < n; i++) {
        if (sev.includes(it.severity[i]) && it.start_ns[i] >= after && (best < 0 || it.start_ns[i] < it.start_ns[best])) best = i;
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
      for (const i of sel) for (const l of lanesOf(i)) {
        const a = Math.max(it.start_ns[i], t0), b = Math.min(it.end_ns[i], t1);
        const fa = Math.max(0, Math.floor((a - t0) / w)), fb = Math.min(px - 1, Math.floor((b - 1 - t0) / w));
        count[l][Math.max(0, Math.min(px - 1, Math.floor((it.start_ns[i] - t0) / w)))] += 1;
        for (let k = fa; k <= fb; k++) {
          const lo = Math.max(a, t0 + k * w), hi = Math.min(b, t0 + (k + 1) * w);
          busy[l][k] += Math.max(0, hi - lo);
          kw[l][k * K + it.kind[i]] += Math.max(0, hi - lo);
          sev[l][k] = Math.max(sev[l][k], it.severity[i]);
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
              severity: sev.map((a) => Array.from(a))};
    },
  };
}
