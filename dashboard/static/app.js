// Blackbox dashboard: plain DOM, the query API only. Report fields come from game clients, so
// every value goes in as text (never innerHTML). The whole view is in the URL, so a link shares it.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const LATEST = 20;
const RADIUS = 5;
// the skus, boards and a board's seasons the pickers offer, newest seasons first
const LISTED = 1000, SEASONS = 1000;
// the board's top rows shown, LATEST more at each ask, MOST_ROWS at most (the route's limit)
const MOST_ROWS = 1000;
let boardRows = LATEST;
const MINUTE = 60e3, HOUR = 3600e3;
const RANGES = {
  "1h": { span: HOUR, granularity: "minute", step: MINUTE },
  "24h": { span: 24 * HOUR, granularity: "hour", step: HOUR },
  "7d": { span: 7 * 24 * HOUR, granularity: "hour", step: HOUR },
};
// the view's state: each a URL query parameter; the form fields of the same id show it
const FIELDS = ["sku", "range", "platform", "build", "type", "board", "player", "season"];
const state = Object.fromEntries([...FIELDS, "group", "report", "release"].map((name) => [name, ""]));
// the builds the releases panel shows, newest first
const RELEASES = 5;
// the newest alerts the history panel shows
const HISTORY = 10;
let timer = null;

// a bidirectional control in a value would turn the text after it around ("\u202eexe.tab" reads
// "bat.exe"): shown as what it is instead
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const shown = (text) => String(text ?? "").replace(BIDI, (c) => `<U+${c.codePointAt(0).toString(16).toUpperCase()}>`);

function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) node.append(child instanceof Node ? child : shown(child));
  return node;
}

function readUrl() {
  const params = new URLSearchParams(location.search);
  for (const name of Object.keys(state)) state[name] = params.get(name) || "";
  // own names only: a link's "constructor" is every object's
  if (!Object.hasOwn(RANGES, state.range)) state.range = "1h";
  state.season = seasonOf(state.season);
  for (const name of FIELDS) $(name).value = state[name];
}

function writeUrl() {
  const url = new URL(location.href);
  url.search = "";
  for (const [name, value] of Object.entries(state)) if (value && !(name === "range" && value === "1h")) url.searchParams.set(name, value);
  history.replaceState(null, "", url);
}

// a read key, when serve has keys configured; kept for this tab only
function headers() {
  const key = $("key").value;
  return key ? { "x-api-key": key } : {};
}

// a crash storm is when the dashboard is looked at, and when the API sheds load (429, 503): a shed
// request is sent again once its Retry-After (seconds or a date) has passed, a few times
const RETRIES = 3, MOST_WAIT_S = 10;
async function send(url, init) {
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(url, init);
    if (![429, 503].includes(response.status) || attempt === RETRIES) return response;
    const after = response.headers.get("Retry-After") || "1";
    const told = /^\s*\d+\s*$/.test(after) ? Number(after) : (Date.parse(after) - Date.now()) / 1000;
    const seconds = Number.isFinite(told) ? Math.max(0, told) : 1;
    // a wait longer than a person watches is told, not cut short
    if (seconds > MOST_WAIT_S) return response;
    // the page's requests were shed together: spread, they do not all come back at once
    await new Promise((done) => setTimeout(done, 1000 * seconds + 500 * Math.random()));
  }
}

// a score is an int64, past what a number holds exactly (2^53): such an integer is read from its digits
const exact = (key, value, context) => typeof value === "number" && !Number.isSafeInteger(value) &&
  /^-?\d+$/.test(context?.source ?? "") ? BigInt(context.source) : value;
// and written as them
const digits = (key, value) => typeof value === "bigint" ? JSON.rawJSON(String(value)) : value;

async function api(path, query = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query)) if (value !== null && value !== undefined && value !== "") url.searchParams.set(name, value);
  const response = await send(url, { headers: headers() });
  const body = await response.text().then((text) => JSON.parse(text, exact)).catch(() => ({}));
  if (!response.ok) throw Object.assign(new Error(`${path}: ${response.status} ${body.message || body.error || ""}`), { status: response.status });
  return body;
}

