// Habakkuk dashboard: the schedules view (every schedule with its next fire times, last
// status and output, failure streak and slots; an add form for prompt schedules; pause,
// resume, run now and delete with a confirmation). Uses api(), el(), when() and $ from
// app.js and the list helpers of views.js. Schedule text only ever goes in textContent.
"use strict";

const schedulesView = { id: "" };

const schedulesError = viewError("schedules");

function schedulePath(id, tail) {
  return `/api/schedules/${encodeURIComponent(id)}${tail || ""}`;
}

function nextText(schedule) {
  if (!schedule.enabled) return "paused";
  if (!schedule.next_run) return "done (a one-off that has fired)";
  const times = schedule.next_runs && schedule.next_runs.length ? schedule.next_runs : [schedule.next_run];
  return "next: " + times.map(when).join(" · ");
}

function scheduleMeta(schedule) {
  const parts = [schedule.agent, schedule.kind, schedule.spec, nextText(schedule)];
  if (schedule.last_status) parts.push(`last: ${schedule.last_status}`);
  if (schedule.fail_streak) parts.push(`failed ${schedule.fail_streak} in a row`);
  return parts.join(" · ");
}

async function loadSchedules() {
  pickedAgent("schedules-agent");
  schedulesError(null);
  await listSchedules();
}

async function listSchedules() {
  const list = $("schedules-list");
  try {
    const body = await api("/api/schedules");
    renderList(list, body.schedules, {
      className: "schedule",
      data: (schedule) => ({ id: schedule.id }),
      parts: (schedule) => {
        const heading = el("strong", "", schedule.name);
        if (!schedule.enabled) heading.appendChild(el("span", "paused", "paused"));
        if (schedule.fail_streak) heading.appendChild(el("span", "streak", `${schedule.fail_streak} failing`));
        return [heading, el("div", "meta", scheduleMeta(schedule))];
      },
      open: (schedule) => openSchedule(schedule.id),
      empty: "No schedules yet: add one here, or an agent adds one with schedule_create.",
    });
    $("schedules-total").textContent = `${body.schedules.length} schedule(s)`;
  } catch (error) {
    schedulesError(error);
  }
}

async function openSchedule(id) {
  try {
    const body = await api("/api/schedules");
    const schedule = body.schedules.find((s) => s.id === id);
    if (!schedule) throw new Error(`schedule ${id} no longer exists`);
    const runs = await api(schedulePath(id, "/runs"));
    schedulesView.id = id;
    const detail = $("schedules-detail");
    detail.replaceChildren(el("h3", "", schedule.name));
    detail.appendChild(el("div", "meta", scheduleMeta(schedule)));
    detail.appendChild(el("div", "snippet schedule-prompt", schedule.command !== null ? `script: ${schedule.command}` : schedule.prompt));
    detail.appendChild(el("div", "meta", `delivers to: ${schedule.deliver_to || "the run's session"}`));
    const actions = el("div", "memory-actions");
    actions.appendChild(actionButton("Run now", "run", () => scheduleAction(id, "/run")));
    if (schedule.enabled) actions.appendChild(actionButton("Pause", "pause", () => scheduleAction(id, "/pause")));
    else actions.appendChild(actionButton("Resume", "resume", () => scheduleAction(id, "/resume")));
    actions.appendChild(actionButton("Delete", "forget delete", () => askDelete(schedule)));
    detail.appendChild(actions);
    if (schedule.last_output) {
      detail.appendChild(el("h4", "", "Last output"));
      detail.appendChild(el("pre", "note-body schedule-output", schedule.last_output));
    }
    detail.appendChild(el("h4", "", runs.runs.length ? "Slots (newest first)" : "No slots yet"));
    const slots = el("ul", "schedule-runs");
    for (const run of runs.runs) {
      const line = el("li", `slot ${run.status}`, `${when(run.slot)}: ${run.outcome}${run.extra ? " (run now)" : ""}`);
      slots.appendChild(line);
    }
    detail.appendChild(slots);
    schedulesError(null);
  } catch (error) {
    schedulesError(error);
  }
}

async function scheduleAction(id, tail) {
  try {
    const body = await api(schedulePath(id, tail), { json: {} });
    if (body.job) $("schedules-total").textContent = `queued ${body.job}`;
    await Promise.all([openSchedule(id), listSchedules()]);
  } catch (error) {
    schedulesError(error);
  }
}

function askDelete(schedule) {
  askFirst($("schedules-detail"), "schedule-confirm", `Delete ${schedule.name}?`,
    ["Yes, delete", "forget delete-yes", () => deleteSchedule(schedule.id)], ["Keep it", "quiet delete-no"]);
}

async function deleteSchedule(id) {
  try {
    await api(schedulePath(id), { method: "DELETE" });
    schedulesView.id = "";
    $("schedules-detail").replaceChildren(el("p", "quiet-text schedule-done", "Deleted."));
    await listSchedules();
  } catch (error) {
    schedulesError(error);
  }
}

addForm("schedules-form", "/api/schedules", () => {
  const body = {
    agent: $("schedules-agent").value,
    name: $("schedules-name").value,
    when: $("schedules-when").value,
    prompt: $("schedules-prompt").value,
  };
  const deliver = $("schedules-deliver").value.trim();
  if (deliver) body.deliver_to = deliver;
  return body;
}, async (added) => {
  await listSchedules();
  await openSchedule(added.id);
}, schedulesError);

$("schedules-reload").addEventListener("click", () => loadSchedules());
