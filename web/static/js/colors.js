// Colours of PPDU kinds and event severities. A kind is a code into the kind names the data
// carries (meta.kinds, viz/tiles.py KINDS); severities follow viz/tiles.py SEVERITY.
export const KIND_COLOR = ["#4e79a7", "#f28e2b", "#59a14f", "#76b7b2", "#9c755f", "#b07aa1",
                           "#bab0ac", "#edc948", "#d3d3d3"];
export const SEVERITY_COLOR = [null, "#ff9da7", "#e15759", "#c2185b", "#b00020"];
export const SEVERITY_NAME = ["", "retry", "RTS unanswered", "failed MPDUs / overlap", "RTS/CTS collision"];
