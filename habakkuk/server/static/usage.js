// Habakkuk dashboard: the usage view (GET /api/usage): a period and agent picker, the
// total cost and calls, one bar per day (plain elements, no chart library), the tables
// by model and by agent, the cache hit rate and the unpriced calls; and, when the server
// has it, spend against the limits (GET /api/budget, hidden when it answers 404).
// Uses api(), el() and $ from app.js and the helpers of views.js. Text only ever goes
// in textContent.
"use strict";

const usageError = viewError("usage");

function dollars(value) {
  const amount = Number(value) || 0;
  return "$" + amount.toFixed(amount !== 0 && Math.abs(amount) < 0.01 ? 4 : 2);
}

function count(value) {
  return (Number(value) || 0).toLocaleString("en-US");
}

// cache_read / (input + cache_read): the share of prompt tokens the cache served.
function cacheHitRate(row) {
  const read = row.cache_read_tokens || 0;
  const fresh = row.input_tokens || 0;
  if (read + fresh === 0) return "–";
  return `${((100 * read) / (read + fresh)).toFixed(1)}%`;
}

// The cost of a row, marked when some of its calls have no known price (not counted).
function costText(row) {
  if (row.calls > 0 && row.unpriced === row.calls) return "unpriced";
  return dollars(row.cost) + (row.unpriced ? " *" : "");
}

function usageAgentOptions() {
  const select = $("usage-agent");
  if (select.options.length) return;
  const all = el("option", "", "all agents");
  all.value = "";
  select.appendChild(all);
  agentOptions(select, false);
}

async function loadUsage() {
  usageAgentOptions();
  usageError(null);
  const days = $("usage-days").value;
  const agent = $("usage-agent").value;
  const query = `days=${encodeURIComponent(days)}` + (agent ? `&agent=${encodeURIComponent(agent)}` : "");
  try {
    const report = await api(`/api/usage?${query}`);
    renderUsage(report);
  } catch (error) {
    usageError(error);
  }
  loadBudget(agent);
}

function renderUsage(report) {
  const total = report.total;
  $("usage-cost").textContent = dollars(total.cost);
  $("usage-calls").textContent = count(total.calls);
  $("usage-tokens").textContent = `${count(total.input_tokens + total.cache_read_tokens + total.cache_write_tokens)} in · ${count(total.output_tokens)} out`;
  $("usage-cache").textContent = cacheHitRate(total);
  $("usage-unpriced").textContent = count(total.unpriced);
  $("usage-unpriced-card").classList.toggle("warn", total.unpriced > 0);
  const note = $("usage-unpriced-note");
  note.hidden = total.unpriced === 0;
  note.textContent = total.unpriced
    ? `* ${count(total.unpriced)} call(s) went to models with no known price; their cost is not counted. Add them under pricing: in config.`
    : "";
  $("usage-since").textContent = `since ${report.since} (${report.timezone})`;
  renderDays(report.days);
  renderTable($("usage-models"), report.by_model, "No model calls in this period.");
  renderTable($("usage-agents"), report.by_agent, "No model calls in this period.");
}

// One bar per day, its height the day's share of the busiest day (by cost, or by calls
// when nothing in the period has a price). Heights are set through the CSSOM, which the
// page's Content-Security-Policy allows (inline style attributes it would not).
function renderDays(days) {
  const chart = $("usage-days-chart");
  chart.replaceChildren();
  const byCost = days.some((day) => day.cost > 0);
  const measure = (day) => (byCost ? day.cost : day.calls);
  const top = Math.max(0, ...days.map(measure));
  for (const day of days) {
    const bar = el("div", "usage-day");
    bar.dataset.day = day.key;
    bar.dataset.calls = String(day.calls);
    const label = `${day.key}: ${dollars(day.cost)}, ${count(day.calls)} call(s)` +
      (day.unpriced ? `, ${count(day.unpriced)} unpriced` : "");
    bar.title = label;
    bar.setAttribute("aria-label", label);
    const fill = el("div", "usage-day-fill" + (day.unpriced ? " unpriced" : ""));
    fill.style.height = top > 0 ? `${Math.max((100 * measure(day)) / top, day.calls ? 2 : 0)}%` : "0%";
    bar.appendChild(fill);
    chart.appendChild(bar);
  }
  $("usage-days-first").textContent = days.length ? days[0].key : "";
  $("usage-days-last").textContent = days.length ? days[days.length - 1].key : "";
  $("usage-days-scale").textContent = byCost ? `bars: cost per day (top ${dollars(top)})` : `bars: calls per day (top ${count(top)})`;
}