// "." and ".." stay dot segments to a URL parser even escaped (%2E), and the server reads an escaped
// "/" (%2F) as one: each would ask for another route. No name the API stores holds either.
const addressable = (name) => name !== "." && name !== ".." && !String(name).includes("/");
function segment(value, what) {
  if (!addressable(value)) throw new Error(`${what} ${value} cannot be named in a URL`);
  return encodeURIComponent(value);
}
// a board's times as its schedule is written, in UTC, to the millisecond where they have one
function utc(iso) {
  const at = new Date(iso);
  if (!Number.isFinite(at.getTime())) return String(iso);
  const text = at.toISOString();
  return `${text.slice(0, 19).replace("T", " ")}${text.endsWith(".000Z") ? "" : text.slice(19, 23)} UTC`;
}
// a season as the API answers it, however a link spells it (epoch milliseconds, another RFC 3339
// form): one season, one option; a time without a zone is left for the API to refuse
function seasonOf(text) {
  const trimmed = text.trim();
  const at = /^-?\d+$/.test(trimmed) ? new Date(Number(trimmed))
    : /(Z|[+-]\d\d:?\d\d)$/i.test(trimmed) ? new Date(trimmed) : null;
  return at && Number.isFinite(at.getTime()) ? at.toISOString() : text;
}
const time = (iso) => new Date(iso).toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
function percent(rate) {
  if (rate === null || rate === undefined) return "n/a";
  if (rate === 0) return "0%";
  const value = rate * 100;
  return `${value.toFixed(value >= 10 ? 0 : value >= 1 ? 1 : 2)}%`;
}

// whole buckets, the current one last: every panel covers what the chart shows
function window_() {
  const { span, step } = RANGES[state.range], to = Date.now();
  return { from: Math.floor(to / step) * step + step - span, to };
}

// the filters as the query API names them
function filters() {
  return { platform: state.platform, buildVersion: state.build, crashType: state.type };
}

// one series on its own axis: bars (counts) or a line (broken where a value is null)
function drawChart(container, series, value, { kind, format, label, least = kind === "bars" ? 1 : 1e-9 }) {
  const width = 720, height = 110, left = 64, right = 8, top = 8, bottom = 18;
  const plotW = width - left - right, plotH = height - top - bottom;
  const values = series.map(value);
  // a series of zeros still has an axis: 1 of a count, a hair of a rate
  const max = Math.max(...values.filter((v) => v !== null), least);
  const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label });
  const step = plotW / Math.max(1, series.length);
  const y = (v) => top + plotH - (v / max) * plotH;
  const points = [];
  series.forEach((bucket, i) => {
    const x = left + i * step, v = values[i];
    if (kind === "bars") {
      const bar = el("svg:rect", { class: "bar", x: x + step * 0.15, y: y(v), width: Math.max(1, step * 0.7), height: top + plotH - y(v),
        "data-start": bucket.start, "data-value": v });
      bar.append(el("svg:title", {}, `${bucket.start}: ${format(v)} ${label}`));
      svg.append(bar);
    } else if (v !== null) {
      points.push(`${x + step / 2},${y(v)}`);
      // a dot a value: a lone bucket with sessions still shows
      const dot = el("svg:circle", { class: "dot", cx: x + step / 2, cy: y(v), r: 2 });
      dot.append(el("svg:title", {}, `${bucket.start}: ${format(v)} ${label}`));
      svg.append(dot);
    }
  });
  if (kind === "line") svg.append(el("svg:polyline", { class: "line", points: points.join(" "), "data-values": JSON.stringify(values) }));
  svg.append(el("svg:line", { class: "axis", x1: left, x2: left, y1: top, y2: top + plotH }));
  svg.append(el("svg:line", { class: "axis", x1: left, x2: left + plotW, y1: top + plotH, y2: top + plotH }));
  // the axis labels end left of the axis: nothing is cut off, whatever their width
  svg.append(el("svg:text", { class: "y-max", x: left - 6, y: top + 8, "text-anchor": "end" }, format(max)));
  svg.append(el("svg:text", { class: "y-label", x: left - 6, y: top + plotH / 2 + 4, "text-anchor": "end" }, label));
  svg.append(el("svg:text", { x: left - 6, y: top + plotH, "text-anchor": "end" }, format(0)));
  const ticks = Math.min(6, series.length);
  for (let t = 0; t < ticks; t++) {
    const i = Math.floor((t * series.length) / ticks);
    svg.append(el("svg:text", { x: left + i * step, y: height - 4 }, time(series[i].start)));
  }
  container.replaceChildren(svg);
}

