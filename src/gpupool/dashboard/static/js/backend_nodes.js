// The GPUs page's backends (Slurm, Ray, Kubernetes): a section per backend with its nodes as
// its engine last reported them (state, GPUs used by anyone of its total, how many the
// pool's jobs hold, those jobs as links), or why they are not known.
// Data: GET v1/gpus's `backends` (api/backend_wire.py); absent from an older daemon: none.

import { badge, bar, bytes, h, jobLink, notice, tableHead } from "./dom.js";

// A node's state as a badge colour: up like a running job, drained like a pending one.
const STATE_KIND = { up: "state-running", drained: "state-pending", down: "state-failed" };

/** One section per backend, in the answer's order (by name). */
export function backendSections(backends) {
  return (backends || []).map(backendSection);
}

function backendSection(backend) {
  const nodes = backend.nodes || [];
  const total = nodes.reduce((n, node) => n + node.gpus, 0);
  const used = nodes.reduce((n, node) => n + node.gpus_used, 0);
  const pool = nodes.reduce((n, node) => n + node.gpus_pool, 0);
  // Not known: no count of nodes or GPUs (0 would read as an empty cluster), only the reason.
  const count = backend.problem && !nodes.length ? "" : `${nodes.length} node${nodes.length === 1 ? "" : "s"}`;
  const figures = backend.problem ? "" : ` · ${used}/${total} GPUs used · ${pool} by the pool`;
  const quotas = Object.entries(backend.quotas || {}).map(([project, n]) => `${project} ${n}`);
  const mode = `admission: ${backend.admission}` + (quotas.length ? ` · quotas: ${quotas.join(", ")}` : "");
  return h(
    "section",
    { class: "node backend-nodes", dataset: { backend: backend.name } },
    h(
      "h2",
      { class: "node-title" },
      h("span", { class: "node-name" }, `backend ${backend.name}`),
      h("span", { class: "muted" }, ` ${count}${figures}${count ? " · " : ""}${mode}`),
    ),
    backend.problem ? notice(`Nodes not known: ${backend.problem}`, "error") : null,
    nodes.length
      ? h(
          "table",
          { class: "jobs" },
          tableHead([["Node"], ["State"], ["GPUs used", "num"], [""], ["By the pool", "num"], ["Model"], ["Pool's jobs"]]),
          h("tbody", {}, nodes.map(nodeRow)),
        )
      : backend.problem
        ? null
        : h("p", { class: "muted" }, "its engine reports no nodes"),
  );
}

function nodeRow(node) {
  const share = node.gpus ? node.gpus_used / node.gpus : 0;
  const pool = node.gpus ? node.gpus_pool / node.gpus : 0;
  const model = [node.gpu_model || "–", node.gpu_memory_bytes ? bytes(node.gpu_memory_bytes) : ""].join(" ").trim();
  return h(
    "tr",
    { class: "backend-node", dataset: { node: node.name, state: node.state } },
    h("td", { class: "node-name" }, node.name),
    h("td", { title: node.detail || null }, badge(node.state, STATE_KIND[node.state] || ""), node.detail ? h("span", { class: "muted" }, ` ${node.detail}`) : null),
    h("td", { class: "num" }, `${node.gpus_used}/${node.gpus}`),
    h(
      "td",
      {},
      bar(
        [
          { share: pool, class: "held", title: `the pool's jobs: ${node.gpus_pool}` },
          { share: Math.max(0, share - pool), class: "mem-foreign", title: `others: ${Math.max(0, node.gpus_used - node.gpus_pool)}` },
        ],
        { label: `${node.gpus_used} of ${node.gpus} GPUs used, ${node.gpus_pool} by the pool` },
      ),
    ),
    h("td", { class: "num" }, String(node.gpus_pool)),
    h("td", {}, model),
    h(
      "td",
      { class: "backend-jobs" },
      node.jobs.length
        ? node.jobs.flatMap((job, i) => [i ? ", " : null, jobLink(job.id), h("span", { class: "muted" }, ` ${job.gpus} GPU${job.gpus <= 1 ? "" : "s"}`)])
        : h("span", { class: "muted" }, "none"),
    ),
  );
}
