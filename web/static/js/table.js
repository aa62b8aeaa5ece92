// Plain table from rows of objects (RTS/CTS counters, per-flow summary, sync report).
export function table(el, rowsData, columns, empty = null) {
  if (!rowsData.length && empty) {    // what is missing and why, not an empty header row
    const p = document.createElement("p"); p.className = "empty-note"; p.textContent = empty;
    el.replaceChildren(p);
    return p;
  }
  const t = document.createElement("table");
  const head = t.createTHead().insertRow();
  for (const [, title] of columns) { const th = document.createElement("th"); th.textContent = title; head.append(th); }
  const body = t.createTBody();
  for (const r of rowsData) {
    const tr = body.insertRow();
    for (const [key] of columns) {
      const v = r[key];
      tr.insertCell().textContent = v == null ? "—" : typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : String(v);
    }
  }
  el.replaceChildren(t);
  return t;
}
