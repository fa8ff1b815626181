// Walk viewer: step through a walk, from POST /v1/retrieve or an eval record given inline (no framework, no build).
//
// Layout: two columns, one row per node, so labels never meet however many nodes a step has: the working set
// on the left (filled), the frontier on the right (hollow, with the link that put it there on a second line).
// A label is cut to its column's width with "…"; the full text is the node's hover title and the side panel.
"use strict";
const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";
const LAYOUT = {
  pad: 16, // px around and between the columns
  headerY: 24, // baseline of the column headings
  firstRowY: 52, // centre of the first node row
  workingRowH: 26, // px per working-set row (one line)
  frontierRowH: 38, // px per frontier row (label line + link line)
  radius: 7, // node circle radius
  textGap: 10, // px from a circle's edge to its label
  idChars: 10, // ids longer than this are shortened on the node (in full on hover and in the panel)
};
let walk = null;
let position = 0;

function svgNode(tag, attributes, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function shortId(id) {
  return id.length > LAYOUT.idChars ? `${id.slice(0, LAYOUT.idChars - 1)}…` : id;
}

// Cut a text element's last part (the whole text when it has no tspan) until the element fits `maxWidth` px.
function fitText(element, maxWidth) {
  const part = element.lastElementChild || element;
  const full = part.textContent;
  if (element.getComputedTextLength() <= maxWidth) return;
  let low = 0;
  let high = full.length;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    part.textContent = `${full.slice(0, middle).trimEnd()}…`;
    if (element.getComputedTextLength() <= maxWidth) low = middle;
    else high = middle - 1;
  }
  part.textContent = low > 0 ? `${full.slice(0, low).trimEnd()}…` : "…";
}

// A node's label: its (short) id in bold, then its abstraction (or nothing when the store has no label for it).
function labelText(x, y, id, label) {
  const text = svgNode("text", { x, y, class: "label" });
  text.append(svgNode("tspan", { class: "node-id" }, shortId(id)));
  text.append(svgNode("tspan", {}, label ? `  ${label.abstraction}` : ""));
  return text;
}

function entryHref(id) {
  return `/graphs/${encodeURIComponent(walk.graph)}/entries/${encodeURIComponent(id)}`;
}

// What put a frontier node there: "via “Priya + job”" for a cue anchor, "via episode “…”" for other link kinds.
function viaText(node) {
  if (node.anchor === undefined) return "";
  const kind = node.via && node.via !== "anchor" ? node.via : "";
  if (!node.anchor) return `via ${kind || "anchor"}`;
  return `via ${kind ? `${kind} ` : ""}“${node.anchor}”`;
}

// One node row: circle, label line and (frontier) link line, grouped under a hover title and a link to the entry.
function nodeRow(svg, node, x, y, columnWidth) {
  const group = svgNode("g", { class: "node", "data-id": node.id });
  const label = walk.labels[node.id];
  const via = viaText(node);
  const title = [node.id, label ? `${label.abstraction}: ${label.value}` : "(no label)", via];
  group.append(svgNode("title", {}, title.filter(Boolean).join("\n")));
  const circle = { cx: x + LAYOUT.radius, cy: y, r: LAYOUT.radius, class: node.classes, "data-id": node.id };
  group.append(svgNode("circle", circle));
  const textX = x + 2 * LAYOUT.radius + LAYOUT.textGap;
  const textWidth = columnWidth - (textX - x);
  const texts = [labelText(textX, y + 4, node.id, label)];
  if (via) texts.push(svgNode("text", { x: textX, y: y + 19, class: "via" }, via));
  group.append(...texts);
  if (walk.graph) {
    const link = svgNode("a", { href: entryHref(node.id) });
    link.append(group);
    svg.append(link);
  } else svg.append(group);
  for (const text of texts) fitText(text, textWidth);
  group.addEventListener("mouseenter", () => highlight(node.id, true));
  group.addEventListener("mouseleave", () => highlight(node.id, false));
}

function heading(svg, x, text, maxWidth) {
  const element = svgNode("text", { x, y: LAYOUT.headerY, class: "column-heading" }, text);
  svg.append(element);
  fitText(element, maxWidth);
}

// The note drawn where a frontier would be, so an empty frontier reads as one and says why.
function emptyFrontier(svg, x, columnWidth) {
  const top = LAYOUT.firstRowY - LAYOUT.frontierRowH / 2;
  const height = LAYOUT.frontierRowH * 1.5;
  svg.append(svgNode("rect", { x, y: top, width: columnWidth, height, rx: 6, class: "empty-frontier" }));
  const note = $("viewer").dataset.frontierNote || "no frontier";
  const [first, ...rest] = note.split(": ");
  const lines = [first, rest.join(": ")].filter(Boolean);
  lines.forEach((line, index) => {
    const attributes = { x: x + 12, y: top + 22 + index * 18, class: index ? "empty-note" : "empty-note strong" };
    const element = svgNode("text", attributes, line);
    element.append(svgNode("title", {}, note));
    svg.append(element);
    fitText(element, columnWidth - 24);
  });
}

// Ids an expand action picked at this step (drawn as chosen in the frontier); none for other actions.
function chosenIds(state) {
  if (state.action !== "expand" || !state.action_text) return new Set();
  try {
    const action = JSON.parse(state.action_text);
    return new Set(Array.isArray(action.ids) ? action.ids.map(String) : action.id ? [String(action.id)] : []);
  } catch {
    return new Set();
  }
}

