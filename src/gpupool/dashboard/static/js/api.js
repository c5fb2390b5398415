// The dashboard's one door to the daemon: GET requests to its /v1 API.
//
// Paths are relative to the page ("v1/gpus"), so the page works behind a proxy that serves
// the daemon under a prefix. Identity (docs/dashboard.md): from a browser on the pool's
// machine the daemon knows the caller by its socket's owner and no token is sent; from
// elsewhere the user pastes an API token, kept in this tab's sessionStorage and sent as
// `Authorization: Bearer`. Never a cookie: no request is ever authorized by ambient state,
// so there is nothing for another site to forge.

const TOKEN_KEY = "gpupool.token";

/** An answer other than 2xx: its HTTP status, the API's error code and message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || "";
  }
}

/** The daemon could not be reached at all (stopped, restarting, network). */
export class Unreachable extends Error {}

export function savedToken() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function saveToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token.trim());
  else sessionStorage.removeItem(TOKEN_KEY);
}

function requestInit(signal) {
  const token = savedToken();
  return {
    headers: token ? { Authorization: `Bearer ${token}` } : {},
    cache: "no-store",
    credentials: "omit",
    signal,
  };
}

async function send(path, signal) {
  let answer;
  try {
    answer = await fetch(path, requestInit(signal));
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new Unreachable(`the pool's daemon does not answer (${error.message})`);
  }
  if (!answer.ok) throw await errorOf(answer);
  return answer;
}

async function errorOf(answer) {
  let body = {};
  try {
    body = await answer.json();
  } catch {
    // not JSON: a proxy's page, or a route this daemon does not have
  }
  return new ApiError(answer.status, body.error, body.message || body.detail);
}

/** The JSON answer of GET `path` (e.g. "v1/gpus"). */
export async function getJson(path, signal) {
  const answer = await send(path, signal);
  return answer.json();
}

/** A piece of a job's log from byte `offset`: {bytes, offset (of the next read), size (of
 *  the whole log, null if the daemon does not say), state (the job's)}. */
export async function getLog(jobId, offset, signal) {
  const answer = await send(`v1/jobs/${jobId}/log?offset=${offset}`, signal);
  const bytes = new Uint8Array(await answer.arrayBuffer());
  const size = answer.headers.get("X-Size");
  return {
    bytes,
    offset: Number(answer.headers.get("X-Offset") ?? offset + bytes.length),
    size: size === null ? null : Number(size),
    state: answer.headers.get("X-State") || "",
  };
}

/** A query string from an object, leaving out null/undefined/"" values. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}
