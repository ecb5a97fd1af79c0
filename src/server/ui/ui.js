// tenk's web page: reads the API with the session cookie (POST /v1/login
// sets it) and draws the cluster, its jobs and queues, and one job with
// its attempts, training metrics and checkpoints. Nothing is fetched from
// anywhere but this server; text goes into the page as text, never HTML.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...kids) {
  const e = tag.startsWith("svg:")
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

async function api(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  if (r.status === 401) throw new Error("login");
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

// dates as the CLI writes them: 2026-12-03 22:40:01, local time
function when(ms) {
  if (!ms) return "-";
  const d = new Date(ms), p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// 1146 -> "1,146"
function count(n) {
  return Number(n).toLocaleString("en-US");
}

// "#jobs&state=ended&user=bob": the page's name and its arguments
function route() {
  const [page, ...args] = location.hash.slice(1).split("&");
  const q = {};
  for (const a of args) {
    const i = a.indexOf("=");
    if (i > 0) q[a.slice(0, i)] = decodeURIComponent(a.slice(i + 1));
  }
  return { page, q };
}

function hashOf(page, q) {
  const args = Object.entries(q).filter(([, v]) => v !== undefined && v !== "")
    .map(([k, v]) => `${k}=${encodeURIComponent(v)}`);
  return "#" + [page, ...args].join("&");
}

function dur(s) {
  s = Math.max(0, Math.round(s));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h ? `${h}h${String(m).padStart(2, "0")}m` : m ? `${m}m${s % 60}s` : `${s}s`;
}

function table(cols, rows) {
  const t = el("table", {}, el("tr", {}, ...cols.map((c) => el("th", { class: c.num ? "num" : "" }, c.name))));
  for (const r of rows) {
    t.append(el("tr", {}, ...cols.map((c) => {
      const v = c.get(r);
      const td = el("td", { class: (c.num ? "num " : "") + (c.cls ? c.cls(r) : "") });
      td.append(v instanceof Node ? v : document.createTextNode(v === undefined || v === null ? "" : String(v)));
      return td;
    })));
  }
  return t;
}

// A line chart: series of [x, y] points, the first drawn solid.
function lineChart(id, series, opts) {
  const W = 520, H = 200, L = 52, B = 28, T = 10, R = 12;
  const pts = series.flatMap((s) => s.points);
  const svg = el("svg:svg", { id, width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-points": series[0] ? series[0].points.length : 0 });
  if (!pts.length) {
    svg.append(el("svg:text", { x: L, y: H / 2 }, "no data yet"));
    return svg;
  }
  const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
  let x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(0, ...ys), y1 = Math.max(...ys);
  if (opts && opts.ymin !== undefined) y0 = opts.ymin;
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) y1 = y0 + 1;
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - B - T);
  svg.append(el("svg:line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.append(el("svg:line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const y of [y0, (y0 + y1) / 2, y1])
    svg.append(el("svg:text", { x: 4, y: sy(y) + 4 }, Number(y.toPrecision(3))));
  const fx = (opts && opts.fmtx) || ((x) => Number(x.toPrecision(4)));
  svg.append(el("svg:text", { x: L, y: H - 8 }, fx(x0)));
  svg.append(el("svg:text", { x: W - R - 60, y: H - 8 }, fx(x1)));
  series.forEach((s, i) => {
    const d = s.points.map((p, k) => `${k ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join("");
    svg.append(el("svg:path", { class: i ? "line2" : "line", d }));
    svg.append(el("svg:text", { x: W - R - 150, y: T + 12 + i * 14 }, s.name));
  });
  return svg;
}

function barChart(id, bars) {
  const W = 520, H = 200, L = 52, B = 28, T = 10;
  const svg = el("svg:svg", { id, width: W, height: H, viewBox: `0 0 ${W} ${H}` });
  if (!bars.length) {
    svg.append(el("svg:text", { x: L, y: H / 2 }, "nothing spent in the window"));
    return svg;
  }
  const max = Math.max(...bars.map((b) => b.value), 1e-9);
  const w = Math.min(80, (W - L - 10) / bars.length - 10);
  bars.forEach((b, i) => {
    const h = (b.value / max) * (H - B - T - 12);
    const x = L + i * (w + 10);
    svg.append(el("svg:rect", { class: "bar", x, y: H - B - h, width: w, height: h }));
    svg.append(el("svg:text", { x, y: H - 10 }, b.name || "(none)"));
    svg.append(el("svg:text", { x, y: H - B - h - 3 }, b.value.toFixed(2)));
  });
  return svg;
}

function figure(caption, node) {
  return el("figure", {}, el("figcaption", {}, caption), node);
}

async function cluster(view) {
  const now = Date.now();
  // allocation from the accounting records: it outlives a server's restart
  const [nodes, jobs, queues, alloc, usage, services, serviceUse] = await Promise.all([
    api("/v1/nodes"), api("/v1/jobs?state=active&limit=200"), api("/v1/queues"),
    api(`/v1/usage?by=time&from=${now - 86400000}&to=${now}&step=900`),
    api(`/v1/usage?by=queue&from=${now - 7 * 86400000}`),
    api("/v1/services"), api(`/v1/usage?by=service&from=${now - 7 * 86400000}`),
  ]);
  view.append(el("h1", {}, "Cluster"));
  const hours = (ms) => (ms - now) / 3600000;
  view.append(el("div", { class: "charts" },
    figure("Accelerators allocated, the last 24 hours", lineChart("chart-util", [
      { name: "allocated (mean of 15 min)", points: alloc.groups.map((g) => [hours(g.from_ms), g.gpus]) },
      { name: "the cluster's", points: [[-24, alloc.gpus], [0, alloc.gpus]] },
    ], { ymin: 0, fmtx: (x) => `${x.toFixed(1)} h` })),
    figure(`Cost by queue, last 7 days ${usage.currency || ""}`, barChart("chart-cost",
      usage.groups.map((g) => ({ name: g.name, value: g.cost })))),
  ));
  view.append(el("h2", {}, `Nodes (${nodes.nodes.length})`));
  view.append(table([
    { name: "node", get: (n) => n.name },
    { name: "state", get: (n) => n.state, cls: (n) => "state-" + n.state },
    { name: "accelerators", get: (n) => {
      const by = {};
      for (const a of n.accelerators) by[a.model] = (by[a.model] || 0) + 1;
      return Object.entries(by).map(([m, k]) => `${k}x ${m}`).join(", ") || "none";
    } },
    { name: "allocated", num: true, get: (n) => n.accelerators.reduce((s, a) => s + a.used, 0) },
    { name: "free", num: true, get: (n) => n.accelerators.reduce((s, a) => s + 1 - a.used, 0) },
    { name: "jobs", get: (n) => n.jobs.join(", ") },
    { name: "validation", get: (n) => n.validation ? (n.validation.verdict === "pass" ? "pass" : `${n.validation.verdict} (${n.validation.layer || ""})`) : "-" },
    { name: "reason", get: (n) => n.reason },
  ], nodes.nodes));
  if (services.services.length) {
    const used = {};
    for (const g of serviceUse.groups) used[g.name] = g;
    view.append(el("h2", {}, `Services (${services.services.length})`));
    view.append(table([
      { name: "service", get: (s) => s.name },
      { name: "ready", num: true, get: (s) => `${s.ready} of ${s.replicas}` },
      { name: "version", num: true, get: (s) => s.version },
      { name: "address", get: (s) => s.port ? `port ${s.port} on every node` : "endpoints only" },
      { name: "scaling", get: (s) => s.autoscale ? `${s.autoscale.min}-${s.autoscale.max} at ${s.autoscale.target_inflight} busy each` : "fixed" },
      { name: "busy", num: true, get: (s) => s.load ? s.load.busy + s.load.held : "-" },
      { name: "update", get: (s) => s.update ? `${s.update.state}${s.update.reason ? ": " + s.update.reason : ""}` : "-" },
      { name: "GPU-hours, 7 days", num: true, get: (s) => used[s.name] ? used[s.name].gpu_hours.toFixed(2) : "0.00" },
      { name: "last ended", get: (s) => s.last_end },
    ], services.services));
  }
  view.append(el("h2", {}, `Jobs waiting and running (${jobs.total})`));
  view.append(jobTable(jobs.jobs));
  view.append(el("h2", {}, "Queues"));
  view.append(table([
    { name: "queue", get: (q) => q.name },
    { name: "quota", num: true, get: (q) => q.gpus === null ? "-" : q.gpus },
    { name: "in use", num: true, get: (q) => q.in_use },
    { name: "borrowed", num: true, get: (q) => q.borrowed },
    { name: "running", num: true, get: (q) => q.running },
    { name: "pending", num: true, get: (q) => q.pending },
    { name: "budget", get: (q) => q.budget ? `${q.spent.toFixed(2)} of ${q.budget.amount} per ${q.budget.period}${q.budget_state === "spent" ? " - spent, new jobs wait" : q.budget_state === "warning" ? " - over 80%" : ""}` : "-" },
  ], queues.queues));
}

function jobTable(jobs) {
  return table([
    { name: "job", get: (j) => el("a", { href: `#job=${j.id}` }, String(j.id)) },
    { name: "name", get: (j) => j.request.name },
    { name: "queue", get: (j) => j.queue },
    { name: "owner", get: (j) => j.owner },
    { name: "state", get: (j) => j.stalled ? "STALLED" : j.state,
      cls: (j) => "state-" + (j.stalled ? "STALLED" : j.state) },
    { name: "time", num: true, get: (j) => {
      const a = j.attempts[j.attempts.length - 1];
      return a ? dur(((a.end_ms || Date.now()) - a.start_ms) / 1000) : "-";
    } },
    { name: "why it waits / how it ended", get: (j) => j.stalled ? j.stalled.why : j.reason },
  ], jobs);
}

const ENDED = "COMPLETED,FAILED,CANCELLED,TIMEOUT";
const STATES = { "": "any state", active: "waiting or running", ended: "ended",
  PENDING: "PENDING", RUNNING: "RUNNING", COMPLETED: "COMPLETED", FAILED: "FAILED",
  CANCELLED: "CANCELLED", TIMEOUT: "TIMEOUT" };
const PAGE = 200;

// Every job, newest first, a page at a time; filtered by state, user and name.
async function jobsView(view, q) {
  const args = [`order=newest`, `limit=${PAGE}`];
  const state = q.state === "ended" ? ENDED : q.state;
  if (state) args.push(`state=${encodeURIComponent(state)}`);
  if (q.user) args.push(`user=${encodeURIComponent(q.user)}`);
  if (q.name) args.push(`name=${encodeURIComponent(q.name)}`);
  if (q.before) args.push(`before=${encodeURIComponent(q.before)}`);
  const res = await api(`/v1/jobs?${args.join("&")}`);
  view.append(el("h1", {}, "Jobs"));
  const form = el("form", { id: "job-filter", class: "filter" });
  const sel = el("select", { name: "state" });
  for (const [v, label] of Object.entries(STATES)) {
    const o = el("option", { value: v }, label);
    if ((q.state || "") === v) o.setAttribute("selected", "");
    sel.append(o);
  }
  const user = el("input", { name: "user", placeholder: "user", size: 12, value: q.user || "" });
  const name = el("input", { name: "name", placeholder: "job name", size: 18, value: q.name || "" });
  form.append(sel, " ", user, " ", name, " ", el("button", { type: "submit" }, "show"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = hashOf("jobs", { state: sel.value, user: user.value.trim(), name: name.value.trim() });
  });
  view.append(form);
  const shown = res.jobs.length;
  const from = q.before ? "older ones" : "the newest";
  view.append(el("p", { id: "job-count" }, res.total === null
    ? `showing ${count(shown)} named ${q.name}, ${from} first`
    : `showing ${count(shown)} of ${count(res.total)}, ${from} first`));
  view.append(jobTable(res.jobs));
  const nav = el("p", { class: "pages" });
  if (q.before) nav.append(el("a", { href: hashOf("jobs", { ...q, before: "" }), id: "page-newest" }, "newest"), " ");
  if (res.next) nav.append(el("a", { href: hashOf("jobs", { ...q, before: String(res.next) }), id: "page-older" }, `older ${PAGE} \u2192`));
  view.append(nav);
}

// A word as a shell reads it back: bare when plain, else quoted (tenk show's).
function shellWord(w) {
  return /^[A-Za-z0-9_./=:,+@%-]+$/.test(w) ? w : "'" + w.replace(/'/g, "'\\''") + "'";
}

function limitText(s) {
  return s ? dur(s) : "UNLIMITED";
}

// What tenk show says of the request: command, folder, output, shape, limits, image.
function requestTable(j) {
  const r = j.request, rows = [];
  if (j.private) {
    rows.push(["command", `(${j.owner}'s to see)`]);
  } else {
    rows.push(["command", (r.command || []).map(shellWord).join(" ")]);
    rows.push(["folder", r.cwd]);
    rows.push(["output", j.output_path ? `${j.output_path} (task 0; ${r.output})` : r.output]);
    if (r.error) rows.push(["errors", r.error]);
  }
  let shape = `${r.nodes} node(s) x ${r.tasks_per_node} task(s) x ${r.gpus_per_task} accelerator(s)`;
  if (r.gpu_types && r.gpu_types.length) shape += ` of type ${r.gpu_types.join("|")}`;
  rows.push(["shape", shape]);
  rows.push(["limits", `time ${limitText(r.time_limit_s)}` +
    (r.cpus_per_task ? `, ${r.cpus_per_task} CPUs a task` : "") +
    (r.mem_mib ? `, ${r.mem_mib} MiB a node` : "") + `, ${r.requeue} requeue(s)`]);
  if (r.image) rows.push(["image", r.image + (r.mounts && r.mounts.length ? `; mounts ${r.mounts.join(", ")}` : "")]);
  if (r.array) rows.push(["array", r.array]);
  const t = el("table", { id: "job-request", class: "kv" });
  for (const [k, v] of rows) t.append(el("tr", {}, el("th", {}, k), el("td", {}, v === undefined ? "" : String(v))));
  return t;
}

function decode(b64) {
  const bin = atob(b64 || "");
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new TextDecoder().decode(bytes);
}

// The newest attempt's output, task by task: its last lines, more on
// request (the page then stays as it is until it is left).
async function logsSection(view, j) {
  view.append(el("h2", {}, "Output"));
  const box = el("div", { id: "job-logs" });
  view.append(box);
  await fillLogs(box, j, 50);
}

async function fillLogs(box, j, lines) {
  box.replaceChildren();
  if (j.private) {
    box.append(el("p", { class: "muted" }, `its output is ${j.owner}'s`));
    return;
  }
  if (!j.attempts.length) {
    box.append(el("p", { class: "muted" }, "none yet: it has not started"));
    return;
  }
  let res;
  try {
    res = await api(`/v1/jobs/${j.id}/logs?task=all&tail=${lines}`);
  } catch (e) {
    box.append(el("p", { class: "error" }, String(e.message)));
    return;
  }
  box.append(el("p", { class: "muted" }, `attempt ${res.attempt}: the last ${count(lines)} lines of each task`));
  for (const t of res.tasks) {
    box.append(el("h3", {}, `task ${t.ranks.join(",")} on ${t.node}: ${t.path}`));
    if (t.error) box.append(el("p", { class: "muted" }, t.error));
    else box.append(el("pre", { class: "log" }, decode(t.data)));
  }
  if (lines < 100000) {
    const more = el("button", { id: "logs-more", type: "button" }, `show the last ${count(lines * 10)} lines`);
    more.addEventListener("click", () => {
      box.setAttribute("data-more", "1");
      fillLogs(box, j, lines * 10);
    });
    box.append(more);
  }
}

async function jobView(view, id) {
  const j = await api(`/v1/jobs/${id}`);
  const ck = j.private ? { checkpoints: [], store: "" } : await api(`/v1/jobs/${id}/checkpoints`);
  view.append(el("h1", {}, `Job ${j.id}: ${j.request.name}`));
  view.append(el("p", {},
    el("span", { class: "state-" + j.state }, j.state), ` in queue ${j.queue}, class ${j.class}, owner ${j.owner}, submitted ${when(j.submit_ms)}. `,
    el("span", { class: "muted" }, j.reason || "")));
  if (j.stalled)
    view.append(el("p", { class: "state-STALLED", id: "stalled" },
      `STALLED: ${j.stalled.why} (found ${when(j.stalled.since_ms)}; on stall: ${j.stalled.on_stall})`));
  view.append(requestTable(j));
  view.append(el("h2", {}, "Attempts"));
  view.append(table([
    { name: "attempt", num: true, get: (a) => a.number },
    { name: "start", get: (a) => when(a.start_ms) },
    { name: "end", get: (a) => a.ended ? when(a.end_ms) : "(running)" },
    { name: "nodes", get: (a) => a.nodes.map((n) => `${n.name} [${n.devices.join(",")}]`).join(" ") },
    { name: "why it ended", get: (a) => a.reason },
  ], j.attempts));
  const last = j.attempts.slice().reverse().find((a) => a.metrics);
  view.append(el("h2", {}, "Training metrics"));
  if (!last) {
    view.append(el("p", { class: "muted" }, "none yet: the job writes lines such as \"step=1 loss=2.3\" to $TENK_METRICS"));
  } else {
    const m = last.metrics;
    view.append(el("p", {}, `attempt ${last.number}, step ${m.step}: ` +
      Object.entries(m.values).map(([k, v]) => `${k}=${Number(v.toPrecision(5))}`).join(" ")));
    const charts = el("div", { class: "charts" });
    m.history.names.forEach((name, c) => {
      const points = m.history.steps.map((s, k) => [s, m.history.values[k][c]]).filter((p) => p[1] !== null);
      charts.append(figure(`${name} by step`, lineChart(`chart-${name}`, [{ name, points }])));
    });
    view.append(charts);
  }
  view.append(el("h2", {}, "Checkpoints"));
  const list = ck.checkpoints || [];
  if (!list.length) view.append(el("p", { class: "muted" }, ck.store ? "none committed yet" : "the cluster has no checkpoint store"));
  else view.append(table([
    { name: "tag", get: (c) => c.tag },
    { name: "step", num: true, get: (c) => c.step },
    { name: "attempt", num: true, get: (c) => c.attempt },
    { name: "bytes", num: true, get: (c) => c.bytes },
    { name: "committed", get: (c) => when(c.at_ms) },
  ], list));
  await logsSection(view, j);
}

async function render() {
  const view = $("view");
  const next = el("div", { id: "view" });
  const h = location.hash.slice(1);
  try {
    if (h.startsWith("job=")) await jobView(next, encodeURIComponent(h.slice(4)));
    else if (h === "jobs" || h.startsWith("jobs&")) await jobsView(next, route().q);
    else await cluster(next);
    $("login").hidden = true;
    $("logout").hidden = false;
  } catch (e) {
    if (e.message === "login") {
      $("login").hidden = false;
      $("logout").hidden = true;
      view.replaceWith(next);
      return;
    }
    next.append(el("p", { class: "error" }, String(e.message)));
  }
  next.setAttribute("data-rendered", String(Date.now()));
  view.replaceWith(next);
}

async function login(token) {
  const r = await fetch("/v1/login", {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token }),
  });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  $("who").textContent = `${body.user} (${body.role})`;
}

async function start() {
  // a link may carry the token in its fragment (never sent to a server)
  const m = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (m) {
    const rest = location.hash.replace(/(?:^#|&)token=[^&]+/, "").replace(/^&/, "");
    history.replaceState(null, "", location.pathname + (rest ? "#" + rest : ""));
    try { await login(decodeURIComponent(m[1])); } catch (e) { $("login-error").textContent = e.message; }
  }
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await login($("token").value);
      $("token").value = "";
      $("login-error").textContent = "";
      render();
    } catch (e) { $("login-error").textContent = e.message; }
  });
  $("logout").addEventListener("click", async () => {
    await fetch("/v1/logout", { method: "POST", credentials: "same-origin" });
    $("who").textContent = "";
    render();
  });
  window.addEventListener("hashchange", render);
  await render();
  // fresh every 5 s, but not under the hands of someone typing a filter
  // or reading more of a log
  setInterval(() => {
    const a = document.activeElement;
    if (a && a.closest && a.closest("form")) return;
    if (document.querySelector("[data-more]")) return;
    render();
  }, 5000);
}

start();
