// Habakkuk dashboard: the board view (cards in columns by status, filtered by assignee and
// status; a card's detail with its body, dependencies and their status, comments, events,
// result and each attempt's session as a link to the sessions view; add, assign, priority,
// comment, cancel and reopen). Uses api(), el(), go(), openSession() and $ from app.js and
// the list helpers of views.js. Card text only ever goes in textContent.
"use strict";

const BOARD_STATUSES = ["todo", "doing", "blocked", "done", "cancelled"];
const boardView = { id: "" };

const boardError = viewError("board");

function cardPath(id, tail) {
  return `/api/board/${encodeURIComponent(id)}${tail || ""}`;
}

function cardTime(epoch) {
  return epoch ? new Date(epoch * 1000).toLocaleString() : "";
}

function cardMeta(card) {
  const parts = [card.assignee || "unassigned", `priority ${card.priority}`];
  if (card.attempt) parts.push(`attempt ${card.attempt}`);
  if (card.status === "blocked") {
    parts.push(card.blocked_kind === "question" ? "waits for an answer" : "failed");
  }
  if (card.waiting_on && card.waiting_on.length) {
    parts.push("waits on " + card.waiting_on.map((d) => `${d.id} (${d.status})`).join(", "));
  }
  return parts.join(" · ");
}

async function loadBoard() {
  const select = $("board-assignee");
  if (select.options.length <= 1) {
    agentOptions(select, false);
    agentOptions($("board-add-to"), false);
  }
  boardError(null);
  await listCards();
}

async function listCards() {
  const query = new URLSearchParams({ status: $("board-status").value });
  const assignee = $("board-assignee").value;
  if (assignee) query.set("assignee", assignee);
  try {
    const body = await api("/api/board?" + query.toString());
    const columns = $("board-columns");
    columns.replaceChildren();
    const shown = BOARD_STATUSES.filter((s) => body.cards.some((c) => c.status === s) || ["todo", "doing", "blocked"].includes(s));
    for (const status of shown) {
      const cards = body.cards.filter((c) => c.status === status);
      const column = el("div", `board-column ${status}`);
      column.dataset.status = status;
      column.appendChild(el("h3", "", `${status} (${cards.length})`));
      column.appendChild(renderList(el("ul", "list"), cards, {
        className: "board-card",
        data: (card) => ({ id: card.id }),
        parts: (card) => [el("strong", "", card.title), el("div", "meta", cardMeta(card))],
        open: (card) => openCard(card.id),
        empty: null,
      }));
      columns.appendChild(column);
    }
    $("board-total").textContent = `${body.cards.length} card(s)`;
  } catch (error) {
    boardError(error);
  }
}

function sessionLink(label, session) {
  const link = el("a", "session-link", label);
  link.href = "#";
  link.dataset.session = session;
  link.addEventListener("click", async (event) => {
    event.preventDefault();
    go("sessions"); // Back returns to the board
    try {
      await openSession(session);
    } catch (error) {
      $("session-detail").replaceChildren(el("p", "error", `${session}: ${error.message || error}`));
    }
  });
  return link;
}

function cardSection(detail, title, items) {
  detail.appendChild(el("h4", "", title));
  const list = el("ul", "card-history");
  for (const item of items) list.appendChild(item);
  detail.appendChild(list);
  return list;
}

