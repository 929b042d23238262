// Habakkuk dashboard: the config view (GET /api/config): the home, the doctor's checks and
// the effective configuration as the server returns it, secrets already redacted there,
// written out YAML-style, one foldable block per top-level section. Read-only.
// Uses api(), el() and $ from app.js and viewError() from views.js. Text only ever goes
// in textContent.
"use strict";

const configError = viewError("config");

// A scalar as YAML would write it: strings quoted only when they would read as
// something else (empty, a number, true/false/null, a leading or trailing space, ": ").
function yamlScalar(value) {
  if (value === null || value === undefined) return "null";
  if (typeof value !== "string") return String(value);
  const plain = value !== "" && !/^\s|\s$|: |^[-?:,[\]{}#&*!|>'"%@`]|^(true|false|null|~|[-+.\d].*)$/i.test(value) && !value.includes("\n");
  return plain ? value : JSON.stringify(value);
}

function isEmpty(value) {
  return value !== null && typeof value === "object" && Object.keys(value).length === 0;
}

// `value` as YAML lines at `depth` (two spaces a level).
function yamlLines(value, depth, lines) {
  const pad = "  ".repeat(depth);
  if (Array.isArray(value)) {
    for (const item of value) {
      if (item !== null && typeof item === "object" && !isEmpty(item)) {
        const inner = [];
        yamlLines(item, depth + 1, inner);
        // The first line of the item goes after its dash.
        inner[0] = `${pad}- ${inner[0].trimStart()}`;
        lines.push(...inner);
      } else {
        lines.push(`${pad}- ${isEmpty(item) ? (Array.isArray(item) ? "[]" : "{}") : yamlScalar(item)}`);
      }
    }
    return lines;
  }
  for (const [key, item] of Object.entries(value)) {
    if (item !== null && typeof item === "object" && !isEmpty(item)) {
      lines.push(`${pad}${yamlScalar(key)}:`);
      yamlLines(item, depth + 1, lines);
    } else {
      const shown = isEmpty(item) ? (Array.isArray(item) ? "[]" : "{}") : yamlScalar(item);
      lines.push(`${pad}${yamlScalar(key)}: ${shown}`);
    }
  }
  return lines;
}

function yamlText(value) {
  if (value === null || typeof value !== "object") return yamlScalar(value);
  if (isEmpty(value)) return Array.isArray(value) ? "[]" : "{}";
  return yamlLines(value, 0, []).join("\n");
}

async function loadConfig() {
  configError(null);
  try {
    renderConfig(await api("/api/config"));
  } catch (error) {
    configError(error);
  }
}

function renderConfig(body) {
  $("config-home").textContent = body.home;
  const doctor = $("config-doctor");
  doctor.replaceChildren();
  for (const check of body.doctor || []) {
    const item = el("li", check.ok ? "check ok" : "check fail");
    item.dataset.name = check.name;
    item.appendChild(el("span", "check-mark", check.ok ? "✓" : "✗"));
    item.appendChild(el("strong", "", check.name));
    if (check.detail) item.appendChild(el("span", "meta", check.detail));
    doctor.appendChild(item);
  }
  const sections = $("config-sections");
  sections.replaceChildren();
  const config = body.config || {};
  // Top-level settings with a plain value read as one block; each section is its own.
  const simple = {};
  const nested = [];
  for (const [name, value] of Object.entries(config)) {
    if (value !== null && typeof value === "object" && !isEmpty(value)) nested.push([name, value]);
    else simple[name] = value;
  }
  if (!isEmpty(simple)) sections.appendChild(configSection("settings", simple, true));
  for (const [name, value] of nested) {
    // The sections a reader comes for are open; the rest fold away.
    sections.appendChild(configSection(name, value, ["providers", "agents"].includes(name)));
  }
}

function configSection(name, value, open) {
  const section = el("details", "config-section");
  section.dataset.section = name;
  section.open = open;
  section.appendChild(el("summary", "", name));
  section.appendChild(el("pre", "config-yaml", yamlText(value)));
  return section;
}

$("config-reload").addEventListener("click", () => loadConfig());
