// Habakkuk dashboard: plain JavaScript over the JSON API (no build step).
// Every piece of server text is inserted with textContent, never as HTML.
"use strict";

const TOKEN_KEY = "habakkuk.token";
const CONVERSATION_KEY = "habakkuk.conversation";
const $ = (id) => document.getElementById(id);

const state = {
  token: localStorage.getItem(TOKEN_KEY) || "",
  app: null,
  view: "overview",
  conversation: localStorage.getItem(CONVERSATION_KEY) || "",
  lastSeq: 0,
  streams: {},
  timers: [],
  streaming: null, // the bubble of the reply streaming now
  answered: new Set(), // turns whose final reply is shown (their late text is ignored)
  fileUrls: [], // blob URLs of the chat's files (revoked when the log is cleared)
};

function randomId() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  return Math.random().toString(36).slice(2) + Date.now().toString(36);
}

function authHeaders(extra) {
  const headers = Object.assign({}, extra || {});
  if (state.token) headers.Authorization = "Bearer " + state.token;
  return headers;
}

class Unauthorized extends Error {}

async function api(path, options) {
  const opts = Object.assign({ method: "GET" }, options || {});
  const headers = authHeaders(opts.headers);
  if (opts.json !== undefined) {
    opts.method = opts.method === "GET" ? "POST" : opts.method;
    opts.body = JSON.stringify(opts.json);
    headers["Content-Type"] = "application/json";
    delete opts.json;
  }
  opts.headers = headers;
  const response = await fetch(path, opts);
  if (response.status === 401) {
    showLogin("The token was not accepted.");
    throw new Unauthorized("unauthorized");
  }
  const type = response.headers.get("Content-Type") || "";
  const body = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) throw new Error((body && body.error) || response.statusText);
  return body;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  // A message bubble takes its direction from its own text: an Arabic or Hebrew reply
  // is right-aligned and ordered by the browser's bidi algorithm, an English one is not.
  if (className && /(^| )msg( |$)/.test(className)) node.dir = "auto";
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return isNaN(date) ? iso : date.toLocaleString();
}

// -- login ---------------------------------------------------------------------------

function showLogin(message) {
  stopStreams();
  $("shell").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("token").focus();
}

async function start() {
  try {
    state.app = await api("/api/app");
  } catch (error) {
    if (!(error instanceof Unauthorized)) showLogin("Cannot reach Habakkuk: " + error.message);
    return;
  }
  $("login").hidden = true;
  $("shell").hidden = false;
  // Without a token there is nothing to sign out of.
  $("logout").hidden = !state.app.token_required;
  const select = $("chat-agent");
  select.replaceChildren();
  for (const agent of state.app.agents) {
    const option = el("option", "", agent);
    option.value = agent;
    if (agent === state.app.default) option.selected = true;
    select.appendChild(option);
  }
  if (!state.conversation) {
    state.conversation = "dashboard-" + randomId().slice(0, 8);
    localStorage.setItem(CONVERSATION_KEY, state.conversation);
  }
  $("chat-conversation").value = state.conversation;
  // Live mode only with realtime: in config (the page's CSP allows the provider only then).
  $("chat-live").hidden = !state.app.realtime;
  // Device nodes only with nodes: in config; a browser paired before serves again.
  $("nav-nodes").hidden = !state.app.nodes;
  if (state.app.nodes) startBrowserNode(); // nodes.js
  // Recording only with transcription: in config (the server makes the recording text).
  $("chat-record").hidden = !(state.app.transcription && window.MediaRecorder);
  // The address names the view (a bookmark, a reload): the overview when it names none.
  const view = viewFromHash();
  if (location.hash !== "#/" + view) history.replaceState(null, "", "#/" + view);
  show(view);
  state.timers.push(setInterval(refreshBadge, 5000));
  refreshBadge();
}

$("login-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("token").value.trim();
  localStorage.setItem(TOKEN_KEY, state.token);
  start();
});

$("logout").addEventListener("click", () => {
  localStorage.removeItem(TOKEN_KEY);
  state.token = "";
  state.timers.forEach(clearInterval);
  state.timers = [];
  showLogin("");
});

