// The selection's filters on the timeline's lanes: a PPDU of an unselected frame kind is dimmed
// in any lane mode; in station lanes, the lane of an unselected station is dimmed, and with a
// flow selection every lane but those of the stations sending the flows' data (meta.flow_ta).
// In sniffer lanes a PPDU is dimmed by the station lane it has in the station tile of the same
// range (stationOf: ppdu -> lane name, from stationLanes below; none known: not dimmed).
// Bucketed tiles carry each bucket's dominant kind: a bucket is dimmed by that kind; bucketed
// sniffer lanes also carry per bucket the bitmask of the stations heard in it (viz/tilestations.py,
// meta.sta_bits: the station lane of each bit, -1 = the stations sharing the last bit): such a
// bucket is dimmed when none of its stations is selected. The server sends those masks only when
// asked (the returned function's ``masks``: a station or flow filter is on; timeline.js asks).
export function laneDim(meta, f, stationOf = null) {
  const pick = (v) => (v ? new Set(v.filter((x) => x !== "")) : null);
  const sta = pick(f.sta), kinds = pick(f.kinds), flows = pick(f.flows);
  const senders = flows ? new Set([...flows].map((i) => (meta.flow_ta || [])[+i]).filter(Boolean)) : null;
  if (!sta && !kinds && !senders) return null;
  const kept = (name) => !(sta && !sta.has(name)) && !(senders && !senders.has(name));
  const bits = meta.sta_bits || [], named = new Set(bits.filter((l) => l >= 0));
  let keepMask = 0;                  // the bits of the selected stations
  bits.forEach((l, b) => {
    const ok = l >= 0 ? kept(meta.lanes.station[l]) : meta.lanes.station.some((n, i) => !named.has(i) && kept(n));
    if (ok) keepMask |= 1 << b;
  });
  const dim = (lane, kind, mode, ppdu, mask) => {
    if (kinds && kind >= 0 && !kinds.has(meta.kinds[kind])) return true;
    if (mode === "sniffer" && mask != null) return mask !== 0 && (mask & keepMask) === 0;
    const name = mode === "station" ? meta.lanes.station[lane] : stationOf && ppdu != null ? stationOf.get(ppdu) : undefined;
    if (name === undefined) return false;
    return !!(sta && !sta.has(name)) || !!(senders && !senders.has(name));
  };
  dim.masks = !!(sta || senders);
  return dim;
}

// ppdu -> station lane name of the PPDUs in [t0, t1), from the station tile (null when bucketed)
export async function stationLanes(source, t0, t1) {
  const t = await source.tile(t0, t1, 8192, "station");
  return t.mode === "items" ? new Map(t.items.ppdu.map((id, i) => [id, t.lanes[t.items.lane[i]]])) : null;
}
