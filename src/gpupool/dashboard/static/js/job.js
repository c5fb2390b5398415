// The job page (#/jobs/ID): its record, its history (every state change and why, from
// GET v1/jobs/ID `events`), its GPUs' use while it runs, its CPU time and memory as its
// cgroup counted them (`cgroup_usage`: a running job's read at each refresh), and a live
// tail of its log.
// The daemon decides what the caller may see (core/access.py): for a job of someone else's
// the API leaves out the command, environment and working directory (`hidden`) and answers
// the log with 403; the page says so instead of failing. A job id the pool does not know
// (the API answers 404) gets a not-found page, and the job's page once it exists.

import { ApiError, getLog } from "./api.js";
import { taskLabel } from "./arrays.js";
import { bar, bytes, clock, duration, fullTime, h, link, notice, pct, relative, request, stateBadge, utilClass } from "./dom.js";
import { expectedStart, reason } from "./reasons.js";

const TAIL_BYTES = 256 * 1024; // where a tail starts: this far before the end
const SHOWN_CHARS = 512 * 1024; // the most output kept on the page
const CHUNK = 1 << 20; // the daemon's largest answer (service/log_reading.py MAX_LOG_CHUNK)
const END = Number.MAX_SAFE_INTEGER; // an offset past any end: the answer says the size
const ENDED = new Set(["SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT"]);
export const LOG_FORBIDDEN = "Only the owner or an admin can read this job's log.";

export const jobPage = {
  name: "jobs",
  title: "Job",
  mount(root, route) {
    const given = route.args[0] || "";
    const id = Number(given);
    if (!/^[0-9]+$/.test(given) || !Number.isSafeInteger(id) || id < 1) {
      root.replaceChildren(notFound(given, "a job id is a whole number, as gpupool queue shows it."));
      return { async refresh() {} };
    }
    let parts = null; // the job's page, built when the pool first answers with the job
    return {
      async refresh(tick) {
        let job;
        try {
          job = await tick.get(`v1/jobs/${id}`);
        } catch (error) {
          if (!(error instanceof ApiError && error.status === 404)) throw error;
          parts = null;
          root.replaceChildren(notFound(given, "the pool has no job with this id: no one submitted it yet."));
          return;
        }
        if (!parts) {
          parts = jobParts(id);
          root.replaceChildren(...parts.nodes);
        }
        const { head, record, history, tail } = parts;
        document.title = `#${id} ${job.name} · gpupool`;
        const task = job.array_id !== null && job.array_id !== undefined ? h("span", { class: "tag", title: "a task of an array job" }, `task ${taskLabel(job)}`) : null;
        head.replaceChildren(
          ...[
            h("h1", {}, h("span", { class: "muted" }, `#${id} `), job.name),
            stateBadge(job.state),
            task,
            h("span", { class: "muted" }, ` ${job.user} · ${job.project}`),
          ].filter(Boolean),
        );
        const pool = job.state === "RUNNING" ? await tick.get("v1/gpus") : null;
        record.replaceChildren(...recordOf(job, pool));
        history.replaceChildren(h("h2", { class: "panel-title" }, "History"), historyOf(job));
        await tail.refresh(job);
      },
    };
  },
};

/** The page's sections for job `id`: its head, record, history and log tail. */
function jobParts(id) {
  const head = h("header", { class: "job-head" });
  const record = h("section", { class: "panel record" });
  const history = h("section", { class: "panel history-panel" });
  const logBox = h("section", { class: "panel log-panel" });
  const nodes = [head, h("div", { class: "job-columns" }, h("div", {}, record, history), logBox)];
  return { head, record, history, tail: new LogTail(id, logBox), nodes };
}

/** The page for a job id that names no job (`why`: which way it does not). */
function notFound(given, why) {
  document.title = `No job ${given} · gpupool`;
  return h(
    "section",
    { class: "panel not-found" },
    h("h1", {}, `No job ${given}`),
    h("p", {}, `There is nothing to show: ${why}`),
    h("p", {}, link("#/queue", "The queue"), " lists the running and waiting jobs; ", h("code", {}, "gpupool queue -a"), " lists every job, ended ones too."),
  );
}

function field(label, ...value) {
  return [h("dt", {}, label), h("dd", {}, ...value)];
}