// -- views -----------------------------------------------------------------------------

// Each view has its own address, /app/#/<view>: it can be bookmarked, a reload lands on
// it, and Back returns to the view shown before.
const VIEWS = Array.from(document.querySelectorAll("nav button"), (button) => button.dataset.view);

function viewFromHash() {
  const match = /^#\/([a-z]+)$/.exec(location.hash);
  return match && VIEWS.includes(match[1]) ? match[1] : "overview";
}

// Show a view and record it in the history (show() alone does not).
function go(view) {
  show(view);
  if (location.hash !== "#/" + view) location.hash = "#/" + view;
}

window.addEventListener("hashchange", () => {
  const view = viewFromHash();
  if (!$("shell").hidden && view !== state.view) show(view);
});

for (const button of document.querySelectorAll("nav button")) {
  button.addEventListener("click", () => go(button.dataset.view));
}

function show(view) {
  state.view = view;
  for (const button of document.querySelectorAll("nav button")) {
    button.classList.toggle("active", button.dataset.view === view);
  }
  for (const section of document.querySelectorAll(".view")) {
    section.hidden = section.id !== "view-" + view;
  }
  if (view === "overview") loadOverview();
  if (view === "chat") openChat();
  if (view === "sessions") loadSessions();
  if (view === "memory") loadMemory(); // memory.js
  if (view === "skills") loadSkills(); // skills.js
  if (view === "schedules") loadSchedules(); // schedules.js
  if (view === "board") loadBoard(); // board.js
  if (view === "usage") loadUsage(); // usage.js
  if (view === "nodes") loadNodes(); // nodes.js
  if (view === "approvals") loadApprovals();
  if (view === "config") loadConfig(); // config.js
}

async function refreshBadge() {
  try {
    const body = await api("/api/approvals");
    const count = body.approvals.length;
    $("approval-count").hidden = count === 0;
    $("approval-count").textContent = String(count);
    settleApprovalCards(body.approvals);
    if (state.view === "approvals") renderApprovals(body.approvals);
    if (state.view === "overview") loadOverview();
  } catch (error) {
    /* shown on the next action */
  }
}

// -- overview --------------------------------------------------------------------------

// One account as the overview shows it: state and since when, the last message in and
// out, and the last error with its time (channels/health.py says what each means).
function channelLine(c) {
  const at = (when) => (when ? new Date(when).toLocaleString() : "never");
  let line = `${c.account}: ${c.state}`;
  if (c.since) line += ` since ${at(c.since)}`;
  line += ` · in ${at(c.last_in)} · out ${at(c.last_out)}`;
  if (c.last_error) line += ` · last error ${at(c.last_error_at)}: ${c.last_error}`;
  return line;
}

async function loadOverview() {
  const body = await api("/api/overview");
  $("ov-queue").textContent = `${body.queue.pending} queued · ${body.queue.running} running`;
  $("ov-approvals").textContent = String(body.approvals);
  $("ov-schedules").textContent = `${body.schedules.enabled} of ${body.schedules.total} enabled`;
  $("ov-open-cards").textContent = String(body.open_cards);
  $("ov-channels").textContent = body.channels.length
    ? body.channels.map(channelLine).join("\n")
    : "web only";
  const nodes = $("ov-nodes");
  nodes.replaceChildren();
  for (const node of body.nodes || []) {
    const agents = node.agents.includes("*") ? "all agents" : node.agents.join(", ");
    const stale = node.stale ? " · stale" : "";
    const item = el("li", "", `${node.host} · pid ${node.pid}${node.here ? " (this one)" : ""}${stale}`);
    const leases = node.leases.length ? node.leases.join(", ") : "no leases";
    item.appendChild(el("div", "meta", `${agents} · ${leases} · last heartbeat ${when(node.last_heartbeat)}`));
    nodes.appendChild(item);
  }
  if (!nodes.children.length) nodes.appendChild(el("li", "quiet-text", "No node has registered yet."));
  const goals = $("ov-goals");
  goals.replaceChildren();
  for (const goal of body.goals || []) {
    const item = el("li", "", goal.text);
    item.appendChild(el("div", "meta", `${goal.session} · ${goal.counted}/${goal.budget} turns`));
    goals.appendChild(item);
  }
  if (!goals.children.length) goals.appendChild(el("li", "quiet-text", "No goal is running."));
  const running = $("ov-running");
  running.replaceChildren();
  for (const job of body.running) {
    const item = el("li", "", `${job.kind} ${job.id}`);
    item.appendChild(el("div", "meta", `${job.agent} · ${job.session} · since ${when(job.created_at)}`));
    running.appendChild(item);
  }
  if (!body.running.length) running.appendChild(el("li", "quiet-text", "Nothing is running."));
  const errors = $("ov-errors");
  errors.replaceChildren();
  for (const job of body.errors) {
    const item = el("li", "", `${job.kind} ${job.id}: ${job.error || job.status}`);
    item.appendChild(el("div", "meta", `${job.agent} · ${when(job.updated_at)}`));
    errors.appendChild(item);
  }
  if (!body.errors.length) errors.appendChild(el("li", "quiet-text", "No errors in the last 7 days."));
  showAudit(body.audit);
}

