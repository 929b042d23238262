// Habakkuk dashboard: the skills view (list, one skill's scan reasons, instructions and
// files, approve (a dangerous one after a confirmation), remove with a confirmation,
// restore). Uses api(), el(), when() and $ from app.js and the list helpers of views.js.
// Skill text only ever goes in textContent.
"use strict";

const skills = { agent: "", name: "" };

function skillsAgent() {
  return encodeURIComponent(skills.agent);
}

function skillPath(name, tail) {
  return `/api/skills/${skillsAgent()}/${encodeURIComponent(name)}${tail || ""}`;
}

const skillsError = viewError("skills");

function skillMeta(skill) {
  const used = skill.last_used ? `used ${when(skill.last_used)}` : "never used";
  const found = skill.reasons.length ? ` (${skill.reasons.length} finding(s))` : "";
  const scan = skill.verdict ? `scan: ${skill.verdict}${found}` : "not scanned";
  const parts = [skill.scope, skill.source, scan, used];
  if (skill.pinned) parts.push("pinned");
  return parts.join(" · ");
}

function skillHeading(tag, skill) {
  const heading = el(tag, "", skill.name);
  if (!skill.trusted) heading.appendChild(el("span", "untrusted", "untrusted"));
  if (skill.verdict && skill.verdict !== "clean") {
    heading.appendChild(el("span", `verdict ${skill.verdict}`, skill.verdict));
  }
  return heading;
}

async function loadSkills() {
  skills.agent = pickedAgent("skills-agent");
  skillsError(null);
  await listSkills();
}

async function listSkills() {
  const list = $("skills-list");
  try {
    const body = await api(`/api/skills/${skillsAgent()}`);
    renderList(list, body.skills, {
      className: "skill",
      data: (skill) => ({ name: skill.name }),
      parts: (skill) => [
        skillHeading("strong", skill),
        el("div", "snippet", skill.description),
        el("div", "meta", skillMeta(skill)),
      ],
      open: (skill) => openSkill(skill.name),
      empty: "No skills yet: the agent saves them with skill_save, `habakkuk skills install` adds one.",
    });
    $("skills-total").textContent = `${body.skills.length} skill(s)`;
  } catch (error) {
    skillsError(error);
  }
}

async function openSkill(name) {
  try {
    const skill = await api(skillPath(name));
    skills.name = skill.name;
    const detail = $("skills-detail");
    detail.replaceChildren(skillHeading("h3", skill));
    detail.appendChild(el("div", "snippet", skill.description));
    detail.appendChild(el("div", "meta", skillMeta(skill)));
    if (skill.caution) detail.appendChild(el("p", "skill-caution", skill.caution));
    if (skill.reasons.length) {
      // The scan's reasons, as the service lists them (dangerous first).
      detail.appendChild(el("h4", "", `Scan: ${skill.verdict}`));
      const reasons = el("ul", "skill-reasons");
      for (const reason of skill.reasons) reasons.appendChild(el("li", "", reason));
      detail.appendChild(reasons);
    }
    const actions = el("div", "memory-actions");
    if (!skill.trusted && skill.scope === "shared") {
      // The service decides what needs the user's word that they read the findings.
      const approve = skill.needs_acknowledgement
        ? () => askApprove(skill.name)
        : () => approveSkill(skill.name, false);
      actions.appendChild(actionButton("Approve", "approve", approve));
    }
    if (skill.scope !== "plugin") {
      actions.appendChild(actionButton("Remove", "forget remove", () => askRemove(skill.name)));
    }
    detail.appendChild(actions);
    detail.appendChild(el("pre", "note-body skill-body", skill.body));
    detail.appendChild(el("h4", "", skill.files.length ? "Files" : "No supporting files"));
    const files = el("ul", "skill-files");
    for (const path of skill.files) files.appendChild(el("li", "", path));
    detail.appendChild(files);
    skillsError(null);
  } catch (error) {
    skillsError(error);
  }
}

function askRemove(name) {
  askFirst($("skills-detail"), "skill-confirm",
    `Remove ${name}? A backup is kept and Restore puts it back.`,
    ["Yes, remove", "forget remove-yes", () => removeSkill(name)], ["Keep it", "quiet remove-no"]);
}

function askApprove(name) {
  askFirst($("skills-detail"), "skill-confirm",
    `The scan found ${name} dangerous. Approve it only if you read every finding above.`,
    ["I read them: approve", "forget approve-yes", () => approveSkill(name, true)],
    ["Keep it untrusted", "quiet approve-no"]);
}

async function approveSkill(name, acknowledge) {
  try {
    await api(skillPath(name, "/approve"), { json: acknowledge ? { acknowledge: true } : {} });
    await Promise.all([openSkill(name), listSkills()]);
  } catch (error) {
    skillsError(error);
  }
}

async function removeSkill(name) {
  try {
    const removed = await api(skillPath(name), { method: "DELETE" });
    skills.name = "";
    const detail = $("skills-detail");
    detail.replaceChildren(el("p", "quiet-text skill-done", `Removed ${removed.name}; the backup is ${removed.backup}.`));
    const actions = el("div", "memory-actions");
    actions.appendChild(actionButton("Restore", "restore", () => restoreSkill(removed.name)));
    detail.appendChild(actions);
    await listSkills();
  } catch (error) {
    skillsError(error);
  }
}

async function restoreSkill(name) {
  try {
    const skill = await api(skillPath(name, "/restore"), { json: {} });
    await listSkills();
    await openSkill(skill.name);
    $("skills-detail").appendChild(el("p", "skill-done", `Restored ${skill.name}.`));
  } catch (error) {
    skillsError(error);
  }
}

$("skills-agent").addEventListener("change", () => {
  $("skills-detail").replaceChildren();
  loadSkills();
});

$("skills-reload").addEventListener("click", () => loadSkills());