function recordOf(job, pool) {
  const now = Date.now() / 1000;
  const res = job.resources || {};
  const rows = [];
  if (job.state === "PENDING") {
    rows.push(field("waiting", reason(job)), field("expected start", expectedStart(job)));
  } else if (job.reason) {
    rows.push(field("reason", job.reason));
  }
  if (job.exit_code !== null) rows.push(field("exit code", String(job.exit_code)));
  rows.push(
    field("asks for", request(res, job.gpu_count), res.cpus ? ` · ${res.cpus} CPUs` : "", res.mem_bytes ? ` · ${bytes(res.mem_bytes)} memory` : ""),
    field("priority", `${job.priority_name} (${job.priority})`, job.preemptible ? " · preemptible" : " · not preemptible"),
  );
  if (job.backend) {
    // Handed to a backend (docs/backends.md): its own name for the run once it has one.
    const nodes = job.nodes > 1 ? ` · ${job.nodes} nodes` : "";
    const run = job.backend_ref ? h("code", { class: "backend-ref" }, job.backend_ref) : h("span", { class: "muted" }, "no run there yet");
    rows.push(field("backend", h("span", { class: "backend-name" }, job.backend), nodes, " · ", run));
  }
  if (job.node) {
    const where = job.gpus.length ? ` GPU${job.gpus.length === 1 ? "" : "s"} ${job.gpus.join(",")}` : " (no GPU)";
    rows.push(field("runs on", h("span", { class: "node-name" }, job.node), where));
  }
  rows.push(field("submitted", when(job.submit_time, now)));
  if (job.start_time) rows.push(field("started", when(job.start_time, now)));
  if (job.end_time) rows.push(field("ended", when(job.end_time, now)));
  if (job.start_time) rows.push(field(job.end_time ? "ran" : "running for", duration((job.end_time || now) - job.start_time)));
  rows.push(field("time limit", job.time_limit_s ? duration(job.time_limit_s) : "none", ` · grace ${duration(job.grace_s)}`));
  if (job.restart_count) rows.push(field("restarts", String(job.restart_count)));
  const counted = cpuMemory(job);
  if (counted) rows.push(field("CPU / memory", counted));
  if (job.hidden) {
    rows.push(field("command", h("span", { class: "muted" }, "hidden: only the owner, an admin of its project or a pool admin may see it")));
  } else {
    rows.push(field("command", h("code", { class: "command" }, job.command.map(quoteWord).join(" "))));
    rows.push(field("workdir", h("code", {}, job.workdir)));
    const names = Object.keys(job.env || {}).sort();
    if (names.length) {
      // Folded: values can be secrets, and a screen can be seen by others.
      const summary = `${names.length} variable${names.length === 1 ? "" : "s"} (shown to you only)`;
      const values = names.map((k) => `${k}=${job.env[k]}`).join("\n");
      rows.push(field("environment", h("details", {}, h("summary", {}, summary), h("pre", { class: "env" }, values))));
    }
  }
  const sections = [h("h2", { class: "panel-title" }, "Record"), h("dl", { class: "fields" }, rows)];
  const use = pool ? gpuUse(job, pool) : null;
  if (use) sections.push(use);
  return sections;
}

/** A job's CPU time and memory, the words `gpupool show` prints (cli/cpu_memory.py); null
 * when nothing counted them (a backend's job, a daemon without cgroups): no row then. */
function cpuMemory(job) {
  const u = job.cgroup_usage;
  if (!u) return null;
  const parts = [];
  if (u.cpu_seconds !== null && u.cpu_seconds !== undefined) {
    let cpu = cpuTime(u.cpu_seconds) + (u.live ? " so far" : "");
    const every = u.cpu_seconds_all_runs;
    if (every !== null && every !== undefined && every > u.cpu_seconds + 0.05) cpu += ` (${cpuTime(every)} over all its runs)`;
    parts.push(cpu);
  }
  const memory = [
    ["now", u.memory_current_bytes],
    ["peak", u.memory_peak_bytes],
    ["mean", u.memory_mean_bytes],
  ]
    .filter(([, value]) => value !== null && value !== undefined)
    .map(([what, value]) => `${what} ${bytes(value)}`);
  if (memory.length) parts.push(`memory ${memory.join(", ")}${u.memory_limit_bytes ? ` (limit ${bytes(u.memory_limit_bytes)})` : ""}`);
  if (!parts.length) return null;
  const text = parts.join("; ");
  return u.live || ENDED.has(job.state) ? text : `last run: ${text}`;
}

/** '1.2 CPU-s', '2.50 CPU-h' (from an hour on). */
function cpuTime(seconds) {
  return seconds >= 3600 ? `${(seconds / 3600).toFixed(2)} CPU-h` : `${seconds.toFixed(1)} CPU-s`;
}

function when(epoch, now) {
  return h("span", { title: fullTime(epoch) }, `${clock(epoch)} (${relative(epoch, now)})`);
}

