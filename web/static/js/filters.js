// The selection: stations (TA), frame kinds and flows as checkboxes; with the brushed range it
// makes the one query every analysis view is recomputed for. All boxes ticked = no filter.
export function filters(root, meta, flows, onChange) {
  const groups = [
    ["sta", "stations (TA)", meta.lanes.station.filter((s) => /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/.test(s))
      .map((s) => [s, s])],
    ["kinds", "frame kinds", meta.kinds.map((k) => [k, k])],
    ["flows", "flows", flows.map((f, i) => [String(i), f.label])],
  ];
  const box = root.querySelector(".filter-groups");
  box.replaceChildren();
  for (const [key, title, opts] of groups) {
    if (!opts.length) continue;
    const fs = document.createElement("fieldset"); fs.dataset.key = key;
    const lg = document.createElement("legend"); lg.textContent = title; fs.append(lg);
    for (const [value, text] of opts) {
      const l = document.createElement("label"), c = document.createElement("input");
      c.type = "checkbox"; c.checked = true; c.value = value;
      c.addEventListener("change", () => onChange(current()));
      l.append(c, " ", text); fs.append(l);
    }
    box.append(fs);
  }
  function current() {   // {sta?, kinds?, flows?}: a key only when some box of its group is unticked
    const out = {};
    for (const fs of box.querySelectorAll("fieldset")) {
      const all = [...fs.querySelectorAll("input")], on = all.filter((c) => c.checked).map((c) => c.value);
      if (on.length < all.length) out[fs.dataset.key] = on.length ? on : [""];
    }
    return out;
  }
  return {current,
          set(f) {   // tick the boxes of a selection ({sta?, kinds?, flows?}; a missing key: every box)
            for (const fs of box.querySelectorAll("fieldset")) {
              const want = f[fs.dataset.key] ? new Set(f[fs.dataset.key]) : null;
              fs.querySelectorAll("input").forEach((c) => { c.checked = !want || want.has(c.value); });
            }
            onChange(current());
          },
          reset() { box.querySelectorAll("input").forEach((c) => { c.checked = true; }); },
          only(key, values) {   // tick exactly these boxes of one group (a search's flows)
            const want = new Set(values.map(String));
            box.querySelectorAll(`fieldset[data-key="${key}"] input`).forEach((c) => { c.checked = want.has(c.value); });
            onChange(current());
          }};
}

// One line saying what the views below show, and what they do not.
export function describe(range, f, fmt) {
  const parts = [range ? `range ${fmt(range[0])} – ${fmt(range[1])}` : "whole run"];
  if (f.sta) parts.push(`stations ${f.sta.filter(Boolean).join(", ") || "none"}`);
  if (f.kinds) parts.push(`kinds ${f.kinds.filter(Boolean).join(", ") || "none"}`);
  if (f.flows) parts.push(`${f.flows.filter(Boolean).length} flow(s)`);
  const any = range || f.sta || f.kinds || f.flows;
  const lanes = [f.kinds && "PPDUs of other kinds", f.sta && "the lanes of other stations",
    f.flows && "the lanes of stations sending none of the flows' data"].filter(Boolean);
  const how = [(f.sta || f.flows) && "in sniffer lanes by the station that sent each PPDU; zoomed out, a sniffer's bucket when it holds none of the selected stations",
    f.kinds && "zoomed out, a bucket is dimmed by its main kind"].filter(Boolean).join("; ");
  const tl = lanes.length ? ` The timeline dims ${lanes.join(", ")} (${how}).` : " The timeline shows everything.";
  const trk = f.sta || f.flows ? " The tracks show the selected stations' and flows' series (utilisation, Jain and"
    + " event counts: all)." + tl : tl + " Its tracks show everything.";
  return any ? `Analysis views below: ${parts.join("; ")}.${trk}`
             : "Analysis views below: whole run, everything.";
}
