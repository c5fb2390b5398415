// The last 24 hours of utilization, hand-drawn in SVG (no chart library): the pool's mean
// utilization (area) and memory (line) over time, then one heat-map row per GPU.
//
// Data: GET v1/gpus/history?since=86400s, the shape api/usage.py answers (docs/dashboard.md):
//   {since, until, period_s, simulated, gpus: [{node, index, memory_total_bytes,
//                                  points: [[time, util_pct|null, mem_used_bytes|null]]}]}
// A daemon without the route answers 404: the chart says "no history yet" and asks again
// a minute later. History moves slowly, so it is fetched once a minute, not every refresh.

import { CLOCK, h, notice, s } from "./dom.js";

export const HISTORY_WINDOW_S = 24 * 3600;
export const HISTORY = `v1/gpus/history?since=${HISTORY_WINDOW_S}s`;
const REFETCH_MS = 60_000;
const PLOT_HEIGHT = 150;
const ROW_HEIGHT = 12;
const MARGIN = { left: 38, right: 12, top: 8, bottom: 20 };
const LEVELS = 10; // colour steps of the heat map (classes heat-0 .. heat-10)

export class HistoryChart {
  constructor(box) {
    this.box = box;
    this.history = null;
    this.problem = null; // a notice in place of the chart
    this.fetchedAt = 0;
    this.title = h("h2", { class: "panel-title" }, "Utilization, last 24 h");
    this.readout = h("span", { class: "readout muted" });
    this.body = h("div", { class: "chart-body" });
    box.append(h("header", { class: "panel-head" }, this.title, this.readout), this.body);
  }

  async refresh(tick, pool) {
    this.pool = pool;
    if (Date.now() - this.fetchedAt < REFETCH_MS) return;
    this.fetchedAt = Date.now();
    try {
      this.history = await tick.get(HISTORY);
      this.problem = null;
    } catch (error) {
      this.history = null;
      this.problem =
        error.status === 404
          ? notice("No history yet: this daemon does not keep samples over time (GET /v1/gpus/history).", "empty")
          : notice(`History could not be read: ${error.message}`, "error");
    }
    this.redraw();
  }

  redraw() {
    if (this.problem) {
      this.body.replaceChildren(this.problem);
      this.box.dataset.chart = "absent";
      return;
    }
    if (!this.history) return;
    const width = Math.max(320, this.body.clientWidth || 800);
    this.body.replaceChildren(draw(this.history, width, this.readout));
    this.box.dataset.chart = "drawn";
  }
}

/** Per GPU, the mean of its samples in each of `buckets` equal slices of [since, until). */
export function bucketed(history, buckets) {
  const until = history.until ?? Date.now() / 1000;
  const since = history.since ?? until - HISTORY_WINDOW_S;
  const span = Math.max(1, until - since);
  const rows = (history.gpus || []).map((gpu) => {
    const util = new Array(buckets).fill(null);
    const memory = new Array(buckets).fill(null);
    const counts = new Array(buckets).fill(0);
    const memCounts = new Array(buckets).fill(0);
    for (const [time, pct, used] of gpu.points || []) {
      const i = Math.floor(((time - since) / span) * buckets);
      if (i < 0 || i >= buckets) continue;
      if (pct !== null && pct !== undefined) {
        util[i] = (util[i] || 0) + pct;
        counts[i] += 1;
      }
      if (used !== null && used !== undefined && gpu.memory_total_bytes) {
        memory[i] = (memory[i] || 0) + (used / gpu.memory_total_bytes) * 100;
        memCounts[i] += 1;
      }
    }
    return {
      label: `${gpu.node}:${gpu.index}`,
      util: util.map((v, i) => (counts[i] ? v / counts[i] : null)),
      memory: memory.map((v, i) => (memCounts[i] ? v / memCounts[i] : null)),
    };
  });
  return { since, until, rows };
}

function meanOf(rows, key, i) {
  let sum = 0;
  let n = 0;
  for (const row of rows) {
    const v = row[key][i];
    if (v !== null) {
      sum += v;
      n += 1;
    }
  }
  return n ? sum / n : null;
}

