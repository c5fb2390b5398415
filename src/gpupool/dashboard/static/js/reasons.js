// Why a pending job waits, rendered from the structured reason the API gives (`wait`:
// code, rule, dimension, requested / free / capacity, node, reservation, jobs, project;
// api/wire.py), never by parsing the daemon's words (`why`, kept as the hover text).
// One short line per rule, with a small meter where the figures are a count of something.

import { bytes, clock, gpus, h, jobLink, relative } from "./dom.js";

/** The kind of a code, for its colour: waiting its turn, held by a quota, or never. */
const CODE_KIND = {
  Resources: "wait",
  Priority: "wait",
  BeginTime: "wait",
  Dependency: "wait",
  ArrayLimit: "wait",
  JobHeldUser: "wait",
  JobHeldAdmin: "quota",
  QueuedInBackend: "wait",
  NoBackend: "never",
  CapacityUnknown: "wait",
  Quota: "quota",
  Reclaim: "quota",
  Unsatisfiable: "never",
  Drained: "quota",
  QuotaNeverFits: "never",
};

/** A figure of a dimension in its unit: GPUs, bytes, CPUs. */
function amount(dimension, value) {
  if (value === null || value === undefined) return "–";
  if (dimension === "gpu_memory" || dimension === "memory") return bytes(value);
  return gpus(value);
}

const NOUN = {
  gpu_count: "GPUs",
  gpu_type: "GPUs of that type",
  gpu_memory: "GPU memory",
  cpus: "CPUs",
  memory: "memory",
  topology: "nodes",
  quota: "GPUs within quota",
  limit: "GPUs under the limit",
};

function jobs(ids) {
  const list = [...(ids || [])].sort((a, b) => a - b);
  const shown = list.slice(0, 3).map((id) => jobLink(id));
  const parts = [];
  shown.forEach((node, i) => parts.push(i ? ", " : "", node));
  if (list.length > 3) parts.push(` +${list.length - 3}`);
  return [list.length === 1 ? "job " : "jobs ", ...parts];
}

/** "needs 4 GPUs · 1 free on vm": a shortfall's figures (`wait.dimension` and friends). */
function shortfall(wait, where = true) {
  const d = wait.dimension;
  const at = where && wait.node ? ` on ${wait.node}` : "";
  if (d === "gpu_type") return `needs ${gpus(wait.requested)} GPUs of its type: none${at}`;
  const need = amount(d, wait.requested);
  const free = amount(d, wait.free);
  return `needs ${need} ${d === "gpu_memory" ? "on one GPU" : NOUN[d] || d} · ${free} free${at}`;
}

/** A meter of free against requested (and capacity), for count-like dimensions. */
function meter(wait) {
  const { requested, free, capacity } = wait;
  if (![requested, free, capacity].every((v) => typeof v === "number") || capacity <= 0) {
    return null;
  }
  const track = h("span", {
    class: "meter",
    title: `free ${amount(wait.dimension, free)} of ${amount(wait.dimension, capacity)}; needs ${amount(wait.dimension, requested)}`,
  });
  const freeFill = h("span", { class: "meter-free" });
  freeFill.style.width = `${Math.min(100, (free / capacity) * 100)}%`;
  const need = h("span", { class: "meter-need" });
  need.style.left = `${Math.min(100, (requested / capacity) * 100)}%`;
  track.append(freeFill, need);
  return track;
}

function reservationText(r) {
  if (!r) return null;
  if (r.nodes && r.nodes > 1) return `${r.gpus_total} GPUs reserved on ${r.nodes} nodes`;
  const what = r.gpus && r.gpus.length ? `GPU${r.gpus.length > 1 ? "s" : ""} ${r.gpus.join(",")}` : "room";
  const memory = r.gpu_memory_bytes ? `${bytes(r.gpu_memory_bytes)} of ` : "";
  return `reserved ${memory}${what} on ${r.node}`;
}

