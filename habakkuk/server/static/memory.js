// Habakkuk dashboard: the memory view (notes, history with diffs, proposals).
// Uses api(), el(), when() and $ from app.js and the list helpers of views.js. Note text
// only ever goes in textContent.
"use strict";

const memory = { agent: "", slug: "" };

function memoryAgent() {
  return encodeURIComponent(memory.agent);
}

const memoryError = viewError("memory");

function untrustedMark(note) {
  return note.trust === "untrusted" ? el("span", "untrusted", "untrusted") : null;
}

function noteHeading(tag, note) {
  const heading = el(tag, "", note.title);
  const mark = untrustedMark(note);
  if (mark) heading.appendChild(mark);
  return heading;
}

async function loadMemory() {
  memory.agent = pickedAgent("memory-agent");
  memoryError(null);
  await Promise.all([loadNotes(), loadProposals()]);
}

async function loadNotes() {
  const q = $("memory-q").value.trim();
  const tags = $("memory-tags").value.trim();
  const query = new URLSearchParams({ limit: "50" });
  if (q) query.set("q", q);
  if (tags) query.set("tags", tags);
  const list = $("memory-list");
  try {
    const body = await api(`/api/memory/${memoryAgent()}?${query}`);
    renderList(list, body.memories, {
      className: "memory-note",
      data: (note) => ({ slug: note.slug }),
      parts: (note) => [
        noteHeading("strong", note),
        note.tags.length ? el("div", "tags", note.tags.join(", ")) : null,
        note.snippet ? el("div", "snippet", note.snippet) : null,
        el("div", "meta", `${note.slug} · ${when(note.updated_at)}`),
      ],
      open: (note) => openNote(note.slug),
      empty: q || tags ? "No matches." : "No notes yet.",
    });
    const shown = body.memories.length;
    $("memory-total").textContent = q || tags ? "" : `${shown} of ${body.total} note(s)`;
  } catch (error) {
    memoryError(error);
  }
}

async function openNote(slug) {
  try {
    const note = await api(`/api/memory/${memoryAgent()}/${encodeURIComponent(slug)}`);
    memory.slug = note.slug;
    const detail = $("memory-detail");
    detail.replaceChildren(noteHeading("h3", note));
    const by = note.source ? ` · by ${note.source}` : "";
    detail.appendChild(el("div", "meta", `${note.slug} · updated ${when(note.updated_at)}${by}`));
    if (note.tags.length) detail.appendChild(el("div", "tags", note.tags.join(", ")));
    const actions = el("div", "memory-actions");
    if (note.trust === "untrusted") {
      actions.appendChild(actionButton("Trust", "trust", () => trustNote(note.slug)));
    }
    actions.appendChild(actionButton("History", "quiet history", () => loadHistory(note.slug)));
    actions.appendChild(actionButton("Forget", "forget", () => forgetNote(note.slug)));
    detail.appendChild(actions);
    detail.appendChild(el("pre", "note-body", note.body));
    memoryError(null);
  } catch (error) {
    memoryError(error);
  }
}

async function trustNote(slug) {
  try {
    await api(`/api/memory/${memoryAgent()}/${encodeURIComponent(slug)}/trust`, { json: {} });
    await Promise.all([openNote(slug), loadNotes()]);
  } catch (error) {
    memoryError(error);
  }
}

async function forgetNote(slug) {
  try {
    await api(`/api/memory/${memoryAgent()}/${encodeURIComponent(slug)}`, { method: "DELETE" });
    memory.slug = "";
    const detail = $("memory-detail");
    detail.replaceChildren(el("p", "quiet-text memory-done", `Forgot ${slug}: it is in the trash, and History can restore it.`));
    await loadNotes();
  } catch (error) {
    memoryError(error);
  }
}

// -- history ----------------------------------------------------------------------------------

