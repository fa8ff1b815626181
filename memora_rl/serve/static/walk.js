// Walk viewer: step through a walk, from POST /v1/retrieve or an eval record given inline (no framework, no build).
"use strict";
const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";
let walk = null;
let position = 0;

function svgNode(tag, attributes, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// Working set on the top row (filled), frontier on the bottom row (hollow), each frontier node labelled with the
// cue anchor it shares with the working set (the walk reports the anchor text, not which working entry holds it).
function drawGraph(state, labels) {
  const svg = $("graph-view");
  svg.replaceChildren();
  const width = Number(svg.getAttribute("width"));
  const place = (count, index) => ((index + 1) * width) / (count + 1);
  const top = state.working_set_ids.map((id, i) => ({ id, x: place(state.working_set_ids.length, i), y: 50 }));
  const bottom = state.frontier.map((item, i) => ({ ...item, x: place(state.frontier.length, i), y: 200 }));
  svg.append(svgNode("text", { x: 8, y: 16 }, "working set"));
  svg.append(svgNode("text", { x: 8, y: 166 }, "frontier (linked to the working set)"));
  if (top.length && bottom.length) {
    svg.append(svgNode("line", { x1: 8, y1: 125, x2: width - 8, y2: 125, stroke: "#ccc", "stroke-dasharray": "4 4" }));
  }
  for (const node of bottom) svg.append(svgNode("text", { x: node.x - 30, y: node.y - 16 }, `via ${node.via && node.via !== "anchor" ? `${node.via} ` : ""}${node.anchor}`));
  for (const node of top) {
    svg.append(svgNode("circle", { cx: node.x, cy: node.y, r: 12, class: "working", "data-id": node.id }));
    svg.append(svgNode("text", { x: node.x - 12, y: node.y - 18 }, node.id));
    svg.append(svgNode("text", { x: node.x - 30, y: node.y + 28 }, (labels[node.id] || "").slice(0, 24)));
  }
  for (const node of bottom) {
    svg.append(svgNode("circle", { cx: node.x, cy: node.y, r: 10, class: "frontier", "data-id": node.id }));
    svg.append(svgNode("text", { x: node.x - 12, y: node.y + 26 }, node.id));
  }
}

function show(index) {
  position = Math.max(0, Math.min(index, walk.walk.length - 1));
  const state = walk.walk[position];
  const last = position === walk.walk.length - 1;
  $("position").textContent = `step ${position + 1} / ${walk.walk.length}`;
  $("budget-left").textContent = state.budget_left;
  $("action").textContent = state.action_text === null ? "(final state)" : `${state.action}: ${state.action_text}`;
  $("error").textContent = state.error || "";
  $("observation").textContent = state.observation;
  $("prev").disabled = position === 0;
  $("next").disabled = last;
  $("final").hidden = !last;
  const labels = Object.fromEntries(walk.entries.map((e) => [e.id, e.abstraction]));
  drawGraph(state, labels);
}

async function run(event) {
  event.preventDefault();
  $("status").textContent = "retrieving…";
  const body = { graph: $("graph").value, question: $("question").value };
  if ($("budget").value) body.budget = Number($("budget").value);
  if ($("top-k").value) body.top_k = Number($("top-k").value);
  const response = await fetch("/v1/retrieve", {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  const data = await response.json();
  if (!response.ok) {
    $("status").textContent = data.error || `HTTP ${response.status}`;
    $("viewer").hidden = true;
    return;
  }
  walk = data;
  $("status").textContent = `${data.entries.length} entries in ${data.latency_ms.toFixed(1)} ms (policy ${data.policy})`;
  $("stop-reason").textContent = data.stop_reason;
  $("rewards").textContent = Object.entries(data.reward_components).map(([k, v]) => `${k}=${v.toFixed(3)}`).join(", ");
  $("context").textContent = data.context;
  $("viewer").hidden = false;
  show(0);
}

// An eval record's walk comes inline as JSON ({walk, entries}); otherwise the form runs a live retrieve.
function showInline(element) {
  walk = JSON.parse(element.textContent);
  $("viewer").hidden = false;
  show(0);
}

$("prev").addEventListener("click", () => show(position - 1));
$("next").addEventListener("click", () => show(position + 1));
if ($("walk-data")) showInline($("walk-data"));
else if ($("walk-form")) $("walk-form").addEventListener("submit", run);
