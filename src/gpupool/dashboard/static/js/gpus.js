// The GPU page: a summary of the pool, one card per GPU (who holds it, how much of it is
// used, whether an admin drained it), grouped by node and NVLink island, then the backends'
// nodes (backend_nodes.js), and the last 24 hours of utilization.
// Data: GET v1/gpus (each GPU's holder and latest sample, `usage`; its drain, `drained`;
// `backends`), GET v1/jobs?limit=0 (the queue's counts), GET v1/gpus/history (chart.js).

import { bar, bytes, fullTime, h, jobLink, link, notice, pct, utilClass } from "./dom.js";
import { HistoryChart } from "./chart.js";
import { backendSections } from "./backend_nodes.js";

export const gpusPage = {
  name: "gpus",
  title: "GPUs",
  mount(root) {
    const stats = h("section", { class: "stats" });
    const simulated = h("div", { class: "simulated-note", hidden: true });
    const grid = h("section", { class: "nodes" });
    const backends = h("section", { class: "nodes backends" });
    const chartBox = h("section", { class: "panel" });
    root.append(stats, simulated, grid, backends, chartBox);
    const chart = new HistoryChart(chartBox);
    return {
      async refresh(tick) {
        const [pool, queue] = await Promise.all([tick.get("v1/gpus"), tick.get(QUEUE_COUNTS)]);
        stats.replaceChildren(...summaryTiles(pool, queue));
        const sim = anySimulated(pool);
        simulated.hidden = !sim;
        simulated.replaceChildren(
          h("strong", {}, "Simulated use. "),
          "This pool runs on a declared inventory: utilization and memory come from what each ",
          "job declares (GPUPOOL_SIMULATED_UTIL), not from GPUs.",
        );
        grid.replaceChildren(...pool.nodes.map((node) => nodeSection(node)));
        if (pool.note) grid.prepend(notice(pool.note, "info"));
        backends.replaceChildren(...backendSections(pool.backends));
        backends.hidden = !(pool.backends || []).length;
        await chart.refresh(tick, pool);
      },
      resized() {
        chart.redraw();
      },
    };
  },
};

export const QUEUE_COUNTS = "v1/jobs?limit=0";

export function allGpus(pool) {
  return pool.nodes.flatMap((node) => node.gpus.map((gpu) => ({ node: node.name, gpu })));
}

function anySimulated(pool) {
  return allGpus(pool).some(({ gpu }) => gpu.usage && gpu.usage.simulated);
}

/** The pool in five figures, each a tile. */
function summaryTiles(pool, queue) {
  const all = allGpus(pool);
  const held = all.filter(({ gpu }) => gpu.jobs.length > 0);
  const utils = held.map(({ gpu }) => gpu.usage && gpu.usage.utilization_pct).filter((u) => u !== null && u !== undefined);
  const mean = utils.length ? utils.reduce((a, b) => a + b, 0) / utils.length : null;
  const idle = held.filter(({ gpu }) => gpu.usage && gpu.usage.utilization_pct !== null && gpu.usage.utilization_pct < 5);
  let used = 0;
  let total = 0;
  for (const { gpu } of all) {
    total += gpu.memory_bytes;
    if (gpu.usage && gpu.usage.memory_used_bytes !== null) used += gpu.usage.memory_used_bytes;
  }
  const counts = queue.counts || {};
  return [
    tile("GPUs held", `${held.length} / ${all.length}`, bar([{ share: all.length ? held.length / all.length : 0, class: "held" }])),
    tile("Mean utilization of held GPUs", pct(mean), bar([{ share: (mean || 0) / 100, class: utilClass(mean) }]), utilClass(mean)),
    tile(
      "Held but idle (<5%)",
      String(idle.length),
      idle.length
        ? h("span", { class: "tile-note" }, idle.map(({ node, gpu }) => `${node}:${gpu.index}`).join(" "))
        : h("span", { class: "tile-note muted" }, "none"),
      idle.length ? "warn" : "",
    ),
    tile("GPU memory used", `${bytes(used)} / ${bytes(total)}`, bar([{ share: total ? used / total : 0, class: "mem-job" }])),
    roomTile(pool),
    tile(
      "Jobs running · pending",
      `${(counts.RUNNING || 0).toLocaleString()} · ${(counts.PENDING || 0).toLocaleString()}`,
      link("#/queue", "open the queue →"),
    ),
  ];
}

