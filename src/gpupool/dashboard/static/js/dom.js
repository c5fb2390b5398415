// Building the page: elements from data, and the figures' formats.
//
// Everything shown is set as text (textContent, attributes), never parsed as HTML: job
// names, commands, users and logs are other users' text. The page's Content-Security-Policy
// (api/dashboard.py) is the second wall.

const SVG_NS = "http://www.w3.org/2000/svg";

/** An element: h("td", {class: "num", title: "..."}, "text", child, [more, children]).
 *  Attributes: `class`, `dataset` (an object), `on` ({event: handler}), `hidden`, and
 *  any other as a string attribute. Children: strings, numbers, nodes, arrays; null skipped. */
export function h(tag, attributes = {}, ...children) {
  return build(document.createElement(tag), attributes, children);
}

/** An SVG element, as `h`. */
export function s(tag, attributes = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attributes, children);
}

function build(element, attributes, children) {
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "dataset") Object.assign(element.dataset, value);
    else if (name === "on") {
      for (const [event, handler] of Object.entries(value)) element.addEventListener(event, handler);
    } else if (name === "hidden") element.hidden = Boolean(value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else if (child instanceof Node) element.append(child);
    else element.append(String(child));
  }
}

/** A horizontal bar: `parts` are [{share (0..1), class, title}] laid end to end. */
export function bar(parts, { label = "", className = "" } = {}) {
  const track = h("div", { class: `bar ${className}`, role: "img", "aria-label": label });
  for (const part of parts) {
    const share = Math.max(0, Math.min(1, part.share || 0));
    if (share <= 0) continue;
    const fill = h("span", { class: `fill ${part.class || ""}`, title: part.title || null });
    fill.style.width = `${(share * 100).toFixed(2)}%`;
    track.append(fill);
  }
  return track;
}

/** The colour class of a utilization: what a held GPU that idles looks like matters most
 *  (the pool's first question: which GPUs are held but not used). */
export function utilClass(pct, held = true) {
  if (pct === null || pct === undefined) return "util-unknown";
  if (!held) return pct >= 5 ? "util-foreign" : "util-free";
  if (pct < 30) return "util-low";
  if (pct < 70) return "util-mid";
  return "util-high";
}

export function link(href, ...children) {
  return h("a", { href }, ...children);
}

export function jobLink(id, ...children) {
  return link(`#/jobs/${id}`, children.length ? children : `#${id}`);
}

export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind}` }, text);
}

export function stateBadge(state) {
  return badge(state, `state-${String(state).toLowerCase()}`);
}

/** A table's head: columns as [label, class] ("num": a right-aligned figure). */
export function tableHead(columns) {
  return h("thead", {}, h("tr", {}, columns.map(([label, cls]) => h("th", { class: cls || null }, label))));
}

/** A message in place of content: "no history yet", an error, a refusal. */
export function notice(text, kind = "") {
  return h("div", { class: `notice ${kind}` }, text);
}

// -- figures ----------------------------------------------------------------------------

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** Bytes in binary units, as the CLI prints them: 80GiB, 1.5GiB, 512MiB. */
export function bytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  let value = Number(n);
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const digits = value >= 100 || unit === 0 || Number.isInteger(value) ? 0 : 1;
  return `${value.toFixed(digits)}${UNITS[unit]}`;
}

export function pct(value) {
  return value === null || value === undefined ? "–" : `${Math.round(value)}%`;
}

/** A GPU count: 2, 0.5 (a shared GPU's part). */
export function gpus(n) {
  if (n === null || n === undefined) return "–";
  return Number.isInteger(n) ? String(n) : String(Number(n.toFixed(2)));
}

/** A duration in seconds: 45s, 4m05s, 12m, 3h05m, 2d4h. */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
}

function pad(n) {
  return String(n).padStart(2, "0");
}

export const CLOCK = { hour: "2-digit", minute: "2-digit", hourCycle: "h23" };

/** A moment (epoch seconds) as a clock time, with the date when not today. */
export function clock(epoch) {
  if (epoch === null || epoch === undefined) return "–";
  const when = new Date(epoch * 1000);
  const today = new Date();
  const time = when.toLocaleTimeString([], CLOCK);
  if (when.toDateString() === today.toDateString()) return time;
  return `${when.toLocaleDateString([], { month: "short", day: "numeric" })} ${time}`;
}

/** "3m ago", "in 1h05m". */
export function relative(epoch, now = Date.now() / 1000) {
  if (epoch === null || epoch === undefined) return "–";
  const delta = epoch - now;
  return delta >= 0 ? `in ${duration(delta)}` : `${duration(-delta)} ago`;
}

/** The full date and time, for a title attribute. */
export function fullTime(epoch) {
  return epoch === null || epoch === undefined ? "" : new Date(epoch * 1000).toLocaleString();
}

/** What a job asks for: "2 GPUs", "1 A100-80GB GPU", "20GiB of a GPU", "0.5 GPU". */
export function request(resources, gpuCount) {
  if (!resources) return gpus(gpuCount);
  if (resources.gpu_memory_bytes) return `${bytes(resources.gpu_memory_bytes)} of a GPU`;
  if (resources.gpu_fraction) return `${gpus(resources.gpu_fraction)} of a GPU`;
  const count = resources.gpus ?? gpuCount ?? 0;
  const kind = resources.gpu_type ? `${resources.gpu_type} ` : "";
  return `${gpus(count)} ${kind}GPU${count === 1 ? "" : "s"}`;
}
