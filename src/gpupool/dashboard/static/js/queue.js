// The queue page: running jobs, then pending ones in the order the last scheduling pass
// ranked them (GET v1/jobs?order=queue), a page of PAGE_SIZE at a time: a queue of 10,000
// jobs is never loaded whole. Each pending job shows why it waits (reasons.js, from the
// structured reason) and when it is expected to start, where the API gives an estimate.
// Array tasks are named and folded as `gpupool queue` does (arrays.js).
// Route: #/queue?state=running|pending&mine=1&project=NAME&page=N

import { query } from "./api.js";
import { queueRows } from "./arrays.js";
import { QUEUE_COUNTS } from "./gpus.js";
import { duration, fullTime, h, jobLink, link, notice, request, stateBadge, tableHead } from "./dom.js";
import { expectedStart, reason } from "./reasons.js";

export const PAGE_SIZE = 50;

const FILTERS = [
  { key: "", label: "Active", states: null },
  { key: "running", label: "Running", states: "RUNNING" },
  { key: "pending", label: "Pending", states: "PENDING" },
];

export const queuePage = {
  name: "queue",
  title: "Queue",
  mount(root, route, ctx) {
    const params = route.params;
    const filter = FILTERS.find((f) => f.key === (params.get("state") || "")) || FILTERS[0];
    const mine = params.get("mine") === "1";
    const project = params.get("project") || null;
    const page = Math.max(1, Number.parseInt(params.get("page") || "1", 10) || 1);
    const filters = h("div", { class: "toolbar" });
    const pagerTop = h("div", { class: "pager" });
    const table = h("div", { class: "table-wrap" });
    const pagerBottom = h("div", { class: "pager" });
    root.append(h("div", { class: "toolbar-row" }, filters, pagerTop), table, pagerBottom);

    const href = (changes) => {
      const next = { state: filter.key, mine: mine ? "1" : "", project, page: page > 1 ? page : "", ...changes };
      return `#/queue${query(next)}`;
    };
    return {
      async refresh(tick) {
        const me = ctx.whoami();
        const path = `v1/jobs${query({
          order: "queue",
          limit: PAGE_SIZE,
          offset: (page - 1) * PAGE_SIZE,
          state: filter.states,
          user: mine && me ? me.user : null,
          project,
        })}`;
        // Unfiltered, the page's own counts are the queue's: no second request for them.
        if (!filter.states && !mine && !project) tick.share(path, QUEUE_COUNTS);
        const [found, all] = await Promise.all([tick.get(path), tick.get(QUEUE_COUNTS)]);
        const projectChip = project
          ? h("a", { href: href({ project: "", page: "" }), class: "chip active", title: "show every project" }, `project ${project} ✕`)
          : null;
        filters.replaceChildren(...[...tabs(filter, all.counts || {}, href), mineToggle(mine, me, href), projectChip].filter(Boolean));
        pagerTop.replaceChildren(...pagerOf(found, page, href));
        pagerBottom.replaceChildren(...pagerOf(found, page, href));
        if (found.jobs.length) table.replaceChildren(jobTable(found.jobs, found.offset));
        else if (found.total) table.replaceChildren(notice(h("span", {}, "Nothing on this page: ", link(href({ page: "" }), "the first page")), "empty"));
        else table.replaceChildren(notice(emptyWords(filter, mine), "empty"));
      },
    };
  },
};

function tabs(current, counts, href) {
  return FILTERS.map((f) => {
    const n = f.states ? counts[f.states] || 0 : (counts.RUNNING || 0) + (counts.PENDING || 0);
    return tabLink(href({ state: f.key, page: "" }), f, n, f === current);
  });
}

function tabLink(target, f, n, active) {
  return h("a", { href: target, class: `chip ${active ? "active" : ""}` }, f.label, h("span", { class: "count" }, n.toLocaleString()));
}

function mineToggle(mine, me, href) {
  if (!me) return null;
  const target = href({ mine: mine ? "" : "1", page: "" });
  const title = `only ${me.user}'s jobs`;
  return h("a", { href: target, class: `chip ${mine ? "active" : ""}`, title }, mine ? "✓ only mine" : "only mine");
}

