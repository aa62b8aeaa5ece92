// The selection's filters on the timeline's lanes: a PPDU of an unselected frame kind is dimmed
// in any lane mode; in station lanes, the lane of an unselected station is dimmed, and with a
// flow selection every lane but those of the stations sending the flows' data (meta.flow_ta).
// Bucketed tiles carry only each bucket's dominant kind: a bucket is dimmed by that kind.
export function laneDim(meta, f) {
  const pick = (v) => (v ? new Set(v.filter((x) => x !== "")) : null);
  const sta = pick(f.sta), kinds = pick(f.kinds), flows = pick(f.flows);
  const senders = flows ? new Set([...flows].map((i) => (meta.flow_ta || [])[+i]).filter(Boolean)) : null;
  if (!sta && !kinds && !senders) return null;
  return (lane, kind, mode) => {
    if (kinds && kind >= 0 && !kinds.has(meta.kinds[kind])) return true;
    if (mode !== "station") return false;
    const name = meta.lanes.station[lane];
    return !!(sta && !sta.has(name)) || !!(senders && !senders.has(name));
  };
}