async function loadHistory(name) {
  const query = new URLSearchParams({ limit: "50" });
  if (name) query.set("file", name);
  try {
    const body = await api(`/api/memory-history/${memoryAgent()}?${query}`);
    const detail = $("memory-detail");
    detail.replaceChildren(el("h3", "", name ? `History of ${name}` : "History"));
    detail.appendChild(renderList(el("ul", "list"), body.changes, {
      className: "change",
      data: (change) => ({ change: change.id }),
      parts: (change) => {
        const taint = change.tainted ? " · tainted" : "";
        const why = change.note ? ` · ${change.note}` : "";
        return [
          el("strong", "", `${change.op} ${change.kind} ${change.name}`),
          el("div", "meta", `${change.id} · by ${change.by}${taint} · ${when(change.at)}${why}`),
        ];
      },
      open: (change) => openChange(change.id),
      empty: "No changes.",
    }));
    memoryError(null);
  } catch (error) {
    memoryError(error);
  }
}

function diffView(diff) {
  const pre = el("pre", "diff");
  for (const line of (diff || "(no difference)").split("\n")) {
    const kind = line.startsWith("+") && !line.startsWith("+++") ? "add"
      : line.startsWith("-") && !line.startsWith("---") ? "del" : "";
    pre.appendChild(el("span", kind, line + "\n"));
  }
  return pre;
}

async function openChange(id) {
  try {
    const change = await api(`/api/memory-history/${memoryAgent()}/${encodeURIComponent(id)}`);
    const detail = $("memory-detail");
    detail.replaceChildren(el("h3", "", `${change.op} ${change.kind} ${change.name}`));
    const taint = change.tainted ? " · tainted" : "";
    detail.appendChild(el("div", "meta", `${change.id} · ${change.path} · by ${change.by}${taint} · ${when(change.at)}`));
    const actions = el("div", "memory-actions");
    actions.appendChild(actionButton("Restore before (undo)", "restore-before", () => restoreChange(change.id, "before")));
    actions.appendChild(actionButton("Restore after (redo)", "quiet restore-after", () => restoreChange(change.id, "after")));
    detail.appendChild(actions);
    detail.appendChild(diffView(change.diff));
    memoryError(null);
  } catch (error) {
    memoryError(error);
  }
}

async function restoreChange(id, version) {
  try {
    const result = await api(`/api/memory-history/${memoryAgent()}/${encodeURIComponent(id)}/restore`, { json: { version } });
    const said = result.unchanged ? "Unchanged: the file already holds that version."
      : `Restored ${result.restored.name} (change ${result.restored.id}).`;
    $("memory-detail").appendChild(el("p", "memory-done", said));
    await loadNotes();
  } catch (error) {
    memoryError(error);
  }
}

// -- proposals --------------------------------------------------------------------------------

async function loadProposals() {
  try {
    const body = await api(`/api/memory-proposals/${memoryAgent()}`);
    const list = $("memory-proposals");
    list.replaceChildren();
    $("memory-proposals-box").hidden = body.proposals.length === 0;
    $("proposal-count").hidden = body.proposals.length === 0;
    $("proposal-count").textContent = String(body.proposals.length);
    for (const proposal of body.proposals) {
      const item = el("li", "proposal");
      item.dataset.proposal = proposal.id;
      item.appendChild(el("strong", "", `${proposal.action} ${proposal.name}`));
      if (proposal.reason) item.appendChild(el("div", "meta", `${proposal.reason} · by ${proposal.by} · ${when(proposal.at)}`));
      if (proposal.content) item.appendChild(el("pre", "", proposal.content));
      const actions = el("div", "memory-actions");
      actions.appendChild(actionButton("Apply", "apply", () => resolveProposal(proposal.id, true)));
      actions.appendChild(actionButton("Dismiss", "dismiss", () => resolveProposal(proposal.id, false)));
      item.appendChild(actions);
      list.appendChild(item);
    }
  } catch (error) {
    memoryError(error);
  }
}

async function resolveProposal(id, apply) {
  try {
    await api(`/api/memory-proposals/${memoryAgent()}/${encodeURIComponent(id)}`, { json: { apply } });
  } catch (error) {
    memoryError(error);
  }
  await Promise.all([loadProposals(), loadNotes()]);
}

$("memory-search").addEventListener("submit", (event) => {
  event.preventDefault();
  loadNotes();
});

$("memory-agent").addEventListener("change", () => {
  $("memory-detail").replaceChildren();
  loadMemory();
});

$("memory-history-all").addEventListener("click", () => loadHistory(""));