async function openCard(id) {
  try {
    const card = await api(cardPath(id));
    boardView.id = card.id;
    const detail = $("board-detail");
    detail.replaceChildren(el("h3", "", card.title));
    detail.appendChild(el("div", "meta card-status", `${card.id} · ${card.status} · ${cardMeta(card)}`));
    detail.appendChild(el("div", "meta", `created by ${card.created_by} · ${cardTime(card.created_at)}`));
    if (card.blocked_reason) detail.appendChild(el("div", "snippet card-blocked", `Blocked: ${card.blocked_reason}`));
    if (card.body) detail.appendChild(el("pre", "note-body card-body", card.body));
    if (card.result) {
      detail.appendChild(el("h4", "", "Result"));
      detail.appendChild(el("pre", "note-body card-result", card.result));
    }
    detail.appendChild(cardActions(card));
    if (card.depends_on.length) {
      const waiting = new Map((card.waiting_on || []).map((d) => [d.id, d.status]));
      cardSection(detail, "Depends on", card.depends_on.map((dep) => {
        const item = el("li", "clickable card-dep", `${dep}: ${waiting.get(dep) || "done"}`);
        item.addEventListener("click", () => openCard(dep));
        return item;
      }));
    }
    if (card.attempts.length) {
      cardSection(detail, "Attempts", card.attempts.map((a) => {
        const item = el("li", "card-attempt");
        item.appendChild(sessionLink(`attempt ${a.attempt}: ${a.session}`, a.session));
        return item;
      }));
    }
    cardSection(detail, card.comments.length ? "Comments" : "No comments yet",
      card.comments.map((c) => el("li", "card-comment", `${c.author} (${cardTime(c.at)}): ${c.text}`)));
    cardSection(detail, "Events",
      card.events.map((e) => el("li", `card-event ${e.kind}`, `${cardTime(e.at)} ${e.author} ${e.kind}${e.text ? ": " + e.text : ""}`)));
    boardError(null);
  } catch (error) {
    boardError(error);
  }
}

function cardActions(card) {
  const box = el("div", "memory-actions card-actions");
  const assign = el("select", "card-assign");
  for (const agent of ["", ...state.app.agents]) {
    const option = el("option", "", agent || "unassigned");
    option.value = agent;
    if (agent === card.assignee) option.selected = true;
    assign.appendChild(option);
  }
  box.appendChild(assign);
  box.appendChild(actionButton("Assign", "assign", () => cardAction(card.id, "/assign", { assignee: assign.value })));
  const priority = el("input", "card-priority");
  priority.type = "number";
  priority.min = "-100";
  priority.max = "100";
  priority.value = String(card.priority);
  box.appendChild(priority);
  box.appendChild(actionButton("Set priority", "priority", () => cardAction(card.id, "/priority", { priority: Number(priority.value) })));
  if (["todo", "doing", "blocked"].includes(card.status)) {
    box.appendChild(actionButton("Cancel card", "forget cancel", () => cardAction(card.id, "/cancel", {})));
  } else {
    box.appendChild(actionButton("Reopen", "reopen", () => cardAction(card.id, "/reopen", {})));
  }
  if (card.status === "blocked") {
    box.appendChild(actionButton("Reopen", "reopen", () => cardAction(card.id, "/reopen", {})));
  }
  const comment = el("input", "card-comment-text");
  comment.placeholder = "comment";
  comment.size = 30;
  box.appendChild(comment);
  box.appendChild(actionButton("Comment", "comment", () => {
    if (comment.value.trim()) return cardAction(card.id, "/comment", { text: comment.value });
  }));
  return box;
}

async function cardAction(id, tail, body) {
  try {
    await api(cardPath(id, tail), { json: body });
    await Promise.all([openCard(id), listCards()]);
  } catch (error) {
    boardError(error);
  }
}

addForm("board-form", "/api/board", () => {
  const body = { title: $("board-title").value };
  const text = $("board-body").value.trim();
  if (text) body.body = text;
  if ($("board-add-to").value) body.assignee = $("board-add-to").value;
  const priority = $("board-priority").value.trim();
  if (priority) body.priority = Number(priority);
  const deps = $("board-deps").value.split(",").map((d) => d.trim()).filter(Boolean);
  if (deps.length) body.depends_on = deps;
  return body;
}, async (added) => {
  await listCards();
  await openCard(added.id);
}, boardError);

$("board-filter").addEventListener("change", () => listCards());
$("board-reload").addEventListener("click", () => loadBoard());
