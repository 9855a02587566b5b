// Blackbox dashboard: plain DOM, the query API only. Report fields come from game clients, so
// every value goes in as text (never innerHTML).
"use strict";

// the API is the origin that served this page, and only it: the read key goes nowhere else
const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const LATEST = 20;
const LATEST_WINDOW_MS = 10 * 60 * 1000;
const LATEST_MAX_PAGES = 5;
let signatureFilter = null;
let timer = null;

function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

// a read key, when serve has keys configured; kept for this tab only
function headers() {
  const key = $("key").value;
  return key ? { "x-api-key": key } : {};
}

async function api(path, query = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query)) if (value !== null && value !== undefined) url.searchParams.set(name, value);
  const response = await fetch(url, { headers: headers() });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(`${path}: ${response.status} ${body.message || body.error || ""}`);
  return body;
}

const time = (iso) => new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
const percent = (rate) => (rate === null ? "n/a" : `${(rate * 100).toFixed(2)}%`);

function drawChart(series) {
  const width = 720, height = 220, left = 40, right = 40, top = 10, bottom = 24;
  const plotW = width - left - right, plotH = height - top - bottom;
  const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "crashes and sessions" });
  const maxCount = Math.max(1, ...series.map((b) => Math.max(b.crashes, b.sessions)));
  const maxRate = Math.max(1e-9, ...series.map((b) => b.crashRate ?? 0));
  const step = plotW / Math.max(1, series.length);
  const y = (v) => top + plotH - (v / maxCount) * plotH;
  const sessions = [], rates = [];
  series.forEach((b, i) => {
    const x = left + i * step;
    const bar = el("svg:rect", {
      class: "bar", x: x + step * 0.15, y: y(b.crashes), width: Math.max(1, step * 0.7), height: top + plotH - y(b.crashes),
      "data-start": b.start, "data-crashes": b.crashes, "data-sessions": b.sessions,
    });
    bar.append(el("svg:title", {}, `${b.start}: ${b.crashes} crashes, ${b.sessions} sessions, rate ${percent(b.crashRate)}`));
    svg.append(bar);
    sessions.push(`${x + step / 2},${y(b.sessions)}`);
    if (b.crashRate !== null) rates.push(`${x + step / 2},${top + plotH - (b.crashRate / maxRate) * plotH}`);
  });
  svg.append(el("svg:polyline", { class: "sessions", points: sessions.join(" ") }));
  svg.append(el("svg:polyline", { class: "rate", points: rates.join(" ") }));
  svg.append(el("svg:line", { x1: left, x2: left + plotW, y1: top + plotH, y2: top + plotH, stroke: "#999" }));
  svg.append(el("svg:text", { x: 2, y: top + 8 }, maxCount));
  svg.append(el("svg:text", { x: width - right + 4, y: top + 8 }, percent(maxRate)));
  const ticks = Math.min(6, series.length);
  for (let t = 0; t < ticks; t++) {
    const i = Math.floor((t * series.length) / ticks);
    svg.append(el("svg:text", { x: left + i * step, y: height - 6 }, time(series[i].start)));
  }
  $("chart").replaceChildren(svg);
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
  if (!rows.length) tbody.append(el("tr", { class: "empty" }, el("td", { colspan: 6 }, "nothing yet")));
}

function showGroups(groups) {
  fill($("groups").tBodies[0], groups.map((g) => {
    const row = el("tr", { "data-signature": g.signature },
      el("td", {}, g.count), el("td", { class: "frames" }, g.topFrames.slice(0, 3).join("\n")),
      el("td", {}, time(g.firstSeen)), el("td", {}, time(g.lastSeen)));
    row.addEventListener("click", () => {
      signatureFilter = signatureFilter === g.signature ? null : g.signature;
      refresh();
    });
    return row;
  }));
}

async function latestReports(sku) {
  // the API lists oldest first; the newest are the tail of the last minutes, a few pages at most
  const query = { sku, from: Date.now() - LATEST_WINDOW_MS, limit: 1000, signature: signatureFilter };
  let reports = [];
  for (let page = 0; page < LATEST_MAX_PAGES; page++) {
    const body = await api("/v1/crashes", query);
    reports = reports.concat(body.reports).slice(-LATEST);
    if (!body.nextCursor) break;
    query.cursor = body.nextCursor;
  }
  return reports.reverse();
}

