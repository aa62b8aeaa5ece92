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
