// The dashboard's shell: hash routes to pages, a refresh every PERIOD_MS while the tab is
// visible, who the pool takes the viewer to be, the token form, the theme.
//
// A page is {name, title, mount(root, route, ctx) -> view}; `view.refresh(tick)` reads what
// it shows through `tick.get(path)` (one request per path per refresh, shared by the page
// and the top bar) and redraws. A refresh starts only when the last one ended, and stops
// while the tab is hidden. When a page's first data is on screen, the page marks it
// (`performance.mark("gpupool:<page>")`, body[data-ready]) for the tests and
// bench/dashboard_paint.py.

import { ApiError, Unreachable, getJson, saveToken, savedToken } from "./api.js";
import { h } from "./dom.js";
import { QUEUE_COUNTS, allGpus, gpusPage } from "./gpus.js";
import { jobPage } from "./job.js";
import { projectsPage } from "./projects.js";
import { queuePage } from "./queue.js";
import { usagePage } from "./usage.js";

const PERIOD_MS = 1000; // a job submitted shows within about a second
const PAGES = Object.fromEntries([gpusPage, queuePage, projectsPage, usagePage, jobPage].map((p) => [p.name, p]));
const THEME_KEY = "gpupool.theme";

/** The requests of one refresh: each path asked once, its answer shared. */
class Tick {
  constructor(signal) {
    this.signal = signal;
    this.answers = new Map();
  }

  get(path) {
    if (!this.answers.has(path)) this.answers.set(path, getJson(path, this.signal));
    return this.answers.get(path);
  }

  /** Answer `alias` with `path`'s answer (one request where a page's answer holds what
   *  another reader asks for, e.g. the queue's first page holds the queue's counts). */
  share(path, alias) {
    this.answers.set(alias, this.get(path));
  }
}

const shell = {
  main: document.getElementById("page"),
  live: document.getElementById("live"),
  summary: document.getElementById("summary"),
  identity: document.getElementById("identity"),
  banner: document.getElementById("banner"),
  tokenPanel: document.getElementById("token-panel"),
  tokenWhy: document.getElementById("token-why"),
  tokenInput: document.getElementById("token-input"),
};

let current = null; // {route, view, controller, busy, marked}
let timer = null;
let whoami = null; // GET v1/whoami: {user, via, pool_admin, mode}

function parseRoute() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, search] = hash.split("?");
  const parts = path.split("/").filter(Boolean);
  const name = PAGES[parts[0]] ? parts[0] : "gpus";
  return { name, args: parts.slice(1), params: new URLSearchParams(search || "") };
}