function tile(label, figure, detail, kind = "") {
  return h("div", { class: `tile ${kind}` }, h("div", { class: "tile-label" }, label), h("div", { class: "tile-figure" }, figure), detail);
}

/** The largest job that could start now (by GPU count: the most free GPUs on one node)
 * against the pool's free GPUs; fewer means the free GPUs are spread over nodes
 * (service/fragmentation.py). Counted from the GPUs for a daemon that does not send them.
 * Drained GPUs are not free (the daemon does not count them): the note says how many. */
function roomTile(pool) {
  const free = pool.free_gpus ?? allGpus(pool).filter(({ gpu }) => !gpu.jobs.length).length;
  const largest = pool.largest_startable_gpus ?? Math.max(0, ...pool.nodes.map(nodeFree));
  const spread = largest < free;
  const drained = allGpus(pool).filter(({ gpu }) => gpu.drained).length;
  const note =
    (spread
      ? `${free} free, spread over nodes: ${pool.nodes.filter((n) => nodeFree(n)).map((n) => `${n.name} ${nodeFree(n)}`).join(", ")}`
      : `${free} free`) + (drained ? ` · ${drained} drained` : "");
  return tile(
    "Largest job that could start now",
    `${largest} GPU${largest === 1 ? "" : "s"}`,
    h("span", { class: `tile-note${spread ? "" : " muted"}`, dataset: { free: String(free), largest: String(largest) } }, note),
    spread ? "warn" : "",
  );
}

function nodeFree(node) {
  return node.free_gpus ?? node.gpus.filter((g) => !g.jobs.length).length;
}

/** A node: its heading, then its GPUs grouped by NVLink island. */
function nodeSection(node) {
  const models = {};
  for (const gpu of node.gpus) models[gpu.model] = (models[gpu.model] || 0) + 1;
  const kinds = Object.entries(models).map(([model, n]) => `${n}× ${model}`).join(" + ");
  const heldCount = node.gpus.filter((g) => g.jobs.length).length;
  const islands = nvlinkIslands(node.gpus);
  const linked = islands.some((island) => island.length > 1);
  return h(
    "section",
    { class: "node", dataset: { node: node.name } },
    h(
      "h2",
      { class: "node-title" },
      h("span", { class: "node-name" }, node.name),
      h("span", { class: "muted" }, ` ${kinds} · ${node.cpus} CPUs · ${bytes(node.memory_bytes)} · ${heldCount}/${node.gpus.length} held · largest job that could start: ${nodeFree(node)}`),
    ),
    linked
      ? h(
          "div",
          { class: "islands" },
          islands.map((island) => {
            const cards = h("div", { class: "cards" }, island.map(card));
            const label = island.length > 1 ? `NVLink ${island.map((g) => g.index).join("·")}` : "no NVLink";
            return h("div", { class: "island" }, h("div", { class: "island-label" }, label), cards);
          }),
        )
      : // No NVLink at all: one grid of every GPU (one column per island would stack them).
        h("div", { class: "cards" }, islands.flat().map(card)),
  );
}

/** Groups of GPUs joined by NVLink (connected components of `nvlink_peers`), in index order. */
export function nvlinkIslands(gpuList) {
  const byIndex = new Map(gpuList.map((g) => [g.index, g]));
  const seen = new Set();
  const islands = [];
  for (const gpu of gpuList) {
    if (seen.has(gpu.index)) continue;
    const island = [];
    const stack = [gpu.index];
    seen.add(gpu.index);
    while (stack.length) {
      const index = stack.pop();
      island.push(byIndex.get(index));
      for (const peer of byIndex.get(index).nvlink_peers || []) {
        if (byIndex.has(peer) && !seen.has(peer)) {
          seen.add(peer);
          stack.push(peer);
        }
      }
    }
    islands.push(island.sort((a, b) => a.index - b.index));
  }
  return islands;
}

/** One GPU: utilization and memory bars, temperature and power, its holder(s); a drained
 * one (no new job starts on it) with a "drained" tag ("draining" while a job still runs
 * there to its end) whose title says why, by whom and since when. */
