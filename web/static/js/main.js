// Page wiring: timeline on top with its counter tracks, the drill-down panel, analysis views
// below; brushing the timeline filters them. The view (range, lanes, pinned PPDU) lives in the
// URL's hash: a link reproduces it, back/forward walk through views. Keys: W/S zoom, A/D pan,
// Esc clears the selection; the header's buttons jump to the next collision / failed MPDU.
import {serverSource, localSource} from "./api.js";
import {timeline} from "./timeline.js";
import {renderAnalysis} from "./analysis.js";
import {tracks} from "./tracks.js";
import {renderDrill} from "./drill.js";
import {filters, describe} from "./filters.js";
import {formatNs} from "./format.js";
import {exportPng, exportSvg} from "./export.js";
import {tsgPanel} from "./tsg.js";
import {laneDim, stationLanes} from "./lanefilter.js";

const readHash = () => Object.fromEntries(new URLSearchParams(location.hash.slice(1)));
const FILTER_KEYS = ["sta", "kinds", "flows"];
const SAVE_MS = 250;
// the hash's filters: a key per filtered group, its values comma-separated ("" = none selected)
const hashFilters = (h) => Object.fromEntries(FILTER_KEYS.filter((k) => k in h).map((k) => [k, h[k].split(",")]));

export async function start(source) {
  const root = document.getElementById("app");
  const status = document.getElementById("status");
  const analysisRoot = document.getElementById("analysis");
  const drillRoot = document.getElementById("drill");
  const meta = await source.meta();
  let tl, sel = null, applying = false, ready = false;
  let range = null, filt = {}, asked = 0, whole = null;
  const recompute = async () => {   // one selection (range + filters) for every analysis view
    const mine = ++asked, note = describe(range, filt, (t) => formatNs(t, meta.span_ns));
    const a = await source.analysis(range ? range[0] : null, range ? range[1] : null, filt);
    if (mine !== asked) return;
    status.textContent = range || Object.keys(filt).length ? "selection applied to the analysis views" : "";
    document.getElementById("selection-note").textContent = a.approx ? `${note} ${a.approx}` : note;
    renderAnalysis(analysisRoot, a);
    const fl = filt.flows ? filt.flows.filter((v) => v !== "").map((i) => (whole.flows || [])[+i]?.label) : null;
    trk.select(filt.sta ? filt.sta.filter((v) => v !== "") : null, fl);
    dimLanes();
    window.__sniffsync.selection = {range, filters: filt, note: document.getElementById("selection-note").textContent};
  };
  const onBrush = (r) => { range = r; return recompute(); };
  let dimSeq = 0;
  async function dimLanes() {     // the filters on the lanes; sniffer lanes need each PPDU's station
    const mine = ++dimSeq, [a, b] = tl.domain();
    // zoomed in, sniffer lanes need each PPDU's station; bucketed, the tile's station masks do
    const need = tl.laneMode() === "sniffer" && (filt.sta || filt.flows) && window.__sniffsync.timeline.mode !== "buckets";
    const of = need ? await stationLanes(source, Math.max(0, a), Math.min(meta.span_ns, b)) : null;
    if (mine === dimSeq) tl.setDim(laneDim(meta, filt, of));
  }
  // a settled tile: the URL and the sniffer lanes' dimming follow once the gesture has rested
  // SAVE_MS (a history entry per key press or wheel step cost a same-document navigation each)
  let saveTimer = 0;
  const onSettle = () => {
    if (applying) return;                // the URL's own view (back/forward, a link)
    clearTimeout(saveTimer);
    saveTimer = setTimeout(() => {
      saveView();
      if (tl && tl.laneMode() === "sniffer" && (filt.sta || filt.flows)) dimLanes();
    }, SAVE_MS);
  };
  const saveView = () => {      // a settled view that differs from the URL's becomes a history entry
    if (!ready || applying) return;
    const [a, b] = tl.domain(), st = {t0: Math.round(a), t1: Math.round(b), lanes: tl.laneMode()};
    if (tl.pinned() != null) st.ppdu = tl.pinned();
    for (const k of FILTER_KEYS) if (filt[k]) st[k] = filt[k].join(",");
    const h = "#" + new URLSearchParams(st).toString();
    if (h !== location.hash) history.pushState(null, "", h);
  };
  const onPick = async (id) => {
    const d = id == null ? null : await source.ppdu(id);
    if (id != null && tl.pinned() !== id) return;     // unpinned or re-pinned while it loaded
    renderDrill(drillRoot, d, meta.kinds);
    saveView();
  };
  tl = await timeline(document.getElementById("timeline"), source, {onBrush, onPick, onSettle});
  const trk = tracks(document.getElementById("tracks"), source, tl);

  async function applyHash() {   // the URL's view: lanes, range, pinned PPDU
    const h = readHash(), t0 = Number(h.t0), t1 = Number(h.t1);
    applying = true;
    try {
      if (h.lanes && h.lanes !== tl.laneMode() && meta.lanes[h.lanes]) {
        document.getElementById("lanes").value = h.lanes;
        await tl.setLanes(h.lanes);
      }
      if (Number.isFinite(t0) && Number.isFinite(t1) && t1 > t0) await tl.zoomTo(Math.max(0, t0), Math.min(meta.span_ns, t1));
      await tl.pick(h.ppdu == null || h.ppdu === "" ? null : Number(h.ppdu));
      const f = hashFilters(h);
      if (sel && JSON.stringify(f) !== JSON.stringify(filt)) sel.set(f);
    } finally { applying = false; }
  }
  // one after another: two quick back steps ran two at once, and the earlier one's pin could
  // land after the later one's unpin (the drill open on a URL without a PPDU)
  let applied = Promise.resolve();
  window.addEventListener("popstate", () => { applied = applied.then(applyHash, applyHash); });

  document.getElementById("lanes").addEventListener("change", async (ev) => {
    await tl.setLanes(ev.target.value); await dimLanes(); saveView();
  });
  document.getElementById("reset").addEventListener("click", () => tl.zoomTo(0, meta.span_ns));
  document.getElementById("export").addEventListener("click", async () => {
    const [a, b] = tl.domain();
    window.__sniffsync.exported = await exportPng(`sniffsync-${Math.round(a / 1e3)}-${Math.round(b / 1e3)}us.png`);
  });
  document.getElementById("export-svg").addEventListener("click", () => {
    const [a, b] = tl.domain();
    window.__sniffsync.exportedSvg = exportSvg(tl, `sniffsync-${Math.round(a / 1e3)}-${Math.round(b / 1e3)}us.svg`);
  });
  const pcapBtn = document.getElementById("export-pcap");
  if (!source.pcapLink) pcapBtn.hidden = true;          // the report has no captures to cut
  else pcapBtn.addEventListener("click", () => {
    const [a, b] = range || tl.domain(), url = source.pcapLink(a, Math.min(meta.span_ns + 1, b), filt);
    const link = document.createElement("a");
    link.href = url; link.download = "";
    document.body.append(link); link.click(); link.remove();
    window.__sniffsync.pcap = url;
  });
  for (const b of document.querySelectorAll("[data-find]")) {
    b.addEventListener("click", () => findNext(b.dataset.find));
  }
  async function findNext(what, before = false) {
    const ps = tl.pinnedStart(), after = ps != null ? ps + (before ? 0 : 1) : tl.domain()[before ? 1 : 0];
    const hit = await source.find(what, after, before);
    (window.__sniffsync.find ||= []).push(hit);
    if (!hit) { status.textContent = `no ${what} ${before ? "before" : "after"} ${Math.round(after / 1e6)} ms`; return; }
    status.textContent = "";
    const pad = Math.max(200_000, (hit.end_ns - hit.start_ns) * 2);
    await tl.zoomTo(Math.max(0, hit.start_ns - pad), Math.min(meta.span_ns, hit.end_ns + pad));
    await tl.pick(hit.ppdu);
  }
  document.addEventListener("keydown", (ev) => {
    const k = ev.key.toLowerCase();
    if (k === "escape" && ev.target.blur) ev.target.blur();     // Esc works from the search box too
    else if (ev.target.closest && ev.target.closest("input, select, textarea") || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if ("wasd".includes(k) && k.length === 1) { tl.key(k); ev.preventDefault(); }
    else if (k === "escape") { tl.pick(null); tl.clearBrush(); }
    else if (k === "arrowright" || k === "arrowleft") { findNext("event", k === "arrowleft"); ev.preventDefault(); }
  });

  window.__sniffsync.meta = meta;
  window.__sniffsync.tl = tl;
  document.getElementById("title").textContent = meta.title || "sniffsync";
  if (/^\/run\/\d+\/$/.test(location.pathname)) {    // a campaign's run (serve CAMPAIGN): the way back
    const back = document.createElement("a");
    back.href = "../../"; back.textContent = "← campaign"; back.className = "campaign-link";
    document.getElementById("title").before(back);
  }
  if (location.hash.length > 1) await applyHash();
  ready = true;
  whole = await source.analysis();
  renderAnalysis(analysisRoot, whole);
  const tsg = tsgPanel(document.getElementById("tsg"), source, tl);
  document.getElementById("flows").addEventListener("click", (ev) => {   // a flow's row -> its graph
    const tr = ev.target.closest("tbody tr");
    if (!tr) return;
    const label = tr.cells[0].textContent, i = (whole.flows || []).findIndex((f) => f.label === label);
    if (i >= 0) tsg.show(i, label);
  });
  sel = filters(document.getElementById("filters"), meta, whole.flows || [], (f) => { filt = f; recompute(); saveView(); });
  if (Object.keys(hashFilters(readHash())).length) {       // a link's filters
    applying = true;
    try { sel.set(hashFilters(readHash())); } finally { applying = false; }
  }
  document.getElementById("search").addEventListener("keydown", async (ev) => {
    if (ev.key !== "Enter") return;
    const ps = tl.pinnedStart(), r = await source.search(ev.target.value, ps != null ? ps + 1 : tl.domain()[0]);
    (window.__sniffsync.search ||= []).push(r);
    if (r.ppdu) {
      status.textContent = "";
      const pad = Math.max(200_000, (r.ppdu.end_ns - r.ppdu.start_ns) * 2);
      await tl.zoomTo(Math.max(0, r.ppdu.start_ns - pad), Math.min(meta.span_ns, r.ppdu.end_ns + pad));
      await tl.pick(r.ppdu.ppdu);
    } else if (r.flows) {
      status.textContent = `${r.flows.length} flow(s) selected`;
      sel.only("flows", r.flows);
    } else status.textContent = r.none || "not found";
  });
  document.getElementById("selection-note").textContent = describe(null, {}, formatNs);
  root.dataset.ready = "1";
}

const embedded = document.getElementById("sniffsync-data");
// served alone at "/", or as a campaign's run under "/run/<i>/": the API lives beside the page
start(embedded ? localSource(JSON.parse(embedded.textContent)) : serverSource(location.pathname.replace(/\/+$/, "")));