// The security audit (habakkuk security audit): a count by severity, then each finding
// worst first with its fix.
function showAudit(audit) {
  const counts = audit ? audit.counts : {};
  const order = ["critical", "high", "medium", "low", "info"];
  $("ov-audit-counts").textContent = order
    .filter((name) => counts[name])
    .map((name) => `${counts[name]} ${name}`)
    .join(" · ");
  const list = $("ov-audit");
  list.replaceChildren();
  for (const finding of audit ? audit.findings : []) {
    const item = el("li", `audit-${finding.severity}`, `${finding.severity.toUpperCase()} ${finding.subject}: ${finding.problem}`);
    item.appendChild(el("div", "meta", `fix: ${finding.fix}`));
    list.appendChild(item);
  }
  if (!list.children.length) list.appendChild(el("li", "quiet-text", "Nothing unsafe found."));
}

// -- server-sent events over fetch (EventSource cannot send the token) ----------------------

async function readEvents(path, onEvent, signal) {
  const response = await fetch(path, { headers: authHeaders({ Accept: "text/event-stream" }), signal });
  if (response.status === 401) {
    showLogin("The token was not accepted.");
    throw new Unauthorized("unauthorized");
  }
  if (!response.ok || !response.body) throw new Error("stream failed: " + response.status);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { id: null, event: "message", data: [] };
      for (const line of frame.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (name === "data") event.data.push(text);
        else if (name === "id") event.id = text;
        else if (name === "event") event.event = text;
      }
      if (!event.data.length) continue;
      try {
        onEvent(event.event, JSON.parse(event.data.join("\n")));
      } catch (error) {
        console.error("bad event", error);
      }
    }
  }
}

