// Habakkuk dashboard: what the list views (memory, skills, schedules, board) share: the
// error line, the agent picker, a list of clickable items, action buttons and a yes/no
// box. Uses el(), state, Unauthorized and $ from app.js. Text only ever goes in textContent.
"use strict";

// The function a view shows an error with, in #VIEW-error (null clears it); a token that
// was not accepted is the login form's to say.
function viewError(view) {
  return (error) => {
    if (error instanceof Unauthorized) return;
    $(`${view}-error`).textContent = error ? String(error.message || error) : "";
  };
}

// Each agent as an option of `select`; with `preselect`, the default agent is selected.
function agentOptions(select, preselect) {
  for (const agent of state.app.agents) {
    const option = el("option", "", agent);
    option.value = agent;
    if (preselect && agent === state.app.default) option.selected = true;
    select.appendChild(option);
  }
}

// The agent chosen in the view's picker (#ID), filled the first time (the default chosen).
function pickedAgent(id) {
  const select = $(id);
  if (!select.options.length) agentOptions(select, true);
  return select.value;
}

// `list` holds one clickable item per entry of `items`: `li.clickable.CLASS`, its data
// attributes `data(item)`, its children `parts(item)` (a null is left out); a click opens
// it. No items: the `empty` line (none when `empty` is null).
function renderList(list, items, { className, data, parts, open, empty }) {
  list.replaceChildren();
  for (const entry of items) {
    const item = el("li", `clickable ${className}`);
    Object.assign(item.dataset, data(entry));
    for (const part of parts(entry)) if (part) item.appendChild(part);
    item.addEventListener("click", () => open(entry));
    list.appendChild(item);
  }
  if (!items.length && empty !== null) list.appendChild(el("li", "quiet-text", empty));
  return list;
}

function actionButton(label, className, onClick) {
  const button = el("button", className, label);
  button.type = "button";
  button.addEventListener("click", onClick);
  return button;
}

// A yes/no question after the actions of `detail` (one at a time, `.CLASS`): `yes` is
// [label, class, what it does]; `no` is [label, class], and closes the question.
function askFirst(detail, className, question, yes, no) {
  const old = detail.querySelector(`.${className}`);
  if (old) old.remove();
  const box = el("div", `${className} memory-actions`);
  box.appendChild(el("span", "", question));
  box.appendChild(actionButton(yes[0], yes[1], yes[2]));
  box.appendChild(actionButton(no[0], no[1], () => box.remove()));
  detail.querySelector(".memory-actions").after(box);
}

// Submitting the add form #FORM posts what `body()` builds to `path`; the form is emptied
// and `added(item)` shows the new item. A refusal goes to `onError`.
function addForm(form, path, body, added, onError) {
  $(form).addEventListener("submit", async (event) => {
    event.preventDefault();
    const json = body();
    try {
      const item = await api(path, { json });
      $(form).reset();
      await added(item);
    } catch (error) {
      onError(error);
    }
  });
}