/** The SVG: mean utilization as an area, mean memory as a line, a heat-map row per GPU. */
function draw(history, width, readout) {
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const buckets = Math.max(24, Math.min(288, Math.floor(plotWidth / 3)));
  const { since, until, rows } = bucketed(history, buckets);
  const step = plotWidth / buckets;
  const heatTop = MARGIN.top + PLOT_HEIGHT + MARGIN.bottom + 6;
  const height = heatTop + rows.length * ROW_HEIGHT + 4;
  const x = (i) => MARGIN.left + i * step;
  const y = (pct) => MARGIN.top + PLOT_HEIGHT * (1 - pct / 100);
  const meanUtil = Array.from({ length: buckets }, (_, i) => meanOf(rows, "util", i));
  const meanMemory = Array.from({ length: buckets }, (_, i) => meanOf(rows, "memory", i));

  const svg = s("svg", {
    class: "chart",
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: "img",
    "aria-label": "pool utilization over the last 24 hours",
  });
  for (const pct of [0, 50, 100]) {
    svg.append(s("line", { class: "grid", x1: MARGIN.left, x2: width - MARGIN.right, y1: y(pct), y2: y(pct) }));
    svg.append(s("text", { class: "axis", x: MARGIN.left - 6, y: y(pct) + 4, "text-anchor": "end" }, `${pct}%`));
  }
  for (const [i, label] of timeTicks(since, until, buckets)) {
    svg.append(s("line", { class: "grid faint", x1: x(i), x2: x(i), y1: MARGIN.top, y2: MARGIN.top + PLOT_HEIGHT }));
    svg.append(s("text", { class: "axis", x: x(i), y: MARGIN.top + PLOT_HEIGHT + 14, "text-anchor": "middle" }, label));
  }
  for (const points of runs(meanUtil, (v, i) => [x(i + 0.5), y(v)])) {
    const first = points[0];
    const last = points[points.length - 1];
    const area = `M${first[0]},${y(0)} L${points.map((p) => p.join(",")).join(" L")} L${last[0]},${y(0)} Z`;
    svg.append(s("path", { class: "util-area", d: area }));
    svg.append(s("path", { class: "util-line", d: `M${points.map((p) => p.join(",")).join(" L")}` }));
  }
  for (const points of runs(meanMemory, (v, i) => [x(i + 0.5), y(v)])) {
    svg.append(s("path", { class: "mem-line", d: `M${points.map((p) => p.join(",")).join(" L")}` }));
  }
  rows.forEach((row, r) => {
    const top = heatTop + r * ROW_HEIGHT;
    svg.append(s("text", { class: "axis", x: MARGIN.left - 6, y: top + ROW_HEIGHT - 3, "text-anchor": "end" }, row.label));
    svg.append(s("rect", { class: "heat-none", x: MARGIN.left, y: top, width: plotWidth, height: ROW_HEIGHT - 2 }));
    // Adjacent slices of one colour are one rectangle: a pool of 64 GPUs stays light.
    let start = 0;
    for (let i = 1; i <= buckets; i += 1) {
      if (i < buckets && level(row.util[i]) === level(row.util[start])) continue;
      const lv = level(row.util[start]);
      if (lv !== null) {
        svg.append(s("rect", { class: `heat-${lv}`, x: x(start), y: top, width: (i - start) * step + 0.5, height: ROW_HEIGHT - 2 }));
      }
      start = i;
    }
  });
  const cursor = s("line", { class: "cursor", y1: MARGIN.top, y2: height, x1: -10, x2: -10 });
  svg.append(cursor);
  svg.addEventListener("mousemove", (event) => {
    const box = svg.getBoundingClientRect();
    const i = Math.floor((((event.clientX - box.left) * width) / box.width - MARGIN.left) / step);
    if (i < 0 || i >= buckets) return;
    cursor.setAttribute("x1", x(i + 0.5));
    cursor.setAttribute("x2", x(i + 0.5));
    const at = new Date((since + ((i + 0.5) / buckets) * (until - since)) * 1000);
    const time = at.toLocaleTimeString([], CLOCK);
    const u = meanUtil[i];
    const m = meanMemory[i];
    readout.textContent = `${time} · mean utilization ${u === null ? "–" : `${Math.round(u)}%`} · memory ${m === null ? "–" : `${Math.round(m)}%`}`;
  });
  const simulated = (history.gpus || []).some((g) => g.simulated) || history.simulated;
  const legend = h(
    "div",
    { class: "legend" },
    h("span", { class: "key key-util" }, "mean utilization"),
    h("span", { class: "key key-mem" }, "mean memory"),
    h("span", { class: "key key-heat" }, "per GPU: 0 → 100%"),
    simulated ? h("span", { class: "tag tag-sim" }, "simulated") : null,
  );
  return h("div", {}, legend, svg);
}

/** The colour step of a utilization, or null for no sample. */
function level(pct) {
  if (pct === null || pct === undefined) return null;
  return Math.max(0, Math.min(LEVELS, Math.round((pct / 100) * LEVELS)));
}

/** Unbroken stretches of values (a gap in the samples is a gap in the line). */
function runs(values, point) {
  const out = [];
  let current = [];
  values.forEach((v, i) => {
    if (v === null) {
      if (current.length) out.push(current);
      current = [];
    } else current.push(point(v, i));
  });
  if (current.length) out.push(current);
  return out;
}

/** Ticks on whole hours, about six of them: [bucket index, "HH:MM"]. */
function timeTicks(since, until, buckets) {
  const span = until - since;
  const every = [1, 2, 3, 4, 6, 12, 24].map((n) => n * 3600).find((n) => span / n <= 8) || 86400;
  const ticks = [];
  for (let t = Math.ceil(since / every) * every; t < until; t += every) {
    const label = new Date(t * 1000).toLocaleTimeString([], CLOCK);
    ticks.push([((t - since) / span) * buckets, label]);
  }
  return ticks;
}