function follow(name, pathFor, onEvent) {
  if (state.streams[name]) state.streams[name].abort();
  const controller = new AbortController();
  state.streams[name] = controller;
  (async () => {
    while (!controller.signal.aborted) {
      try {
        await readEvents(pathFor(), onEvent, controller.signal);
      } catch (error) {
        if (controller.signal.aborted || error instanceof Unauthorized) return;
      }
      // Reconnect after a pause; catch-up resumes after the last message seen.
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  })();
}

function stopStreams() {
  for (const controller of Object.values(state.streams)) controller.abort();
  state.streams = {};
}

// -- chat ----------------------------------------------------------------------------------

function chatPath(suffix) {
  return `/api/chat/${encodeURIComponent(state.conversation)}/${suffix}`;
}

function openChat() {
  if (state.streams.events && state.streams.live) return;
  state.lastSeq = 0;
  state.answered = new Set();
  state.streaming = null;
  $("chat-log").replaceChildren();
  for (const url of state.fileUrls) URL.revokeObjectURL(url);
  state.fileUrls = [];
  follow("events", () => chatPath(`events?after=${state.lastSeq}`), onChatEvent);
  follow("live", () => chatPath("live"), onActivity);
}

function scrollLog() {
  const log = $("chat-log");
  log.scrollTop = log.scrollHeight;
}

function onChatEvent(kind, data) {
  if (kind === "typing") {
    $("chat-typing").hidden = !data.active;
    return;
  }
  if (kind !== "message" || data.seq <= state.lastSeq) return;
  state.lastSeq = data.seq;
  if (data.role !== "user" && data.turn) {
    // The two streams are independent: the reply may come before the last pieces.
    state.answered.add(data.turn);
    if (state.streaming && state.streaming.dataset.turn === data.turn) {
      state.streaming.remove();
      state.streaming = null;
    }
  }
  let bubble;
  if (data.approval) bubble = approvalCard(data);
  else if (data.file) bubble = fileCard(data);
  else bubble = el("div", "msg " + data.role, data.text);
  if (data.role === "assistant" && state.app && state.app.speech) bubble.appendChild(readAloud(data.seq));
  bubble.dataset.seq = String(data.seq);
  $("chat-log").appendChild(bubble);
  // A card replayed or answered elsewhere (a typed "yes") learns it is no longer waiting.
  if (data.role === "notice" && document.querySelector(".approval-card.waiting")) {
    scheduleApprovalSync();
  }
  if (data.role !== "user") $("chat-typing").hidden = true;
  scrollLog();
}

// A reply read aloud (tts: in config): its audio fetched with the token, played from a blob URL.
function readAloud(seq) {
  const button = el("button", "read-aloud", "🔊");
  button.type = "button";
  button.title = "Read aloud";
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const response = await fetch(chatPath(`messages/${seq}/speech`), { headers: authHeaders() });
      if (response.status === 401) {
        showLogin("The token was not accepted.");
        return;
      }
      if (!response.ok) throw new Error(((await response.json()) || {}).error || response.statusText);
      const url = URL.createObjectURL(await response.blob());
      state.fileUrls.push(url);
      await new Audio(url).play();
    } catch (error) {
      button.title = `Could not read it aloud: ${error.message}`;
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

// -- files in the chat -------------------------------------------------------------------
// A file is served only with the token, so it is fetched with it and shown from a blob URL:
// an image inline, anything else as a link that saves it.

const INLINE_IMAGES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

function sizeText(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

async function fileBlobUrl(file) {
  const response = await fetch(file.url, { headers: authHeaders() });
  if (response.status === 401) {
    showLogin("The token was not accepted.");
    throw new Unauthorized("unauthorized");
  }
  if (!response.ok) throw new Error(response.status === 404 ? "no longer stored" : response.statusText);
  const url = URL.createObjectURL(await response.blob());
  state.fileUrls.push(url);
  return url;
}

function fileCard(data) {
  const file = data.file;
  const card = el("div", "msg file");
  card.dataset.file = file.id;
  if (data.text) card.appendChild(el("span", "file-caption", data.text));
  const label = `${file.name} (${sizeText(file.size)})`;
  if (INLINE_IMAGES.includes(file.media_type)) {
    const image = el("img");
    image.alt = file.name;
    image.title = label;
    card.appendChild(image);
    fileBlobUrl(file)
      .then((url) => { image.src = url; scrollLog(); })
      .catch((error) => { if (!(error instanceof Unauthorized)) image.replaceWith(el("span", "", `${label}: ${error.message}`)); });
    return card;
  }
  const link = el("a", "file-link", "⬇ " + label);
  link.href = "#";
  link.addEventListener("click", async (event) => {
    event.preventDefault();
    try {
      const save = el("a");
      save.href = await fileBlobUrl(file);
      save.download = file.name;
      document.body.appendChild(save);
      save.click();
      save.remove();
    } catch (error) {
      if (!(error instanceof Unauthorized)) link.textContent = `${label}: ${error.message}`;
    }
  });
  card.appendChild(link);
  return card;
}

function toolCard(id) {
  return document.querySelector(`.tool-card[data-call="${CSS.escape(id)}"]`);
}

function onActivity(kind, data) {
  if (kind !== "activity") return;
  const log = $("chat-log");
  if (data.turn && state.answered.has(data.turn)) return;
  if (data.kind === "text") {
    if (!state.streaming) {
      state.streaming = el("div", "msg assistant streaming", "");
      state.streaming.dataset.turn = data.turn;
      log.appendChild(state.streaming);
    }
    state.streaming.textContent += data.text;
  } else if (data.kind === "retry" && state.streaming) {
    state.streaming.textContent = "";
  } else if (data.kind === "tool_start") {
    // Text streamed before a tool call stays; the next text starts a new bubble.
    if (state.streaming) state.streaming.classList.remove("streaming");
    state.streaming = null;
    const card = el("details", "tool-card running");
    card.dataset.call = data.id;
    card.appendChild(el("summary", "", `⚙ ${data.tool}${data.text ? " — " + data.text : ""}`));
    card.appendChild(el("pre", "tool-input", data.input));
    log.appendChild(card);
  } else if (data.kind === "tool_done") {
    const card = toolCard(data.id);
    if (card) {
      card.classList.remove("running");
      card.classList.add(data.is_error ? "failed" : "done");
      card.appendChild(el("pre", "tool-output", data.text));
    }
  } else if (data.kind === "turn_done" || data.kind === "turn_error") {
    $("chat-typing").hidden = true;
  }
  scrollLog();
}

async function send(text, files) {
  const body = { conversation: state.conversation, text, id: randomId() };
  const agent = $("chat-agent").value;
  if (agent) body.agent = agent;
  try {
    if (files && files.length) {
      // Files go as multipart (the same POST /api/chat), which needs X-Habakkuk-Client.
      const form = new FormData();
      for (const [key, value] of Object.entries(body)) form.append(key, value);
      for (const file of files) form.append("file", file, file.name);
      await api("/api/chat", { method: "POST", body: form, headers: { "X-Habakkuk-Client": "dashboard" } });
    } else {
      await api("/api/chat", { json: body });
    }
  } catch (error) {
    if (!(error instanceof Unauthorized)) {
      $("chat-log").appendChild(el("div", "msg error", "Not sent: " + error.message));
    }
  }
}

$("chat-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = $("chat-input");
  const picker = $("chat-file");
  const text = input.value.trim();
  const files = Array.from(picker.files || []);
  if (!text && !files.length) return;
  input.value = "";
  picker.value = "";
  $("chat-files").textContent = "";
  send(text, files);
});

$("chat-file").addEventListener("change", () => {
  const names = Array.from($("chat-file").files || []).map((file) => file.name);
  $("chat-files").textContent = names.length ? "📎 " + names.join(", ") : "";
});

$("chat-input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    $("chat-form").requestSubmit();
  }
});

