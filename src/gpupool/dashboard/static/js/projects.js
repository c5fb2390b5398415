// The projects page: each project's GPUs in use against its quota (guaranteed) and limit
// (at most), what it borrows above its quota, and what its pending jobs ask for.
// Data: GET v1/projects (quota, limit, in_use_gpus, pending_gpus, jobs) and GET v1/gpus
// (the pool's size: every bar is drawn on the same scale, the whole pool).

import { allGpus } from "./gpus.js";
import { duration, gpus, h, link, notice } from "./dom.js";

export const projectsPage = {
  name: "projects",
  title: "Projects",
  mount(root, route) {
    const body = h("section", { class: "panel" });
    const departments = h("section", { class: "panel", hidden: true });
    root.append(body, departments);
    return {
      async refresh(tick) {
        const [found, pool] = await Promise.all([tick.get("v1/projects"), tick.get("v1/gpus")]);
        const poolGpus = allGpus(pool).length;
        const scale = Math.max(1, poolGpus, ...found.projects.map((p) => Math.max(p.quota, p.in_use_gpus)));
        body.replaceChildren(
          h("header", { class: "panel-head" }, h("h2", { class: "panel-title" }, "Projects"), legend()),
          found.projects.length
            ? h("div", { class: "projects" }, found.projects.map((p) => projectRow(p, scale, poolGpus)))
            : notice("No projects.", "empty"),
        );
        departments.hidden = !found.departments.length;
        departments.replaceChildren(
          h("h2", { class: "panel-title" }, "Departments"),
          h("table", { class: "jobs" }, h("tbody", {}, found.departments.map(departmentRow))),
        );
      },
    };
  },
};

function departmentRow(d) {
  const quota = d.quota === null ? "no quota" : `quota ${gpus(d.quota)}`;
  return h("tr", {}, h("td", {}, d.name), h("td", { class: "num" }, quota));
}

function legend() {
  return h(
    "div",
    { class: "legend" },
    h("span", { class: "key key-used" }, "in use within quota"),
    h("span", { class: "key key-borrowed" }, "borrowed above quota"),
    h("span", { class: "key key-pending" }, "asked for by pending jobs"),
    h("span", { class: "key key-quota" }, "quota"),
    h("span", { class: "key key-limit" }, "limit"),
  );
}

function projectRow(p, scale, poolGpus) {
  const used = p.in_use_gpus;
  const within = Math.min(used, p.quota);
  const borrowed = Math.max(0, used - p.quota);
  const track = h("div", { class: "quota-track", role: "img", "aria-label": `${p.name}: ${gpus(used)} GPUs in use, quota ${gpus(p.quota)}` });
  const segment = (value, cls, title, at = 0) => {
    if (value <= 0) return;
    const el = h("span", { class: `seg ${cls}`, title });
    el.style.left = `${Math.min(100, (at / scale) * 100)}%`;
    el.style.width = `${Math.min(100 - (at / scale) * 100, (value / scale) * 100)}%`;
    track.append(el);
  };
  segment(within, "seg-used", `${gpus(within)} GPUs in use within quota`);
  segment(borrowed, "seg-borrowed", `${gpus(borrowed)} GPUs borrowed above quota (preemptible)`, within);
  segment(p.pending_gpus, "seg-pending", `${gpus(p.pending_gpus)} GPUs asked for by ${p.pending_jobs} pending jobs`, used);
  const marker = (value, cls, title) => {
    if (value === null || value === undefined || value <= 0) return;
    const el = h("span", { class: `marker ${cls}`, title });
    el.style.left = `${Math.min(100, (value / scale) * 100)}%`;
    track.append(el);
  };
  marker(p.quota, "marker-quota", `quota ${gpus(p.quota)}`);
  marker(p.limit, "marker-limit", `limit ${gpus(p.limit)}`);

  const figures = [
    fig("in use", gpus(used)),
    fig("quota", gpus(p.quota)),
    fig("limit", p.limit === null ? "none" : gpus(p.limit)),
    fig("borrowed", gpus(borrowed), borrowed > 0 ? "borrowed" : ""),
    fig("pending", `${gpus(p.pending_gpus)} GPUs · ${p.pending_jobs} job${p.pending_jobs === 1 ? "" : "s"}`),
    fig("running", String(p.running_jobs)),
  ];
  const members = p.open ? "open to everyone" : `members: ${p.members.join(", ")}`;
  const extras = [
    `weight ${p.weight}`,
    p.department ? `department ${p.department}` : null,
    p.default_time_limit_s ? `default time limit ${duration(p.default_time_limit_s)}` : null,
    members,
  ].filter(Boolean);
  return h(
    "div",
    { class: "project", dataset: { project: p.name } },
    h(
      "div",
      { class: "project-head" },
      h("span", { class: "project-name" }, p.name),
      link(`#/queue?project=${encodeURIComponent(p.name)}`, "its jobs →"),
      h("span", { class: "muted project-extras" }, extras.join(" · ")),
    ),
    track,
    h("div", { class: "scale muted" }, h("span", {}, "0"), h("span", {}, `${gpus(scale)} GPUs${scale === poolGpus ? " (the pool)" : ""}`)),
    h("div", { class: "figures" }, figures),
  );
}

function fig(label, value, kind = "") {
  return h("span", { class: `fig ${kind}` }, h("span", { class: "fig-label" }, label), h("span", { class: "fig-value" }, value));
}