function drawGraph(state, previous) {
  const svg = $("graph-view");
  svg.replaceChildren();
  const width = Math.max(480, svg.getBoundingClientRect().width);
  const columnWidth = (width - 3 * LAYOUT.pad) / 2;
  const leftX = LAYOUT.pad;
  const rightX = 2 * LAYOUT.pad + columnWidth;
  const before = new Set(previous ? previous.working_set_ids : state.working_set_ids);
  const chosen = chosenIds(state);
  const working = state.working_set_ids.map((id) => ({ id, classes: before.has(id) ? "working" : "working new" }));
  const frontier = state.frontier.map((item) => ({
    ...item, classes: chosen.has(item.id) ? "frontier chosen" : "frontier",
  }));
  const workingHeight = working.length * LAYOUT.workingRowH;
  const frontierHeight = Math.max(1.5, frontier.length) * LAYOUT.frontierRowH; // an empty frontier's note: 1.5 rows
  const bottom = LAYOUT.firstRowY + Math.max(workingHeight, frontierHeight);
  svg.setAttribute("height", bottom);
  const dividerX = rightX - LAYOUT.pad / 2;
  svg.append(svgNode("line", { x1: dividerX, y1: 8, x2: dividerX, y2: bottom - 8, class: "divider" }));
  heading(svg, leftX, `working set (${working.length})`, columnWidth);
  const frontierHeading = `frontier (${frontier.length}): linked entries the policy may expand`;
  heading(svg, rightX, frontier.length ? frontierHeading : "frontier", columnWidth);
  const rowY = (index, rowHeight) => LAYOUT.firstRowY + index * rowHeight;
  working.forEach((node, index) => nodeRow(svg, node, leftX, rowY(index, LAYOUT.workingRowH), columnWidth));
  frontier.forEach((node, index) => nodeRow(svg, node, rightX, rowY(index, LAYOUT.frontierRowH), columnWidth));
  if (!working.length) svg.append(svgNode("text", { x: leftX, y: LAYOUT.firstRowY + 4, class: "empty-note" }, "empty"));
  if (!frontier.length) emptyFrontier(svg, rightX, columnWidth);
  drawPanel(working, frontier);
}

// The side panel: every node of the step with its full text (and a link to its entry page when the graph is served).
function panelItem(node) {
  const item = document.createElement("li");
  item.dataset.id = node.id;
  item.className = node.classes;
  const label = walk.labels[node.id];
  const id = document.createElement(walk.graph ? "a" : "code");
  id.textContent = node.id;
  if (walk.graph) id.href = entryHref(node.id);
  const abstraction = document.createElement("b");
  abstraction.textContent = label ? label.abstraction : "(no label)";
  item.append(id, " ", abstraction);
  if (node.anchor !== undefined) {
    const via = document.createElement("small");
    via.textContent = ` ${viaText(node)}`;
    item.append(via);
  }
  if (label) {
    const value = document.createElement("div");
    value.className = "entry-value";
    value.textContent = label.value;
    item.append(value);
  }
  item.addEventListener("mouseenter", () => highlight(node.id, true));
  item.addEventListener("mouseleave", () => highlight(node.id, false));
  return item;
}

function drawPanel(working, frontier) {
  $("working-count").textContent = `(${working.length})`;
  $("frontier-count").textContent = `(${frontier.length})`;
  $("working-list").replaceChildren(...working.map(panelItem));
  const empty = document.createElement("li");
  empty.className = "empty";
  empty.textContent = $("viewer").dataset.frontierNote || "no frontier";
  $("frontier-list").replaceChildren(...(frontier.length ? frontier.map(panelItem) : [empty]));
}

function highlight(id, on) {
  for (const element of document.querySelectorAll(`#viewer [data-id="${CSS.escape(id)}"]`)) {
    element.classList.toggle("hover", on);
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
  drawGraph(state, position > 0 ? walk.walk[position - 1] : null);
}

function labelMap(entries) {
  return Object.fromEntries(entries.map((e) => [e.id, { abstraction: e.abstraction, value: e.value }]));
}

// Labels of every id the walk names: the answer's entries, plus the others from /walk/labels (frontier, earlier steps).
async function fetchLabels(graph, steps, known) {
  const ids = new Set(steps.flatMap((s) => [...s.working_set_ids, ...s.frontier.map((f) => f.id)]));
  const missing = [...ids].filter((id) => !(id in known));
  if (!missing.length) return known;
  const query = new URLSearchParams([["graph", graph], ...missing.map((id) => ["id", id])]);
  const response = await fetch(`/walk/labels?${query}`);
  return response.ok ? { ...known, ...labelMap(await response.json()) } : known;
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
  walk = { ...data, labels: await fetchLabels(data.graph, data.walk, labelMap(data.entries)) };
  $("status").textContent = `${data.entries.length} entries in ${data.latency_ms.toFixed(1)} ms (policy ${data.policy})`;
  $("stop-reason").textContent = data.stop_reason;
  $("rewards").textContent = Object.entries(data.reward_components).map(([k, v]) => `${k}=${v.toFixed(3)}`).join(", ");
  $("context").textContent = data.context;
  $("viewer").hidden = false;
  show(0);
}

// An eval record's walk comes inline as JSON ({walk, entries, graph}); otherwise the form runs a live retrieve.
function showInline(element) {
  const data = JSON.parse(element.textContent);
  walk = { ...data, labels: labelMap(data.entries) };
  $("viewer").hidden = false;
  show(0);
}

$("prev").addEventListener("click", () => show(position - 1));
$("next").addEventListener("click", () => show(position + 1));
window.addEventListener("resize", () => walk && show(position));
if ($("walk-data")) showInline($("walk-data"));
else if ($("walk-form")) $("walk-form").addEventListener("submit", run);
