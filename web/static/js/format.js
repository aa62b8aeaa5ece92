// Time formatting for a run-relative nanosecond axis: the unit follows the visible span.
export function timeUnit(spanNs) {
  if (spanNs >= 2e9) return {div: 1e9, unit: "s", digits: spanNs >= 2e11 ? 0 : 3};
  if (spanNs >= 2e6) return {div: 1e6, unit: "ms", digits: spanNs >= 2e8 ? 0 : 3};
  return {div: 1e3, unit: "µs", digits: spanNs >= 2e4 ? 0 : 1};
}

export function formatNs(ns, spanNs = Math.abs(ns)) {
  const u = timeUnit(spanNs);
  return `${(ns / u.div).toFixed(u.digits)} ${u.unit}`;
}

// Text-only DOM building: nothing coming from data is ever parsed as HTML or code.
export function rows(el, pairs) {
  el.replaceChildren();
  for (const [k, v] of pairs) {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v == null ? "—" : String(v);
    el.append(dt, dd);
  }
}

// A PPDU's PHY in words: MCS-based PHYs as "ht MCS 5 · 1 SS · 20 MHz", legacy ones by their rate.
export function phyText(d) {
  if (d.phy == null) return null;
  if (d.mcs == null) return d.rate_mbps == null ? `${d.phy} (rate not recorded)` : `${d.phy} ${d.rate_mbps} Mb/s`;
  return [`${d.phy} MCS ${d.mcs}`, `${d.nss ?? 1} SS`, d.bw_mhz == null ? null : `${d.bw_mhz} MHz`]
    .filter((v) => v != null).join(" · ");
}