const USAGE_COLUMNS = [
  ["calls", (row) => count(row.calls)],
  ["input", (row) => count(row.input_tokens)],
  ["cache read", (row) => count(row.cache_read_tokens)],
  ["cache write", (row) => count(row.cache_write_tokens)],
  ["output", (row) => count(row.output_tokens)],
  ["cache hits", cacheHitRate],
  ["unpriced", (row) => count(row.unpriced)],
  ["cost", costText],
];

function renderTable(table, rows, empty) {
  table.replaceChildren();
  const head = el("tr");
  head.appendChild(el("th", "", ""));
  for (const [name] of USAGE_COLUMNS) head.appendChild(el("th", "num", name));
  table.appendChild(el("thead")).appendChild(head);
  const body = el("tbody");
  for (const row of rows) {
    const line = el("tr", row.unpriced ? "unpriced" : "");
    line.dataset.key = row.key;
    line.appendChild(el("td", "key", row.key));
    for (const [name, cell] of USAGE_COLUMNS) {
      const td = el("td", "num", cell(row));
      td.dataset.column = name;
      line.appendChild(td);
    }
    body.appendChild(line);
  }
  if (!rows.length) {
    const line = el("tr");
    const cell = el("td", "quiet-text", empty);
    cell.colSpan = USAGE_COLUMNS.length + 1;
    line.appendChild(cell);
    body.appendChild(line);
  }
  table.appendChild(body);
}

// -- spend against limits (GET /api/budget, spec 001 "Budget") -------------------------
// Shown when the server answers 200; hidden when it has no such endpoint (404) or
// cannot answer, so the view works with or without spending limits on the server.

async function loadBudget(agent) {
  const panel = $("usage-budget");
  const path = "/api/budget" + (agent ? `?agent=${encodeURIComponent(agent)}` : "");
  let budget;
  try {
    budget = await api(path);
  } catch (error) {
    panel.hidden = true;
    return;
  }
  renderBudget(budget);
  panel.hidden = false;
}

function limitLine(label, period) {
  const line = el("div", "budget-line");
  line.appendChild(el("span", "budget-label", label));
  if (!period) return line;
  const limited = Number(period.limit) > 0;
  const text = limited
    ? `${dollars(period.spent)} of ${dollars(period.limit)} (${Number(period.percent || 0).toFixed(0)}%)`
    : `${dollars(period.spent)} (no limit)`;
  line.appendChild(el("span", "budget-spent", text));
  if (limited) {
    const meter = el("div", "budget-meter");
    const fill = el("div", "budget-fill");
    const percent = Math.min(100, Math.max(0, Number(period.percent) || 0));
    fill.style.width = `${percent}%`;
    if (percent >= 100) fill.classList.add("over");
    else if (percent >= 80) fill.classList.add("near");
    meter.appendChild(fill);
    line.appendChild(meter);
  }
  if (period.resets) line.appendChild(el("span", "meta", `resets ${when(period.resets)}`));
  return line;
}

function renderBudget(budget) {
  const box = $("usage-budget-body");
  box.replaceChildren();
  const install = budget.install || {};
  const whole = el("div", "budget-scope");
  whole.dataset.scope = "install";
  whole.appendChild(el("h4", "", "This install"));
  whole.appendChild(limitLine("today", install.today));
  whole.appendChild(limitLine("this month", install.month));
  if (Number(install.per_turn) > 0) {
    whole.appendChild(el("div", "budget-line meta", `at most ${dollars(install.per_turn)} per turn`));
  }
  box.appendChild(whole);
  for (const agent of budget.agents || []) {
    const scope = el("div", "budget-scope");
    scope.dataset.scope = agent.agent;
    scope.appendChild(el("h4", "", agent.agent));
    scope.appendChild(limitLine("today", agent.today));
    scope.appendChild(limitLine("this month", agent.month));
    if (agent.paused) scope.appendChild(el("p", "budget-paused", agent.paused));
    box.appendChild(scope);
  }
  const unknown = budget.unknown_price ? ` · models with no known price: ${budget.unknown_price}` : "";
  $("usage-budget-meta").textContent = `${budget.day || ""} · ${budget.month || ""} (${budget.timezone || ""})${unknown}`;
}

$("usage-days").addEventListener("change", () => loadUsage());
$("usage-agent").addEventListener("change", () => loadUsage());
$("usage-reload").addEventListener("click", () => loadUsage());
