// Multi-series line chart (goodput per flow, Jain's index over time, RTT, CDF as steps).
// series: [{label, x: [...], y: [...]}]; x in ns (time) unless opts.xIsValue.
import {formatNs} from "./format.js";

export function lines(el, series, {yLabel = "", xIsValue = false, step = false, yDomain = null,
                                   height = 220, xLabel = "", empty = "no data"} = {}) {
  const w = Math.max(el.clientWidth || 0, 200), h = height, m = {l: 48, r: 24, t: 18, b: 34};
  const svg = d3.select(el).selectAll("svg").data([0]).join("svg").attr("width", w).attr("height", h);
  svg.selectAll("*").remove();
  const all = series.flatMap((s) => s.x.map((v, i) => [v, s.y[i]])).filter((p) => p[1] != null);
  if (!all.length) {     // say what is missing instead of drawing empty axes
    d3.select(el).selectAll("div.series-legend").remove();
    svg.attr("height", 60);
    svg.append("text").attr("x", 4).attr("y", 10).attr("class", "y-label").text(yLabel);
    svg.append("text").attr("class", "empty-note").attr("x", w / 2).attr("y", 38).attr("text-anchor", "middle")
      .text(empty);
    return svg.node();
  }
  const xd = d3.extent(all, (p) => p[0]);
  // one point (a brushed range holding a single window) would give a zero-width domain
  const pad = xd[0] != null && xd[0] === xd[1] ? Math.max(1, Math.abs(xd[0]) * 0.05) : 0;
  const x = d3.scaleLinear().domain(xd[0] == null ? [0, 1] : [xd[0] - pad, xd[1] + pad]).range([m.l, w - m.r]);
  const y = d3.scaleLinear().domain(yDomain || [0, d3.max(all, (p) => p[1]) || 1]).nice().range([h - m.b, m.t]);
  const color = d3.scaleOrdinal(d3.schemeTableau10);
  const span = x.domain()[1] - x.domain()[0];
  svg.append("g").attr("transform", `translate(0,${h - m.b})`)
    .call(d3.axisBottom(x).ticks(6).tickFormat(xIsValue ? null : (t) => formatNs(t, span)));
  svg.append("g").attr("transform", `translate(${m.l},0)`).call(d3.axisLeft(y).ticks(5));
  svg.append("text").attr("x", 4).attr("y", 10).attr("class", "y-label").text(yLabel);   // above the plot
  if (xLabel) svg.append("text").attr("x", w - m.r).attr("y", h - 2).attr("text-anchor", "end").text(xLabel);
  const line = d3.line().defined((d) => d[1] != null).x((d) => x(d[0])).y((d) => y(d[1]))
    .curve(step ? d3.curveStepAfter : d3.curveLinear);
  svg.append("g").selectAll("path").data(series).join("path")
    .attr("class", "series").attr("fill", "none").attr("stroke-width", 1.5)
    .attr("stroke", (_, i) => color(i)).attr("d", (s) => line(s.x.map((v, i) => [v, s.y[i]])))
    .append("title").text((s) => s.label);
  // a series with fewer than 3 points is invisible as a line: draw its points too
  svg.append("g").selectAll("g").data(series).join("g").attr("fill", (_, i) => color(i))
    .selectAll("circle").data((s) => s.y.filter((v) => v != null).length < 3
      ? s.x.map((v, i) => [v, s.y[i]]).filter((d) => d[1] != null) : [])
    .join("circle").attr("class", "point").attr("r", 3).attr("cx", (d) => x(d[0])).attr("cy", (d) => y(d[1]));
  // legend under the chart (HTML, text only): inside the plot it hid the lines
  const lg = d3.select(el).selectAll("div.series-legend").data([0]).join("div").attr("class", "series-legend");
  lg.selectAll("span").data(series.length > 1 && series.length <= 12 ? series : []).join("span")
    .style("--c", (_, i) => color(i)).text((s) => s.label);
  return svg.node();
}
