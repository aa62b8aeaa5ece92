// Bar chart / histogram: bins [{label, value}] (airtime share, failed MPDUs per 10 s, MCS, ...).
export function bars(el, bins, {yLabel = "", height = 200, color = "#4e79a7", empty = null} = {}) {
  // rotated tick labels need room below the axis: ~3.3 px per character at -30°, 10 px font
  const longest = d3.max(bins, (b) => b.label.length) || 1;
  const m = {l: 48, r: 10, t: 18, b: Math.min(110, 22 + 3.3 * longest)};
  const w = Math.max(el.clientWidth || 0, 200), h = height + m.b - 40;
  const svg = d3.select(el).selectAll("svg").data([0]).join("svg").attr("width", w).attr("height", h);
  svg.selectAll("*").remove();
  const x = d3.scaleBand().domain(bins.map((b) => b.label)).range([m.l, w - m.r]).padding(0.15);
  const y = d3.scaleLinear().domain([0, d3.max(bins, (b) => b.value) || 1]).nice().range([h - m.b, m.t]);
  const every = Math.ceil(bins.length / 16);
  svg.append("g").attr("transform", `translate(0,${h - m.b})`)
    .call(d3.axisBottom(x).tickValues(x.domain().filter((_, i) => i % every === 0)))
    .selectAll("text").attr("transform", "rotate(-30)").attr("text-anchor", "end");
  svg.append("g").attr("transform", `translate(${m.l},0)`).call(d3.axisLeft(y).ticks(5));
  svg.append("text").attr("x", 4).attr("y", 10).attr("class", "y-label").text(yLabel);
  if (!bins.some((b) => b.value > 0)) {
    svg.append("text").attr("class", "empty-note").attr("x", (m.l + w - m.r) / 2).attr("y", (m.t + h - m.b) / 2)
      .attr("text-anchor", "middle").text(empty || (bins.length ? "none in this range" : "no data"));
  }
  svg.append("g").selectAll("rect").data(bins).join("rect").attr("class", "bar")
    .attr("x", (b) => x(b.label)).attr("width", x.bandwidth())
    .attr("y", (b) => y(b.value)).attr("height", (b) => y(0) - y(b.value)).attr("fill", color)
    .append("title").text((b) => `${b.label}: ${b.value}`);
  return svg.node();
}
