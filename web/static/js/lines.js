// Multi-series line chart (goodput per flow, Jain's index over time, RTT, CDF as steps).
// series: [{label, x: [...], y: [...]}]; x in ns (time) unless opts.xIsValue.
import {formatNs} from "./format.js";

export function lines(el, series, {yLabel = "", xIsValue = false, step = false, yDomain = null,
                                   height = 220, xLabel = ""} = {}) {
  const w = Math.max(el.clientWidth || 0, 320), h = height, m = {l: 48, r: 12, t: 10, b: 34};
  const svg = d3.select(el).selectAll("svg").data([0]).join("svg").attr("width", w).attr("height", h);
  svg.selectAll("*").remove();
  const all = series.flatMap((s) => s.x.map((v, i) => [v, s.y[i]])).filter((p) => p[1] != null);
  const xd = d3.extent(all, (p) => p[0]);
  const x = d3.scaleLinear().domain(xd[0] == null ? [0, 1] : xd).range([m.l, w - m.r]);
  const y = d3.scaleLinear().domain(yDomain || [0, d3.max(all, (p) => p[1]) || 1]).nice().range([h - m.b, m.t]);
  const color = d3.scaleOrdinal(d3.schemeTableau10);
  const span = x.domain()[1] - x.domain()[0];
  svg.append("g").attr("transform", `translate(0,${h - m.b})`)
    .call(d3.axisBottom(x).ticks(6).tickFormat(xIsValue ? null : (t) => formatNs(t, span)));
  svg.append("g").attr("transform", `translate(${m.l},0)`).call(d3.axisLeft(y).ticks(5));
  svg.append("text").attr("x", m.l).attr("y", m.t + 2).attr("class", "y-label").text(yLabel);
  if (xLabel) svg.append("text").attr("x", w - m.r).attr("y", h - 2).attr("text-anchor", "end").text(xLabel);
  const line = d3.line().defined((d) => d[1] != null).x((d) => x(d[0])).y((d) => y(d[1]))
    .curve(step ? d3.curveStepAfter : d3.curveLinear);
  svg.append("g").selectAll("path").data(series).join("path")
    .attr("class", "series").attr("fill", "none").attr("stroke-width", 1.5)
    .attr("stroke", (_, i) => color(i)).attr("d", (s) => line(s.x.map((v, i) => [v, s.y[i]])))
    .append("title").text((s) => s.label);
  if (series.length > 1 && series.length <= 12) {
    const lg = svg.append("g").attr("class", "legend");
    series.forEach((s, i) => lg.append("text").attr("x", w - m.r - 4).attr("y", m.t + 10 + i * 12)
      .attr("text-anchor", "end").attr("fill", color(i)).text(s.label));
  }
  return svg.node();
}