function fill(tbody, rows, columns, none = "nothing in this range") {
  tbody.replaceChildren(...rows);
  if (!rows.length) tbody.append(el("tr", { class: "empty" }, el("td", { colspan: columns }, none)));
}

function showGroups(groups) {
  const active = [state.platform, state.build, state.type].filter(Boolean);
  $("groups-note").textContent = active.length ? `(${active.join(", ")})` : "";
  fill($("groups").tBodies[0], groups.map((g) => {
    const row = el("tr", { "data-signature": g.signature, class: g.signature === state.group ? "selected" : "" },
      el("td", {}, g.count), el("td", { class: "frames" }, g.topFrames.slice(0, 3).join("\n")),
      el("td", {}, time(g.firstSeen)), el("td", {}, time(g.lastSeen)));
    row.addEventListener("click", () => {
      state.group = state.group === g.signature ? "" : g.signature;
      writeUrl();
      refresh().catch(report);
    });
    return row;
  }), 4);
}

function line(change) {
  return `${change.state}${change.inBuild ? ` in build ${change.inBuild}` : ""} by ${change.changedBy}, ${time(change.changedAt)}`;
}

async function showGroup() {
  $("group-section").hidden = !state.group;
  if (!state.group) return;
  let issue;
  try {
    issue = await api(`/v1/crash-groups/${segment(state.group, "group")}`, { sku: state.sku });
  } catch (error) {
    if (error.status !== 404) throw error;
    $("group-section").hidden = true;  // not seen by the issue tracker yet
    return;
  }
  $("group-signature").textContent = issue.signature.slice(0, 16);
  $("group-state").textContent = `(${issue.state})`;
  $("group-section").dataset.state = issue.state;
  const fields = { "first seen": time(issue.firstSeen), "last seen": issue.lastSeen ? time(issue.lastSeen) : "",
    "first build": issue.firstBuild ?? "", reports: issue.reports, players: issue.players, regressions: issue.regressions,
    "last change": line(issue) };
  $("group-fields").replaceChildren(...Object.entries(fields).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  fill($("group-builds").tBodies[0], issue.builds.map((b) => el("tr", {},
    el("td", {}, b.build ?? "(none)"), el("td", {}, b.reports), el("td", {}, b.players), el("td", {}, time(b.firstSeen)),
    el("td", {}, time(b.lastSeen)))), 5);
  $("group-history").replaceChildren(...issue.history.map((h) => el("li", {}, line(h))));
}

async function setGroupState(event) {
  event.preventDefault();
  const body = { state: $("group-new-state").value };
  const build = $("group-in-build").value.trim();
  if (body.state === "resolved" && build) body.inBuild = build;
  const response = await send(`/v1/crash-groups/${segment(state.group, "group")}/state?sku=${encodeURIComponent(state.sku)}`,
    { method: "PUT", headers: { ...headers(), "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!response.ok) {
    const error = await response.json().catch(() => ({}));
    throw new Error(`setting the group's state: ${response.status} ${error.message || error.error || ""}`);
  }
  await showGroup();
}

// a change of a share, in points: +1.5%, -30%
function change(value) {
  if (value === null || value === undefined) return "";
  return `${value > 0 ? "+" : value < 0 ? "-" : ""}${percent(Math.abs(value))}`;
}

// the newest builds' health over the range, the chosen one's (else the newest's) over time
async function showReleases() {
  // release health comes by hour at the finest
  const sku = state.sku, range = window_(), interval = "hour";
  const builds = (await api("/v1/releases", { sku, limit: RELEASES })).builds.map((b) => b.build);
  // a build a link names (the alert history's) may be older than the newest: shown below them,
  // unless it has no sessions left (retention), as if the link named none
  const listed = builds.length;
  if (state.release && !builds.includes(state.release)) builds.push(state.release);
  const health = (await Promise.all(builds.map((b, i) => api(`/v1/releases/${segment(b, "build")}`, { sku, interval, ...range })
    .catch((error) => { if (i < listed || error.status !== 404) throw error; return null; })))).filter((h) => h);
  const chosen = health.find((h) => h.build === state.release) ?? health[0];
  $("releases-note").textContent = chosen ? `(build ${chosen.build} over time; click a build)` : "";
  fill($("releases").tBodies[0], health.map((h) => {
    const vs = h.change ? `${h.previous.build}: crash-free sessions ${change(h.change.crashFreeSessions)}` : "";
    const row = el("tr", { "data-build": h.build, class: h === chosen ? "selected" : "" },
      el("td", {}, h.build), el("td", {}, percent(h.adoption)), el("td", {}, percent(h.crashFreeSessions)),
      el("td", {}, percent(h.crashFreePlayers)), el("td", {}, percent(h.crashRate)), el("td", {}, vs), el("td", {}, time(h.firstSeen)));
    row.addEventListener("click", () => {
      state.release = h.build;
      writeUrl();
      showReleases().catch(report);
    });
    return row;
  }), 7);
  for (const id of ["chart-adoption", "chart-crash-free"]) $(id).replaceChildren();
  if (!chosen) return;
  drawChart($("chart-adoption"), chosen.series, (b) => b.adoption, { kind: "line", format: percent, label: "adoption" });
  drawChart($("chart-crash-free"), chosen.series, (b) => b.crashFreeSessions, { kind: "line", format: percent, label: "crash-free" });
}

// a link to this view with `name` set to `value`: a real link (it opens in a new tab too); a
// click opens it here
function viewLink(name, value, text, then) {
  const url = new URL(location.href);
  url.searchParams.set(name, value);
  const link = el("a", { href: url.href, [`data-${name}`]: value }, text);
  link.addEventListener("click", (event) => {
    event.preventDefault();
    state[name] = value;
    writeUrl();
    then().catch(report);
  });
  return link;
}

function deliveryNote(delivery) {
  const answer = delivery.lastStatusCode ?? delivery.lastError;
  return `${delivery.webhook}: ${delivery.status}${answer ? ` (${answer})` : ""}`;
}

// an alert names a crash group (new group, regression, velocity) and a build (all but a new group
// without one): each opens its page
function showHistory(alerts) {
  fill($("history").tBodies[0], alerts.map((a) => {
    const names = el("td", { class: "names" });
    if (a.signature) names.append(viewLink("group", a.signature, `group ${a.signature.slice(0, 12)}…`, refresh), " ");
    if (a.build) names.append(viewLink("release", a.build, `build ${a.build}`, showReleases));
    const episode = a.kind === "velocity" || a.kind === "crash-free-drop";
    return el("tr", { "data-kind": a.kind, "data-key": a.key },
      el("td", {}, time(a.openedAt)), el("td", {}, a.kind), names, el("td", { class: "text" }, a.text),
      el("td", {}, a.closedAt ? time(a.closedAt) : episode ? "open" : ""),
      el("td", {}, a.deliveries.length ? a.deliveries.map(deliveryNote).join("\n") : "no webhook"));
  }), 6);
}

function showReports(reports) {
  $("reports-filter").textContent = state.group ? `(group ${state.group.slice(0, 12)}…, click it again to clear)` : "";
  fill($("reports").tBodies[0], reports.map((r) => {
    const row = el("tr", { "data-report-id": r.reportId },
      el("td", {}, r.reportId), el("td", {}, time(r.receivedAt)), el("td", {}, r.crashType ?? ""),
      el("td", {}, r.platform ?? ""), el("td", {}, r.buildVersion ?? ""), el("td", {}, `${(r.sizeBytes / 1024).toFixed(1)} KB`));
    row.addEventListener("click", () => showDetail(r.reportId).catch(report));
    return row;
  }), 6);
}

// the attachments' object URLs of the report shown: each holds its bytes until revoked
let downloads = [];
function forgetDownloads() {
  for (const url of downloads) URL.revokeObjectURL(url);
  downloads = [];
}

async function showDetail(reportId) {
  const r = await api(`/v1/crashes/${segment(reportId, "report")}`);
  forgetDownloads();
  state.report = String(r.reportId);
  writeUrl();
  $("detail-id").textContent = r.reportId;
  const fields = ["reportKey", "sku", "receivedAt", "crashType", "errorCode", "platform", "buildVersion", "signature", "sizeBytes"];
  $("detail-fields").replaceChildren(...fields.flatMap((f) => [el("dt", {}, f), el("dd", {}, r[f] ?? "")]));
  // a walked minidump's crashing thread is the report's trace (and its signature's); else the client's
  $("detail-trace").textContent = shown(r.processed?.stackTrace ?? r.payload.stackTrace ?? "(none)");
  // fetched, not linked: the request must carry the key, which an <a href> or <img src> cannot
  const attachments = await Promise.all(r.attachments.map(async (name) => {
    // bytes, not API Gateway's base64 text: an Accept of the API's binary types (stacks/api.py)
    const response = await send(`/v1/crashes/${segment(r.reportId, "report")}/attachments/${segment(name, "attachment")}`,
      { headers: { ...headers(), Accept: "application/octet-stream" } });
    if (!response.ok) return el("p", {}, `${name}: ${response.status}`);  // an error's JSON is no attachment
    const url = URL.createObjectURL(await response.blob());
    downloads.push(url);
    const link = el("a", { href: url, download: name, class: "download" }, `download ${name}`);
    return /\.(png|jpe?g|gif|webp)$/i.test(name) ? el("figure", {}, el("img", { src: url, alt: name }), link) : el("p", {}, link);
  }));
  $("detail-attachments").replaceChildren(...attachments);
  if (!r.attachments.length) $("detail-attachments").textContent = "(none)";
  $("detail-payload").textContent = shown(JSON.stringify(r.payload, digits, 2));
  $("detail").hidden = false;
  $("detail").scrollTop = 0;
}

function closeDetail() {
  forgetDownloads();
  $("detail").hidden = true;
  state.report = "";
  writeUrl();
}

function boardRow(entry) {
  return el("tr", { class: entry.playerId === state.player ? "me" : "" },
    el("td", {}, entry.rank), el("td", {}, entry.playerId),
    el("td", {}, entry.subscore === undefined ? entry.score : `${entry.score} (${entry.subscore})`));
}

// a board that never reset nor was wiped is in its first season (its `season` null)
const FIRST_SEASON = "1970-01-01T00:00:00.000Z";

// the board's seasons for the picker: "current" (the season now, whichever that is), then the past
// ones (the current one is not listed again), and the chosen one, listed or not; rebuilt only when
// they changed (a rebuilt list closes, or moves, under the pointer)
function showSeasons(seasons, info, current) {
  const picker = $("season");
  // the season now (null: the board's first); not known while the board fails to load
  const now = current === undefined ? undefined : current ?? FIRST_SEASON;
  const past = seasons.filter((s) => s !== now);
  // a link to the current season by its start shows as "current" (it stays the linked one's)
  if (state.season && state.season !== now && !past.includes(state.season)) past.push(state.season);
  picker.disabled = past.length === 0 && info.reset === "never";
  const label = (s) => (Date.parse(s) === 0 ? "the first" : `from ${utc(s)}`);
  const values = ["", ...past], labels = [current ? `current, ${label(current)}` : "current", ...past.map(label)];
  const same = values.length === picker.options.length
    && values.every((v, i) => picker.options[i].value === v && picker.options[i].text === labels[i]);
  if (!same) picker.replaceChildren(...values.map((v, i) => el("option", { value: v }, labels[i])));
  picker.value = state.season === now ? "" : state.season;
}

// the board's settings, as a line: its schedule and season, its window, its limits
function describe(info, past) {
  let note = `${info.players} players, ${info.order}, ${info.operator}`;
  if (info.reset !== "never") note += `; resets ${info.reset}`;
  // a board that never resets has a season of its own once wiped
  if (info.season) note += `${info.reset !== "never" ? ":" : ";"} ${past ? "season" : "this season"} from ${utc(info.season)}`;
  if (!past && info.reset !== "never" && info.nextReset && info.nextReset !== info.endsAt) {
    note += `, next reset ${utc(info.nextReset)}`;
  }
  if (info.ties !== "shared") note += `; ties ${info.ties}`;
  const now = Date.now();
  if (info.startsAt && Date.parse(info.startsAt) > now) note += `; opens ${utc(info.startsAt)}`;
  if (info.endsAt) note += `; ${Date.parse(info.endsAt) > now ? "closes" : "closed"} ${utc(info.endsAt)}`;
  if (info.maxAttempts) note += `; ${info.maxAttempts} attempts a player`;
  if (info.maxPlayers) note += `; at most ${info.maxPlayers} players`;
  return note;
}

// the board's loads begun: one drawn only while it is the latest, so that a slow one (a live
// refresh's) never draws the board chosen before over the one chosen since
let boardLoads = 0;

async function showBoard() {
  if (!state.board) return;
  const load = ++boardLoads;
  let shownBoard;
  try {
    shownBoard = await readBoard();
  } catch (error) {
    if (load !== boardLoads) return;
    // told in the panel, where the next refresh of the crash panels leaves it, and nothing of the
    // board shown before left under this one's name; the chosen season stays chosen
    $("board-info").textContent = told(error);
    showSeasons([], { reset: "never" });
    $("leaderboard").tBodies[0].replaceChildren();
    $("board-more").hidden = true;
    return;
  }
  if (load !== boardLoads) return;
  const { info, seasons, current, note, entries, more } = shownBoard;
  showSeasons(seasons, info, current);
  $("board-info").textContent = shown(note);
  fill($("leaderboard").tBodies[0], entries.map(boardRow), 3, "no scores in this season");
  $("board-more").hidden = !more;
}

// what the panel shows of the chosen board, season and player
async function readBoard() {
  const board = segment(state.board, "board"), season = state.season;
  const info = await api(`/v1/leaderboards/${board}`, { season });
  // the season now, which the picker's "current" names
  const { season: current } = season ? await api(`/v1/leaderboards/${board}`) : info;
  // a board that never resets has seasons too once wiped
  const { seasons } = await api(`/v1/leaderboards/${board}/seasons`, { limit: SEASONS });
  let entries, note = describe(info, Boolean(season));
  if (state.player) {
    try {
      const me = await api(`/v1/leaderboards/${board}/players/${segment(state.player, "player")}`, { season });
      entries = (await api(`/v1/leaderboards/${board}/around/${segment(state.player, "player")}`,
        { radius: RADIUS, season })).entries;
      note += `; ${me.playerId}: rank ${me.rank}, score ${me.score}`;
    } catch (error) {
      if (error.status !== 404) throw error;
      note += `; no player ${state.player} ${season ? "in this season" : "on this board"}`;
    }
  }
  // the top as far down as asked (a live refresh keeps it); a player's neighbours alone
  let more = false;
  if (!entries) {
    const top = await api(`/v1/leaderboards/${board}/top`, { limit: boardRows, season });
    ({ entries } = top);
    more = top.nextCursor !== null && boardRows < MOST_ROWS;
  }
  return { info, seasons, current, note, entries, more };
}

function told(error) {
  // the server's words name a header, which the page's user does not set: the Key box is theirs
  const hint = error.status === 401 ? " (enter a read key in the Key box above)" : "";
  return shown(error.message) + hint;
}

function report(error) {
  $("status").textContent = told(error);
}

// what the pickers' last load could not list, if anything
let pickersFailed = null;

// the skus and boards there are, for the pickers; the first of each when none is chosen. Each on
// its own: a key may read the boards and not the skus (a server key); a failure is raised after
async function loadPickers() {
  const [skus, boards] = await Promise.allSettled([api("/v1/skus", { limit: LISTED }),
    api("/v1/leaderboards", { limit: LISTED })]);
  if (skus.status === "fulfilled") {
    $("skus").replaceChildren(...skus.value.skus.map((s) => el("option", { value: s.sku })));
    if (!state.sku && skus.value.skus.length) state.sku = $("sku").value = skus.value.skus[0].sku;
  }
  if (boards.status === "fulfilled") {
    $("boards").replaceChildren(...boards.value.boards.map((b) => el("option", { value: b.board })));
    const first = boards.value.boards.find((b) => addressable(b.board));
    if (!state.board && first) state.board = $("board").value = first.board;
  }
  writeUrl();
  pickersFailed = [skus, boards].find((result) => result.status === "rejected")?.reason ?? null;
  if (pickersFailed) throw pickersFailed;
}

// the pickers, then every panel; the board also where the pickers failed (it may be the key's to read)
function loadAll() {
  return loadPickers().then(refresh, (error) => showBoard().then(() => { throw error; }));
}

// refreshes under way: a live tick starts none while one waits out a shed request
let refreshing = 0;
async function refresh() {
  refreshing++;
  try {
    // the pickers again where they failed: what failed once (a shed request, a blip) is not told for
    // as long as the page stays open, and what the key may not read is told again
    if (pickersFailed) await loadPickers().catch(() => {});
    // done when both are: a crash panel that fails at once does not end a refresh whose board still loads
    const [drawn] = await Promise.allSettled([draw(), showBoard()]);
    if (drawn.status === "rejected") throw drawn.reason;
  } finally {
    refreshing--;
  }
}

async function draw() {
  // cleared as it begins, not once it is done: a report's error, told meanwhile, stays; and what the
  // pickers could not list (a server key's 403 on the skus) stays told
  $("status").textContent = pickersFailed ? told(pickersFailed) : "";
  $("empty").hidden = Boolean(state.sku);
  if (!state.sku) return;
  const sku = state.sku, range = window_(), granularity = RANGES[state.range].granularity;
  const filtered = Boolean(state.platform || state.build || state.type);
  const [stats, narrowed, alerts, raised, groups, latest] = await Promise.all([
    api("/v1/stats", { sku, granularity, ...range }),
    // sessions carry no platform, build or type: the crashes are filtered, sessions and rate are not
    filtered ? api("/v1/stats", { sku, granularity, ...range, ...filters() }) : null,
    api("/v1/alerts", { sku, ...range }),
    api("/v1/alerts/history", { sku, limit: HISTORY, ...range }),
    api("/v1/crash-groups", { sku, limit: 10, ...range, ...filters() }),
    api("/v1/crashes", { sku, order: "desc", limit: LATEST, signature: state.group, ...range, ...filters() }),
  ]);
  $("rate-note").textContent = filtered ? "(crashes filtered; sessions and rate: all platforms, builds and types)" : "";
  drawChart($("chart-crashes"), (narrowed || stats).series, (b) => b.crashes,
    { kind: "bars", format: String, label: "crashes" });
  drawChart($("chart-sessions"), stats.series, (b) => b.sessions, { kind: "line", format: String, label: "sessions", least: 1 });
  drawChart($("chart-rate"), stats.series, (b) => b.crashRate, { kind: "line", format: percent, label: "crash rate" });
  $("alerts").replaceChildren(...alerts.alerts.map((a) =>
    el("li", {}, `${time(a.start)}: ${a.crashes} crashes in a minute (baseline ${a.baseline}/min, threshold ${a.threshold})`)));
  if (!alerts.alerts.length) $("alerts").append(el("li", { class: "none" }, "none in this range"));
  showHistory(raised.alerts);
  showGroups(groups.groups);
  showReports(latest.reports);
  await Promise.all([showGroup(), showReleases()]);
  document.body.dataset.loaded = String(Date.now());
}

async function load() {
  await loadAll();
  if (state.report) await showDetail(state.report);
  document.body.dataset.ready = "true";
}

function schedule() {
  clearInterval(timer);
  if ($("live").checked) timer = setInterval(() => refreshing || refresh().catch(report), 5000);
}

function apply(names, then) {
  // a player's id is as the game sent it, spaces and all; the other names hold none
  for (const name of names) state[name] = name === "player" ? $(name).value : $(name).value.trim();
  writeUrl();
  then().catch(report);
}

const VIEW = ["sku", "range", "platform", "build", "type"];
$("controls").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem("blackbox-key", $("key").value);
  if ($("sku").value.trim() !== state.sku) state.group = state.release = "";
  // a key just entered may be what the pickers needed: the sku and board they pick are then shown
  apply(VIEW, loadAll);
});
$("range").addEventListener("change", () => apply(VIEW, refresh));
$("live").addEventListener("change", schedule);
$("detail-close").addEventListener("click", closeDetail);
$("group-form").addEventListener("submit", (event) => setGroupState(event).catch(report));
document.addEventListener("keydown", (event) => { if (event.key === "Escape" && !$("detail").hidden) closeDetail(); });
$("board-form").addEventListener("submit", (event) => {
  event.preventDefault();
  // another board's seasons are its own
  if ($("board").value.trim() !== state.board) $("season").value = "";
  boardRows = LATEST;
  apply(["board", "player", "season"], showBoard);
});
$("season").addEventListener("change", () => {
  boardRows = LATEST;
  apply(["season"], showBoard);
});
$("board-more").addEventListener("click", () => {
  boardRows = Math.min(boardRows + LATEST, MOST_ROWS);
  showBoard();
});

$("key").value = sessionStorage.getItem("blackbox-key") || "";
readUrl();
load().catch(report);
schedule();