/** The parts of the line for one rule. */
function describe(job, wait) {
  const project = wait.project || job.project;
  const inUse = (w) => gpus(w.capacity - w.free);
  switch (wait.rule) {
    case "no_fit": {
      const reserved = reservationText(wait.reservation);
      return [shortfall(wait), reserved ? ` · ${reserved}` : ""];
    }
    case "wide_no_fit":
      return [`needs ${gpus(wait.requested)} GPUs over several nodes · ${gpus(wait.free)} free in the pool`];
    case "behind_reservation": {
      const holder = wait.reservation ? wait.reservation.job_id : null;
      return ["would delay ", holder ? jobLink(holder) : "a reservation", "'s reservation"];
    }
    case "behind_head":
      return ["behind ", ...jobs(wait.jobs.slice(0, 1)), ", first in line"];
    case "order_preemption":
      return ["preempting ", ...jobs(wait.jobs), " for it"];
    case "reclaim":
      return ["reclaiming GPUs from ", ...jobs(wait.jobs), ` for project ${project}`];
    case "begin_time":
      return [`held until ${clock(job.begin_time)}`];
    case "dependency":
      return ["after ", ...jobs(wait.jobs), " (--after)"];
    case "array_limit":
      return [`its array runs at most ${wait.limit} at once: `, ...jobs(wait.jobs), " running"];
    case "over_limit":
      return [`project ${project} at its limit: ${inUse(wait)} of ${gpus(wait.capacity)} GPUs in use`];
    case "not_preemptible":
      return [
        `project ${project} over quota: ${inUse(wait)} of ${gpus(wait.capacity)} in use; `,
        h("span", { class: "hint-inline" }, "borrowing needs --preemptible"),
      ];
    case "reclaiming":
      return [`project ${project}: GPUs reclaimed for `, ...jobs(wait.jobs.slice(0, 1))];
    case "never_limit":
      return [`asks ${gpus(wait.requested)} GPUs, over project ${project}'s limit of ${gpus(wait.capacity)}`];
    case "never_quota":
    case "never_quota_interactive":
      return [`not preemptible; asks ${gpus(wait.requested)} GPUs, project ${project}'s quota is ${gpus(wait.capacity)}`];
    case "held_user":
      return ["held by its owner until released (gpupool release)"];
    case "held_admin":
      return ["held by an admin until an admin releases it"];
    case "queued_in_backend":
      return [`in backend ${wait.backend}'s queue` + (wait.detail ? `: ${wait.detail}` : "")];
    case "no_backend":
      return [`backend ${wait.backend} is not configured in this daemon`];
    case "behind_gang":
      return [`behind job ${wait.jobs[0]}, a job over several nodes ahead in line`];
    case "gang_no_fit":
      return [`needs ${gpus(wait.requested)} GPUs free on each of ${wait.limit} nodes of backend ${wait.backend}; ${wait.free} have that now`];
    case "capacity_unknown":
      return [`backend ${wait.backend}'s GPUs could not be read` + (wait.detail ? `: ${wait.detail}` : "")];
    case "no_nodes":
      return ["the pool has no nodes"];
    case "bad_fraction":
      return [`a GPU fraction must be more than 0 and at most 1 (asks ${gpus(wait.requested)})`];
    case "user_gpus":
      return [
        `${wait.user} already holds ${gpus(wait.capacity - wait.free)} GPUs of ${wait.project}'s per-user cap of ${gpus(wait.capacity)}; it asks ${gpus(wait.requested)}`,
      ];
    case "user_jobs":
      return [`${wait.user} already runs ${wait.limit} jobs in ${wait.project}, its per-user cap`];
    case "never_user_gpus":
      return [`${wait.project} lets one user hold at most ${gpus(wait.capacity)} GPUs; it asks ${gpus(wait.requested)}`];
    case "drained":
      return [
        `only drained GPUs could run it: without them the most there is ${amount(wait.dimension, wait.capacity)} ` +
          `${NOUN[wait.dimension] || wait.dimension} (it needs ${amount(wait.dimension, wait.requested)}); it starts once an admin resumes them`,
      ];
    case "never_fits":
    case "never_fits_pool":
    case "never_fits_roomy":
      if (wait.dimension === "gpu_type") return ["no GPU of its type in this pool"];
      return [
        `needs ${amount(wait.dimension, wait.requested)} ${NOUN[wait.dimension] || wait.dimension}; ` +
          `the most there is ${amount(wait.dimension, wait.capacity)}`,
      ];
    default:
      // A rule this page does not know yet (a newer daemon): the code and its figures.
      return [wait.dimension ? shortfall(wait) : wait.rule || ""];
  }
}

/** The reason cell of a pending job: code chip, line, meter; hover shows the daemon's words. */
export function reason(job) {
  const wait = job.wait;
  if (!wait) {
    // The last pass left no figures for it (it did not look at it): its code alone, as
    // `gpupool queue` shows it.
    if (!job.reason) return h("span", { class: "reason muted" }, "waiting for the next scheduling pass");
    return h("span", { class: `reason reason-${CODE_KIND[job.reason] || "wait"}`, title: job.why || null }, h("span", { class: "code" }, job.reason));
  }
  const kind = CODE_KIND[wait.code] || "wait";
  const counted = ["gpu_count", "cpus", "quota", "limit"].includes(wait.dimension);
  return h(
    "span",
    { class: `reason reason-${kind}`, title: job.why || null },
    h("span", { class: "code" }, wait.code),
    h("span", { class: "words" }, describe(job, wait)),
    counted && wait.rule === "no_fit" ? meter(wait) : null,
  );
}

/** When a pending job is expected to start, from the API's estimate (null: none given). */
export function expectedStart(job) {
  if (job.estimated_start === null || job.estimated_start === undefined) {
    return h("span", { class: "muted" }, "–");
  }
  return h(
    "span",
    { title: new Date(job.estimated_start * 1000).toLocaleString() },
    relative(job.estimated_start),
  );
}