function emptyWords(filter, mine) {
  const whose = mine ? "of yours " : "";
  if (filter.key === "running") return `No job ${whose}is running.`;
  if (filter.key === "pending") return `No job ${whose}is waiting.`;
  return `The queue is empty${mine ? " of your jobs" : ""}: submit with gpupool submit --gpus 1 -- python train.py`;
}

function pagerOf(found, page, href) {
  const total = found.total;
  const first = total ? found.offset + 1 : 0;
  const last = found.offset + found.jobs.length;
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
  return [
    h("span", { class: "muted" }, `${first.toLocaleString()}–${last.toLocaleString()} of ${total.toLocaleString()}`),
    page > 1 ? link(href({ page: page - 1 }), "‹ previous") : h("span", { class: "disabled" }, "‹ previous"),
    h("span", { class: "muted" }, `page ${page} of ${pages.toLocaleString()}`),
    page < pages ? link(href({ page: page + 1 }), "next ›") : h("span", { class: "disabled" }, "next ›"),
  ];
}

function jobTable(jobs, offset) {
  const now = Date.now() / 1000;
  return h(
    "table",
    { class: "jobs" },
    tableHead([["#", "num"], ["ID", "num"], ["State"], ["Name"], ["User"], ["Project"], ["GPUs", "num"], ["Where / why waiting"], ["Time"]]),
    h("tbody", {}, queueRows(jobs).map((r) => row(r, offset + r.position + 1, now))),
  );
}

/** One row: a job, or an array's pending tasks folded (`tasks`, the first is `job`). */
function row({ label, job, tasks }, position, now) {
  const running = job.state === "RUNNING";
  const folded = tasks.length > 1 ? h("span", { class: "tag", title: `tasks ${tasks.map((t) => t.id).join(", ")}` }, `${tasks.length} tasks`) : null;
  return h(
    "tr",
    { class: `job-row row-${job.state.toLowerCase()}`, dataset: { job: String(job.id) } },
    h("td", { class: "num muted" }, String(position)),
    h("td", { class: "num id" }, jobLink(job.id, label)),
    h("td", {}, stateBadge(job.state), folded ? " " : null, folded),
    h("td", { class: "name", title: job.name }, job.name),
    h("td", { class: "user" }, job.user),
    h("td", {}, job.project),
    h("td", { class: "num" }, request(job.resources, job.gpu_count)),
    h("td", { class: "where" }, running ? placement(job) : reason(job)),
    h("td", { class: "time" }, running ? runTime(job, now) : waitTime(job, now)),
  );
}

function placement(job) {
  const gpuList = job.gpus.length ? ` GPU${job.gpus.length > 1 ? "s" : ""} ${job.gpus.join(",")}` : "";
  return h("span", {}, h("span", { class: "node-name" }, job.node || "?"), gpuList, job.cancel_requested ? h("span", { class: "tag" }, "stopping") : null);
}

/** How long it has run, and a thin bar of its time limit used. */
function runTime(job, now) {
  const ran = job.start_time ? now - job.start_time : null;
  const limit = job.time_limit_s;
  const track = h("span", { class: "limit-track", title: limit ? `time limit ${duration(limit)}` : "no time limit" });
  if (limit && ran !== null) {
    const fill = h("span", { class: "limit-fill" });
    fill.style.width = `${Math.min(100, (ran / limit) * 100)}%`;
    track.append(fill);
  }
  return h("span", { title: fullTime(job.start_time) }, `ran ${duration(ran)}`, limit ? track : null);
}

function waitTime(job, now) {
  return h(
    "span",
    { class: "wait-time" },
    h("span", { title: `submitted ${fullTime(job.submit_time)}` }, `queued ${duration(now - job.submit_time)}`),
    job.estimated_start !== null && job.estimated_start !== undefined ? h("span", { class: "eta" }, " · starts ", expectedStart(job)) : null,
  );
}
