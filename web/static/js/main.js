// Page wiring: timeline on top, analysis views below; brushing the timeline filters them.
import {serverSource, localSource} from "./api.js";
import {timeline} from "./timeline.js";
import {renderAnalysis} from "./analysis.js";
import {tracks} from "./tracks.js";
import {renderDrill} from "./drill.js";

export async function start(source) {
  const root = document.getElementById("app");
  const status = document.getElementById("status");
  const analysisRoot = document.getElementById("analysis");
  let tl;
  const onBrush = async (range) => {
    status.textContent = range ? "filtered to the brushed range" : "";
    renderAnalysis(analysisRoot, await (range ? source.analysis(range[0], range[1]) : source.analysis()));
  };
  const drillRoot = document.getElementById("drill");
  const onPick = async (id) => {
    renderDrill(drillRoot, id == null ? null : await source.ppdu(id), (await source.meta()).kinds);
  };
  tl = await timeline(document.getElementById("timeline"), source, {onBrush, onPick});
  tracks(document.getElementById("tracks"), source, tl);
  document.getElementById("lanes").addEventListener("change", (ev) => tl.setLanes(ev.target.value));
  document.getElementById("reset").addEventListener("click", () => tl.zoomTo(...[0, (window.__sniffsync.meta || {}).span_ns || 1]));
  const meta = await source.meta();
  window.__sniffsync.meta = meta;
  window.__sniffsync.tl = tl;
  document.getElementById("title").textContent = meta.title || "sniffsync";
  renderAnalysis(analysisRoot, await source.analysis());
  root.dataset.ready = "1";
}

const embedded = document.getElementById("sniffsync-data");
start(embedded ? localSource(JSON.parse(embedded.textContent)) : serverSource(""));
