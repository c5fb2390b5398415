// The usage page: who used the pool's GPUs, and how well, over a period.
// Data: GET v1/usage?by=user|project|gpu-type&since=30d, the shape docs/dashboard.md
// defines ({by, since, until, simulated, rows: [{group, jobs, allocated_gpu_hours,
// used_gpu_hours, sampled_gpu_hours, efficiency (0-1 or null), mean_wait_s,
// preempted_gpu_hours, idle_reclaimed_gpu_hours, energy_kwh, cpu_hours (null: not counted;
// absent from an older daemon)}], total}, api/usage.py).
// A daemon without accounting answers 404: the page says so.
// Accounting reads a month of samples: it is asked for every 30 s, not every refresh.
// Route: #/usage?by=project&since=7d

import { query } from "./api.js";
import { bar, duration, h, notice, pct, tableHead, utilClass } from "./dom.js";

const GROUPINGS = [
  ["user", "by user"],
  ["project", "by project"],
  ["gpu-type", "by GPU type"],
];
const PERIODS = ["1d", "7d", "30d", "90d", "365d"];
const REFETCH_MS = 30_000;

export const usagePage = {
  name: "usage",
  title: "Usage",
  mount(root, route) {
    const by = GROUPINGS.some(([key]) => key === route.params.get("by")) ? route.params.get("by") : "user";
    const since = PERIODS.includes(route.params.get("since")) ? route.params.get("since") : "30d";
    const href = (changes) => `#/usage${query({ by, since, ...changes })}`;
    const toolbar = h(
      "div",
      { class: "toolbar" },
      GROUPINGS.map(([key, label]) => h("a", { href: href({ by: key }), class: `chip ${key === by ? "active" : ""}` }, label)),
      h("span", { class: "toolbar-gap" }),
      PERIODS.map((p) => h("a", { href: href({ since: p }), class: `chip ${p === since ? "active" : ""}` }, `last ${p}`)),
    );
    const body = h("section", { class: "panel" });
    root.append(toolbar, body);
    let fetchedAt = 0;
    return {
      async refresh(tick) {
        if (Date.now() - fetchedAt < REFETCH_MS) return;
        fetchedAt = Date.now();
        let found;
        try {
          found = await tick.get(`v1/usage${query({ by, since })}`);
        } catch (error) {
          if (error.status !== 404) throw error;
          body.replaceChildren(notice("Accounting is not available on this daemon (GET /v1/usage answers 404).", "empty"));
          return;
        }
        body.replaceChildren(usageTable(found, by));
      },
    };
  },
};

function num(value, digits = 1) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
}

/** Efficiency as a percentage (the API gives used over sampled as 0-1), null when unknown. */
function effPct(r) {
  return r.efficiency === null || r.efficiency === undefined ? null : r.efficiency * 100;
}

function usageTable(found, by) {
  const rows = found.rows || [];
  if (!rows.length) return notice("No job ran in this period.", "empty");
  const most = Math.max(1e-9, ...rows.map((r) => r.allocated_gpu_hours || 0));
  const heading = GROUPINGS.find(([key]) => key === by)[1].replace("by ", "");
  return h(
    "div",
    {},
    found.simulated
      ? h("div", { class: "simulated-note" }, h("strong", {}, "Simulated use. "), "GPU-hours used come from what jobs declared, not from GPUs.")
      : null,
    h(
      "table",
      { class: "jobs usage" },
      tableHead([
        [heading],
        ["Jobs", "num"],
        ["GPU-hours used of allocated"],
        ["used / allocated", "num"],
        ["CPU-hours", "num"],
        ["Efficiency", "num"],
        ["Mean wait", "num"],
        ["GPU-h lost to preemption", "num"],
        ["Idle GPU-h reclaimed", "num"],
      ]),
      h(
        "tbody",
        {},
        rows.map((r) =>
          h(
            "tr",
            {},
            h("td", { class: "user" }, r.group),
            h("td", { class: "num" }, String(r.jobs ?? "–")),
            h(
              "td",
              { class: "usage-bar" },
              bar(
                [
                  { share: (r.used_gpu_hours || 0) / most, class: utilClass(effPct(r)), title: `used ${num(r.used_gpu_hours)} GPU-hours` },
                  { share: Math.max(0, (r.allocated_gpu_hours || 0) - (r.used_gpu_hours || 0)) / most, class: "alloc-unused", title: "allocated but not used" },
                ],
                { label: `${num(r.allocated_gpu_hours)} GPU-hours allocated` },
              ),
            ),
            h("td", { class: "num" }, `${num(r.used_gpu_hours)} / ${num(r.allocated_gpu_hours)}`),
            h("td", { class: "num" }, num(r.cpu_hours)),
            h("td", { class: `num ${utilClass(effPct(r))}` }, pct(effPct(r))),
            h("td", { class: "num" }, duration(r.mean_wait_s)),
            h("td", { class: "num" }, num(r.preempted_gpu_hours)),
            h("td", { class: "num" }, num(r.idle_reclaimed_gpu_hours)),
          ),
        ),
      ),
    ),
  );
}