$("chat-new").addEventListener("click", () => send("/new"));

$("chat-conversation").addEventListener("change", () => {
  const value = $("chat-conversation").value.trim().replace(/\//g, "-");
  if (!value) return;
  state.conversation = value;
  localStorage.setItem(CONVERSATION_KEY, value);
  stopStreams();
  openChat();
});

// -- A recorded message ---------------------------------------------------------------------
// The recording goes as the "audio" part of the multipart POST /api/chat; the server
// transcribes it (transcription:) and its text is the message, shown when the reply comes.

const recording = { recorder: null, stream: null, chunks: [] };

function recordButton(on) {
  $("chat-record").textContent = on ? "■ Stop" : "🎤 Record";
  $("chat-record").classList.toggle("on", on);
}

async function startRecording() {
  try {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const recorder = new MediaRecorder(stream);
    Object.assign(recording, { recorder, stream, chunks: [] });
    recorder.addEventListener("dataavailable", (event) => {
      if (event.data.size) recording.chunks.push(event.data);
    });
    recorder.addEventListener("stop", sendRecording);
    recorder.start();
    recordButton(true);
  } catch (error) {
    $("chat-log").appendChild(el("div", "msg error", "Cannot record: " + error.message));
  }
}

function stopRecording() {
  const { recorder, stream } = recording;
  Object.assign(recording, { recorder: null, stream: null });
  recordButton(false);
  if (recorder && recorder.state !== "inactive") recorder.stop();
  if (stream) for (const track of stream.getTracks()) track.stop();
}

async function sendRecording() {
  const chunks = recording.chunks;
  recording.chunks = [];
  const type = (chunks[0] && chunks[0].type) || "audio/webm";
  const audio = new Blob(chunks, { type });
  if (!audio.size) return;
  const form = new FormData();
  form.append("conversation", state.conversation);
  form.append("id", randomId());
  const agent = $("chat-agent").value;
  if (agent) form.append("agent", agent);
  form.append("audio", audio, type.includes("ogg") ? "recording.ogg" : "recording.webm");
  try {
    await api("/api/chat", { method: "POST", body: form, headers: { "X-Habakkuk-Client": "dashboard" } });
  } catch (error) {
    if (!(error instanceof Unauthorized)) {
      $("chat-log").appendChild(el("div", "msg error", "Recording not sent: " + error.message));
    }
  }
}

$("chat-record").addEventListener("click", () => (recording.recorder ? stopRecording() : startRecording()));

// -- Live mode -------------------------------------------------------------------------------
// The page talks WebRTC to the provider itself with a client secret Habakkuk mints; the
// voice model's one tool, ask_habakkuk, and the call's transcript come back to Habakkuk
// over the oai-events data channel and POST /api/realtime/{tool,transcript,end}.

const live = { pc: null, channel: null, stream: null, audio: null, conversation: "", agent: "", lines: Promise.resolve() };

function liveState(text) {
  $("chat-live-state").textContent = text || "";
}

async function startLive() {
  const button = $("chat-live");
  button.disabled = true;
  liveState("connecting…");
  const conversation = state.conversation;
  const agent = $("chat-agent").value;
  let stream = null;
  let pc = null;
  try {
    const body = { conversation };
    if (agent) body.agent = agent;
    const secret = await api("/api/realtime/session", { json: body });
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    pc = new RTCPeerConnection();
    const audio = new Audio();
    audio.autoplay = true;
    pc.ontrack = (event) => { audio.srcObject = event.streams[0]; };
    for (const track of stream.getTracks()) pc.addTrack(track, stream);
    const channel = pc.createDataChannel("oai-events");
    channel.addEventListener("message", (event) => {
      let data;
      try {
        data = JSON.parse(event.data);
      } catch (error) {
        return;
      }
      onLiveEvent(data);
    });
    const offer = await pc.createOffer();
    await pc.setLocalDescription(offer);
    const answer = await fetch(secret.calls_url, {
      method: "POST",
      body: offer.sdp,
      headers: { Authorization: "Bearer " + secret.client_secret, "Content-Type": "application/sdp" },
    });
    if (!answer.ok) throw new Error(`the provider refused the call (${answer.status})`);
    await pc.setRemoteDescription({ type: "answer", sdp: await answer.text() });
    Object.assign(live, { pc, channel, stream, audio, conversation, agent, lines: Promise.resolve() });
    button.textContent = "■ End call";
    button.classList.add("on");
    liveState("live");
  } catch (error) {
    if (stream) stream.getTracks().forEach((track) => track.stop());
    if (pc) pc.close();
    if (!(error instanceof Unauthorized)) liveState("Live mode failed: " + error.message);
  } finally {
    button.disabled = false;
  }
}

function liveSend(event) {
  if (live.channel && live.channel.readyState === "open") live.channel.send(JSON.stringify(event));
}

// Lines are posted in the order they were said (one request after the other).
function liveLine(role, text) {
  if (!text || !text.trim()) return;
  const conversation = live.conversation;
  live.lines = live.lines
    .then(() => api("/api/realtime/transcript", { json: { conversation, lines: [{ role, text: text.trim() }] } }))
    .catch((error) => console.error("transcript", error));
}

async function liveTool(data) {
  let request = "";
  try {
    request = String(JSON.parse(data.arguments || "{}").request || "");
  } catch (error) {
    request = "";
  }
  let output;
  try {
    const body = { conversation: live.conversation, call_id: data.call_id, request };
    if (live.agent) body.agent = live.agent;
    output = (await api("/api/realtime/tool", { json: body })).output;
  } catch (error) {
    output = "Habakkuk could not be reached: " + error.message;
  }
  liveSend({ type: "conversation.item.create", item: { type: "function_call_output", call_id: data.call_id, output } });
  liveSend({ type: "response.create" });
}

function onLiveEvent(data) {
  if (data.type === "response.function_call_arguments.done" && data.name === "ask_habakkuk") {
    liveTool(data);
  } else if (data.type === "conversation.item.input_audio_transcription.completed") {
    liveLine("user", data.transcript);
  } else if (data.type === "response.output_audio_transcript.done") {
    liveLine("assistant", data.transcript);
  } else if (data.type === "error") {
    liveState("Live mode: " + ((data.error && data.error.message) || "error"));
  }
}

async function endLive() {
  const { pc, stream, audio, conversation, agent } = live;
  Object.assign(live, { pc: null, channel: null, stream: null, audio: null });
  if (stream) stream.getTracks().forEach((track) => track.stop());
  if (pc) pc.close();
  if (audio) audio.srcObject = null;
  $("chat-live").textContent = "🎙 Live";
  $("chat-live").classList.remove("on");
  liveState("");
  await live.lines;
  const body = { conversation };
  if (agent) body.agent = agent;
  try {
    await api("/api/realtime/end", { json: body });
  } catch (error) {
    if (!(error instanceof Unauthorized)) liveState("The call's transcript was not saved: " + error.message);
  }
}

$("chat-live").addEventListener("click", () => (live.pc ? endLive() : startLive()));

// -- sessions ------------------------------------------------------------------------------

async function loadSessions(query) {
  const list = $("sessions-list");
  list.replaceChildren();
  $("session-detail").replaceChildren();
  if (query) {
    const body = await api("/api/sessions?q=" + encodeURIComponent(query));
    for (const hit of body.hits) {
      const item = el("li", "clickable", hit.title || hit.session);
      item.appendChild(el("div", "snippet", hit.snippet));
      item.appendChild(el("div", "meta", `${hit.agent} · #${hit.seq} ${hit.role} · ${when(hit.at)}`));
      item.addEventListener("click", () => openSession(hit.session));
      list.appendChild(item);
    }
    if (!body.hits.length) list.appendChild(el("li", "quiet-text", "No matches."));
    return;
  }
  // The user's sessions; the box adds those of board cards and sub-agents.
  const all = $("sessions-all").checked ? "&all=1" : "";
  const body = await api("/api/sessions?limit=50" + all);
  for (const session of body.sessions) {
    const item = el("li", "clickable", session.title || session.id);
    item.appendChild(el("div", "meta", `${session.agent} · ${session.id} · ${when(session.updated_at)}`));
    item.addEventListener("click", () => openSession(session.id));
    list.appendChild(item);
  }
  if (!body.sessions.length) list.appendChild(el("li", "quiet-text", "No sessions yet."));
}

$("sessions-all").addEventListener("change", () => loadSessions($("sessions-q").value.trim()));

$("sessions-search").addEventListener("submit", (event) => {
  event.preventDefault();
  loadSessions($("sessions-q").value.trim());
});

async function openSession(id) {
  const body = await api("/api/sessions/" + encodeURIComponent(id));
  const detail = $("session-detail");
  detail.replaceChildren(el("h3", "", body.session.title || body.session.id));
  for (const message of body.messages) {
    for (const block of message.blocks) {
      if (block.type === "text") {
        detail.appendChild(el("div", "msg " + message.role, block.text));
      } else if (block.type === "tool_use") {
        const card = el("details", "tool-card");
        card.appendChild(el("summary", "", "⚙ " + block.tool));
        card.appendChild(el("pre", "", JSON.stringify(block.input, null, 2)));
        detail.appendChild(card);
      } else if (block.type === "tool_result") {
        const card = el("details", "tool-card " + (block.is_error ? "failed" : "done"));
        card.appendChild(el("summary", "", block.is_error ? "result (error)" : "result"));
        card.appendChild(el("pre", "", block.text));
        detail.appendChild(card);
      } else if (block.type === "opaque" && block.text) {
        // The provider's hosted web search or fetch, as the API's placeholder.
        detail.appendChild(el("div", "msg hosted", block.text));
      }
    }
  }
}

// -- approvals -------------------------------------------------------------------------------

async function loadApprovals() {
  const body = await api("/api/approvals");
  renderApprovals(body.approvals);
}

function renderApprovals(approvals) {
  const list = $("approvals-list");
  list.replaceChildren();
  $("approvals-empty").hidden = approvals.length > 0;
  for (const approval of approvals) {
    const item = el("li", "approval");
    item.appendChild(el("strong", "", approval.tool));
    item.appendChild(el("pre", "", approval.summary));
    if (approval.review) item.appendChild(el("div", "meta", "Reviewer: " + approval.review));
    const where = approval.to ? `chat ${approval.to.conversation}` : `session ${approval.session}`;
    item.appendChild(el("div", "meta", `${approval.agent || ""} · ${where} · since ${when(approval.since)}`));
    const actions = el("div", "approval-actions");
    const yes = el("button", "approve", "Approve");
    const always = el("button", "approve-session", "Approve for this session");
    const no = el("button", "deny", "Deny");
    yes.addEventListener("click", () => answer(approval.id, true));
    always.addEventListener("click", () => answer(approval.id, true, true));
    no.addEventListener("click", () => answer(approval.id, false));
    actions.append(yes, always, no);
    item.appendChild(actions);
    list.appendChild(item);
  }
}

// The one answer path, for the approvals view and the chat's cards: true when it counted.
// `forSession` allows the tool for the rest of the session, as the terminal's `a` does.
async function answerApproval(id, approve, forSession) {
  const json = forSession ? { approve, for_session: true } : { approve };
  try {
    await api("/api/approvals/" + encodeURIComponent(id), { json });
    return true;
  } catch (error) {
    return false; // no longer waiting (answered, timed out or the turn stopped)
  }
}

async function answer(id, approve, forSession) {
  await answerApproval(id, approve, forSession);
  loadApprovals();
  refreshBadge();
}

// -- approvals in the chat -------------------------------------------------------------------

function approvalCard(data) {
  const card = el("div", "msg notice approval-card waiting");
  card.dataset.approval = data.approval;
  card.appendChild(el("div", "approval-text", data.text.replace(/\nAnswer yes or no\.$/, "")));
  const actions = el("div", "approval-actions");
  const yes = el("button", "approve", "Approve");
  const always = el("button", "approve-session", "Approve for this session");
  const no = el("button", "deny", "Deny");
  yes.type = always.type = no.type = "button";
  const decide = async (approve, forSession) => {
    yes.disabled = always.disabled = no.disabled = true;
    const counted = await answerApproval(data.approval, approve, forSession);
    const outcome = approve ? (forSession ? "Approved for this session" : "Approved") : "Denied";
    settleCard(card, counted ? outcome : "No longer waiting");
    refreshBadge();
  };
  yes.addEventListener("click", () => decide(true, false));
  always.addEventListener("click", () => decide(true, true));
  no.addEventListener("click", () => decide(false, false));
  actions.append(yes, always, no);
  card.appendChild(actions);
  return card;
}

function settleCard(card, outcome) {
  if (!card.classList.contains("waiting")) return;
  card.classList.remove("waiting");
  card.classList.add("answered");
  const actions = card.querySelector(".approval-actions");
  if (actions) actions.replaceWith(el("div", "approval-outcome", outcome));
}

function settleApprovalCards(waiting) {
  const ids = new Set(waiting.map((approval) => approval.id));
  for (const card of document.querySelectorAll(".approval-card.waiting")) {
    if (!ids.has(card.dataset.approval)) settleCard(card, "Answered");
  }
}

let approvalSync = null;

function scheduleApprovalSync() {
  if (approvalSync) return;
  approvalSync = setTimeout(async () => {
    approvalSync = null;
    try {
      settleApprovalCards((await api("/api/approvals")).approvals);
    } catch (error) {
      /* the badge refresh tries again */
    }
  }, 200);
}

// -- start ---------------------------------------------------------------------------------

if ("serviceWorker" in navigator && window.isSecureContext) {
  navigator.serviceWorker.register("/app/sw.js", { scope: "/app/" }).catch(() => {});
}
// Once every deferred script has run (DOMContentLoaded comes after the last): the view
// the address names is loaded by its own script (schedules.js, ...), which a fast answer
// to the first call could otherwise beat.
document.addEventListener("DOMContentLoaded", () => start());