function navigate() {
  if (current && current.controller) current.controller.abort();
  clearTimeout(timer);
  const route = parseRoute();
  const page = PAGES[route.name];
  document.title = `${page.title} · gpupool`;
  for (const tab of document.querySelectorAll(".tabs a")) {
    if (tab.dataset.page === route.name) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  const root = h("div", { class: `page page-${route.name}` });
  shell.main.replaceChildren(root);
  delete document.body.dataset.ready;
  const ctx = { whoami: () => whoami };
  current = { route, view: page.mount(root, route, ctx), controller: null, busy: false, marked: false };
  refresh();
}

async function refresh() {
  clearTimeout(timer);
  if (document.hidden) {
    setLive("paused", "paused while this tab is hidden");
    return;
  }
  const mine = current;
  if (mine.busy) return; // the refresh under way schedules the next one
  mine.busy = true;
  const controller = new AbortController();
  mine.controller = controller;
  const tick = new Tick(controller.signal);
  try {
    if (!whoami) whoami = await tick.get("v1/whoami");
    showIdentity();
    await Promise.all([mine.view.refresh(tick), summarize(tick)]);
    if (!mine.marked) {
      mine.marked = true;
      performance.mark(`gpupool:${mine.route.name}`);
      document.body.dataset.ready = mine.route.name;
    }
    shell.banner.hidden = true;
    shell.main.hidden = false;
    setLive("live", `refreshed ${new Date().toLocaleTimeString()}; every ${PERIOD_MS / 1000} s while this tab is visible`);
  } catch (error) {
    if (error.name === "AbortError" || mine !== current) return;
    trouble(error);
  } finally {
    mine.busy = false;
    // Signed out: nothing to refresh until a token is given (the form refreshes then).
    if (mine === current && !controller.signal.aborted && shell.main.hidden === false) {
      timer = setTimeout(refresh, PERIOD_MS);
    }
  }
}

function trouble(error) {
  if (error instanceof ApiError && error.status === 401) {
    whoami = null;
    showIdentity();
    const why = savedToken()
      ? `The pool refused this token: ${error.message}`
      : "This pool needs an API token from this browser (it is not on the pool's machine, or the daemon asks every TCP client for one).";
    askForToken(why);
    shell.main.hidden = true; // nothing to show until the pool knows who is asking
    setLive("signed out", "the pool answered 401: it needs an API token from this browser");
    return;
  }
  const words = error instanceof Unreachable ? `${error.message}; retrying every ${PERIOD_MS / 1000} s.` : error.message;
  shell.banner.replaceChildren(words);
  shell.banner.hidden = false;
  setLive("error", words);
}

function setLive(state, title) {
  shell.live.textContent = state;
  shell.live.dataset.state = state;
  shell.live.title = title;
}

/** The top bar's figures: GPUs held, their mean use, jobs running and waiting. */
async function summarize(tick) {
  const [pool, queue] = await Promise.all([tick.get("v1/gpus"), tick.get(QUEUE_COUNTS)]);
  const all = allGpus(pool);
  const held = all.filter(({ gpu }) => gpu.jobs.length);
  const utils = held.map(({ gpu }) => gpu.usage && gpu.usage.utilization_pct).filter((u) => typeof u === "number");
  const mean = utils.length ? `${Math.round(utils.reduce((a, b) => a + b, 0) / utils.length)}%` : "–";
  const counts = queue.counts || {};
  shell.summary.replaceChildren(
    chip(`${held.length}/${all.length}`, "GPUs held"),
    chip(mean, "mean util of held"),
    chip((counts.RUNNING || 0).toLocaleString(), "running"),
    chip((counts.PENDING || 0).toLocaleString(), "pending"),
  );
}

function chip(figure, label) {
  return h("span", { class: "sum" }, h("b", {}, figure), ` ${label}`);
}

const VIA_WORDS = { loopback: "this machine", unix: "Unix socket", token: "API token" };

function showIdentity() {
  if (!whoami) {
    shell.identity.textContent = "not signed in";
    shell.identity.title = "the pool does not know who you are: use an API token";
    return;
  }
  shell.identity.replaceChildren(h("b", {}, whoami.user), h("span", { class: "muted via" }, ` · ${VIA_WORDS[whoami.via.split(" ")[0]] || whoami.via}`));
  shell.identity.title = `the pool takes you to be ${whoami.user} (${whoami.via})${whoami.pool_admin ? ", a pool admin" : ""}; ${whoami.mode} mode`;
}

function askForToken(why) {
  shell.tokenWhy.textContent = why;
  shell.tokenPanel.hidden = false;
}

function setUpTokenForm() {
  shell.identity.addEventListener("click", () => {
    shell.tokenWhy.textContent = whoami
      ? `You are ${whoami.user} (${whoami.via}). A token makes this tab act as its user instead.`
      : "Paste an API token to act as its user.";
    shell.tokenPanel.hidden = !shell.tokenPanel.hidden;
  });
  const restart = () => {
    whoami = null;
    shell.tokenPanel.hidden = true;
    shell.main.hidden = false;
    refresh();
  };
  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    saveToken(shell.tokenInput.value);
    shell.tokenInput.value = "";
    restart();
  });
  document.getElementById("token-forget").addEventListener("click", () => {
    saveToken("");
    restart();
  });
}

function setUpTheme() {
  const apply = (theme) => {
    if (theme) document.documentElement.dataset.theme = theme;
    else delete document.documentElement.dataset.theme;
  };
  apply(localStorage.getItem(THEME_KEY));
  document.getElementById("theme").addEventListener("click", () => {
    const dark = matchMedia("(prefers-color-scheme: dark)").matches;
    const now = document.documentElement.dataset.theme || (dark ? "dark" : "light");
    const next = now === "dark" ? "light" : "dark";
    localStorage.setItem(THEME_KEY, next);
    apply(next);
    if (current && current.view.resized) current.view.resized();
  });
}

setUpTheme();
setUpTokenForm();
window.addEventListener("hashchange", navigate);
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) refresh();
  else setLive("paused", "paused while this tab is hidden");
});
let resizeTimer = null;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => current && current.view.resized && current.view.resized(), 150);
});
navigate();