function card(gpu) {
  const usage = gpu.usage;
  const held = gpu.jobs.length > 0;
  const util = usage ? usage.utilization_pct : null;
  const total = (usage && usage.memory_total_bytes) || gpu.memory_bytes;
  const used = usage ? usage.memory_used_bytes : null;
  const foreign = Math.max((usage && usage.foreign_memory_bytes) || 0, gpu.unmanaged_memory_bytes || 0);
  const idle = held && util !== null && util < 5;
  const tags = [];
  if (usage && usage.simulated) tags.push(h("span", { class: "tag tag-sim", title: "made up from what the job declares" }, "simulated"));
  if (gpu.shared) tags.push(h("span", { class: "tag" }, "shared"));
  if (idle) tags.push(h("span", { class: "tag tag-idle", title: "held by a job but below 5% utilization" }, "idle"));
  if (gpu.drained) tags.push(drainTag(gpu.drained, held));
  const state = gpu.drained && !held ? "drained" : held ? "held" : "free";
  return h(
    "article",
    {
      class: `gpu-card ${state} ${idle ? "idle" : ""} ${gpu.drained ? "is-drained" : ""}`,
      dataset: { gpu: String(gpu.index), job: held ? String(gpu.jobs[0].id) : "", drained: gpu.drained ? "true" : "" },
    },
    h(
      "header",
      { class: "gpu-head" },
      h("span", { class: "gpu-index" }, `GPU ${gpu.index}`),
      h("span", { class: "gpu-model" }, gpu.model),
      h("span", { class: "tags" }, tags),
    ),
    h(
      "div",
      { class: "metric" },
      h("span", { class: `metric-figure ${utilClass(util, held)}` }, usage ? pct(util) : "–"),
      bar([{ share: (util || 0) / 100, class: utilClass(util, held), title: `utilization ${pct(util)}` }], { label: `utilization ${pct(util)}` }),
      h("span", { class: "metric-label" }, "util"),
    ),
    h(
      "div",
      { class: "metric" },
      h("span", { class: "metric-figure mem" }, used === null ? "–" : bytes(used)),
      bar(
        [
          { share: used === null ? 0 : Math.max(0, used - foreign) / total, class: "mem-job", title: "used by gpupool's jobs" },
          { share: foreign / total, class: "mem-foreign", title: `used outside gpupool: ${bytes(foreign)}` },
        ],
        { label: `memory ${bytes(used)} of ${bytes(total)}` },
      ),
      h("span", { class: "metric-label" }, `/ ${bytes(total)}`),
    ),
    h("div", { class: "gpu-facts muted" }, facts(usage, foreign)),
    h("footer", { class: "holders" }, held ? gpu.jobs.map(holder) : idleFooter(gpu.drained)),
  );
}

// Who drains a GPU for a GPU fault (core/gpu_health.py HEALTH_DRAINER): such a GPU "failed".
const HEALTH_DRAINER = "gpupool-health";

/** The tag of a drained GPU; the admin's reason (other users' text: an attribute, never
 * HTML), who and since when in its title. A GPU drained for a GPU fault is "failed". */
function drainTag(drain, held) {
  const why = drain.reason ? `: ${drain.reason}` : "";
  const title = `drained by ${drain.by} since ${fullTime(drain.since)}${why}${held ? " (the job there runs to its end)" : ""}`;
  const word = drain.by === HEALTH_DRAINER ? "failed" : held ? "draining" : "drained";
  return h("span", { class: "tag tag-drained", title }, word);
}

/** The footer of a GPU no job holds: "free", or that no job starts there and why. */
function idleFooter(drain) {
  if (!drain) return h("span", { class: "muted" }, "free");
  const word = drain.by === HEALTH_DRAINER ? "failed" : "drained";
  return h("span", { class: "drained-note" }, drain.reason ? `${word}: ${drain.reason}` : `${word}: no job starts here`);
}

function facts(usage, foreign) {
  if (!usage) return "not sampled";
  const parts = [];
  if (usage.temperature_c !== null) parts.push(`${Math.round(usage.temperature_c)}°C`);
  if (usage.power_w !== null) parts.push(`${Math.round(usage.power_w)} W`);
  const others = (usage.processes || []).filter((p) => p.job === null).length;
  if (others || foreign) parts.push(`foreign: ${others} process${others === 1 ? "" : "es"}, ${bytes(foreign)}`);
  return parts.join(" · ") || "\u00a0";
}

function holder(job) {
  const share = job.gpu_memory_bytes ? h("span", { class: "muted" }, ` ${bytes(job.gpu_memory_bytes)}`) : null;
  return h(
    "div",
    { class: "holder" },
    jobLink(job.id),
    " ",
    h("span", { class: "job-name" }, job.name),
    h("span", { class: "muted" }, " · "),
    h("span", { class: "user" }, job.user),
    share,
  );
}