function showReports(reports) {
  $("reports-filter").textContent = signatureFilter ? `(group ${signatureFilter.slice(0, 12)}…, click it again to clear)` : "";
  fill($("reports").tBodies[0], reports.map((r) => {
    const row = el("tr", { "data-report-id": r.reportId },
      el("td", {}, r.reportId), el("td", {}, time(r.receivedAt)), el("td", {}, r.crashType ?? ""),
      el("td", {}, r.platform ?? ""), el("td", {}, r.buildVersion ?? ""), el("td", {}, `${(r.sizeBytes / 1024).toFixed(1)} KB`));
    row.addEventListener("click", () => showDetail(r.reportId).catch(report));
    return row;
  }));
}

async function showDetail(reportId) {
  const r = await api(`/v1/crashes/${encodeURIComponent(reportId)}`);
  $("detail-id").textContent = r.reportId;
  const fields = ["reportKey", "sku", "receivedAt", "crashType", "errorCode", "platform", "buildVersion", "signature", "sizeBytes"];
  $("detail-fields").replaceChildren(...fields.flatMap((f) => [el("dt", {}, f), el("dd", {}, r[f] ?? "")]));
  $("detail-trace").textContent = r.payload.stackTrace ?? "(none)";
  // fetched, not linked: the request must carry the key, which an <img src> cannot
  const attachments = await Promise.all(r.attachments.map(async (name) => {
    const response = await fetch(`/v1/crashes/${encodeURIComponent(r.reportId)}/attachments/${encodeURIComponent(name)}`,
      { headers: headers() });
    const url = URL.createObjectURL(await response.blob());
    const link = el("a", { href: url, download: name }, name);
    return /\.(png|jpe?g|gif|webp)$/i.test(name) ? el("figure", {}, el("img", { src: url, alt: name }), link) : el("p", {}, link);
  }));
  $("detail-attachments").replaceChildren(...attachments);
  if (!r.attachments.length) $("detail-attachments").textContent = "(none)";
  $("detail-payload").textContent = JSON.stringify(r.payload, null, 2);
  $("detail").hidden = false;
  $("detail").scrollIntoView({ block: "nearest" });
}

async function showBoard() {
  const board = $("board").value.trim();
  if (!board) return;
  const info = await api(`/v1/leaderboards/${encodeURIComponent(board)}`);
  $("board-info").textContent = `${info.players} players, ${info.order}, ${info.operator}`;
  const top = await api(`/v1/leaderboards/${encodeURIComponent(board)}/top`, { limit: 20 });
  fill($("leaderboard").tBodies[0], top.entries.map((e) => el("tr", {}, el("td", {}, e.rank), el("td", {}, e.playerId), el("td", {}, e.score))));
}

function report(error) {
  $("status").textContent = error.message;
}

async function refresh() {
  const sku = $("sku").value.trim();
  if (!sku) return;
  const granularity = $("range").value;
  const [stats, alerts, groups, latest] = await Promise.all([
    api("/v1/stats", { sku, granularity }),
    api("/v1/alerts", { sku }),
    api("/v1/crash-groups", { sku, limit: 10 }),
    latestReports(sku),
  ]).catch((error) => { report(error); return []; });
  if (!stats) return;
  $("status").textContent = "";
  drawChart(stats.series);
  $("alerts").replaceChildren(...alerts.alerts.map((a) =>
    el("li", {}, `${time(a.start)}: ${a.crashes} crashes in a minute (baseline ${a.baseline}/min, threshold ${a.threshold})`)));
  if (!alerts.alerts.length) $("alerts").append(el("li", { class: "none" }, "none in the last hour"));
  showGroups(groups.groups);
  showReports(latest);
  document.body.dataset.loaded = String(Date.now());
}

function schedule() {
  clearInterval(timer);
  if ($("live").checked) timer = setInterval(() => refresh().catch(report), 5000);
}

$("controls").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem("blackbox-key", $("key").value);
  const url = new URL(location.href);
  url.searchParams.set("sku", $("sku").value.trim());
  history.replaceState(null, "", url);
  refresh().catch(report);
});
$("live").addEventListener("change", schedule);
$("detail-close").addEventListener("click", () => { $("detail").hidden = true; });
$("board-form").addEventListener("submit", (event) => { event.preventDefault(); showBoard().catch(report); });

$("key").value = sessionStorage.getItem("blackbox-key") || "";
$("sku").value = params.get("sku") || "";
$("board").value = params.get("board") || "";
refresh().catch(report);
showBoard().catch(report);
schedule();