/** A word of a command as a shell would need it typed. */
function quoteWord(word) {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

/** The latest sample of each GPU the running job holds. */
function gpuUse(job, pool) {
  const node = pool.nodes.find((n) => n.name === job.node);
  if (!node) return null;
  const held = node.gpus.filter((g) => job.gpus.includes(g.index));
  if (!held.length) return null;
  return h(
    "div",
    { class: "job-gpus" },
    h("h3", { class: "panel-subtitle" }, "Its GPUs now"),
    held.map((g) => {
      const u = g.usage;
      const util = u ? u.utilization_pct : null;
      return h(
        "div",
        { class: "job-gpu" },
        h("span", { class: "gpu-index" }, `GPU ${g.index}`),
        bar([{ share: (util || 0) / 100, class: utilClass(util) }], { label: `utilization ${pct(util)}` }),
        h("span", { class: `metric-figure ${utilClass(util)}` }, pct(util)),
        h("span", { class: "muted" }, u && u.memory_used_bytes !== null ? `${bytes(u.memory_used_bytes)} / ${bytes(g.memory_bytes)}` : ""),
        u && u.simulated ? h("span", { class: "tag tag-sim" }, "simulated") : null,
      );
    }),
  );
}

function historyOf(job) {
  const events = job.events || [];
  if (!events.length) return notice("No state change recorded yet.", "empty");
  return h(
    "ol",
    { class: "history" },
    events.map((e) =>
      h(
        "li",
        {},
        h("time", { title: fullTime(e.time) }, clock(e.time)),
        h("span", { class: "transition" }, e.from ? [stateBadge(e.from), " → "] : null, stateBadge(e.to)),
        h("span", { class: "cause" }, e.cause),
      ),
    ),
  );
}

/** The log's last part, kept up to date: each refresh reads what was written since. */
class LogTail {
  constructor(jobId, box) {
    this.jobId = jobId;
    this.offset = null; // the next byte to read; null until the tail's start is known
    this.decoder = new TextDecoder();
    this.skipToLine = false; // a tail that starts mid-file shows whole lines only
    this.done = false; // the job ended and everything was read, or reading is refused
    this.status = h("span", { class: "muted log-status" });
    this.pre = h("pre", { class: "log", tabindex: "0" });
    this.note = h("div", { class: "log-note", hidden: true });
    box.append(h("header", { class: "panel-head" }, h("h2", { class: "panel-title" }, "Log"), this.status), this.note, this.pre);
  }

  refuse(words) {
    this.done = true;
    this.pre.hidden = true;
    this.note.hidden = false;
    this.note.replaceChildren(notice(words, "forbidden"));
    this.status.textContent = "";
  }

  async refresh(job) {
    if (this.done) return;
    if (job.hidden) return this.refuse(LOG_FORBIDDEN);
    try {
      if (this.offset === null) await this.findStart();
      for (let reads = 0; reads < 4; reads += 1) {
        const chunk = await getLog(this.jobId, this.offset);
        this.show(chunk.bytes);
        this.offset = chunk.offset;
        if (chunk.bytes.length < CHUNK) {
          if (ENDED.has(chunk.state) && !chunk.bytes.length) this.done = true;
          break;
        }
      }
    } catch (error) {
      if (error.status === 403) return this.refuse(LOG_FORBIDDEN);
      throw error;
    }
    const following = this.done ? "the job has ended" : job.state === "PENDING" ? "waiting for the job to start" : "following";
    this.status.textContent = `${bytes(this.offset)} · ${following}`;
    if (!this.pre.textContent) this.pre.dataset.empty = "no output yet";
  }

  /** Start TAIL_BYTES before the end: a long log is not read whole. */
  async findStart() {
    const probe = await getLog(this.jobId, END);
    const size = probe.size ?? 0;
    this.offset = Math.max(0, size - TAIL_BYTES);
    if (this.offset > 0) {
      this.skipToLine = true;
      this.note.hidden = false;
      this.note.replaceChildren(notice(`The first ${bytes(this.offset)} are not shown: gpupool logs ${this.jobId} prints them all.`, "info"));
    }
  }

  show(data) {
    if (!data.length) return;
    let text = this.decoder.decode(data, { stream: true });
    if (this.skipToLine) {
      const newline = text.indexOf("\n");
      if (newline < 0) return;
      text = text.slice(newline + 1);
      this.skipToLine = false;
    }
    const atBottom = this.pre.scrollHeight - this.pre.scrollTop - this.pre.clientHeight < 40;
    delete this.pre.dataset.empty;
    this.pre.append(text);
    if (this.pre.textContent.length > SHOWN_CHARS) {
      this.pre.textContent = this.pre.textContent.slice(-SHOWN_CHARS);
    }
    if (atBottom) this.pre.scrollTop = this.pre.scrollHeight;
  }
}
