// Habakkuk dashboard: the device nodes view (GET /api/nodes, POST /api/nodes/pair,
// DELETE /api/nodes/NAME), and this browser as a node (node.js): the dashboard pairs it
// with a fresh code and, once paired, serves its invokes whenever the dashboard is open.
// Uses api(), el() and $ from app.js and the helpers of views.js. Text only ever goes
// in textContent.
"use strict";

const nodesError = viewError("nodes");

function seenText(at) {
  const seconds = Math.max(0, Date.now() / 1000 - at);
  if (seconds < 90) return `${Math.round(seconds)}s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)}m ago`;
  if (seconds < 129600) return `${Math.round(seconds / 3600)}h ago`;
  return `${Math.round(seconds / 86400)}d ago`;
}

async function loadNodes() {
  nodesError(null);
  try {
    const body = await api("/api/nodes");
    renderNodes(body.nodes);
  } catch (error) {
    nodesError(error);
  }
}

function renderNodes(nodes) {
  const list = $("nodes-list");
  list.replaceChildren();
  for (const node of nodes) {
    const item = el("li", "node-item");
    item.dataset.name = node.name;
    item.appendChild(el("strong", "", node.name));
    item.appendChild(el("span", "quiet-text", ` ${node.platform || "?"} · `));
    item.appendChild(el("span", node.online ? "node-online" : "node-offline",
      node.online ? "online" : `offline, seen ${seenText(node.last_seen)}`));
    item.appendChild(el("div", "small", node.caps.join(", ") || "offers nothing"));
    item.appendChild(actionButton("Revoke", "quiet node-revoke", async () => {
      try {
        await api("/api/nodes/" + encodeURIComponent(node.name), { method: "DELETE" });
        await loadNodes();
      } catch (error) {
        nodesError(error);
      }
    }));
    list.appendChild(item);
  }
  if (!nodes.length) list.appendChild(el("li", "quiet-text", "No device is paired yet."));
}

async function newPairingCode() {
  nodesError(null);
  try {
    const body = await api("/api/nodes/pair", { json: {} });
    const link = `${location.origin}/app/pair.html#${body.code}`;
    $("nodes-code").textContent = body.code;
    $("nodes-link").textContent = link;
    $("nodes-link").href = link;
    const minutes = Math.max(1, Math.round((body.expires - Date.now() / 1000) / 60));
    $("nodes-expires").textContent = `works once, for ${minutes} min`;
    $("nodes-pairing").hidden = false;
    return body.code;
  } catch (error) {
    nodesError(error);
    return null;
  }
}

function browserNodeStatus(text) {
  $("nodes-browser-status").textContent = text;
}

// Pair this browser as a node named in #nodes-browser-name, offering what is ticked.
async function pairThisBrowser(event) {
  event.preventDefault();
  nodesError(null);
  const caps = [];
  if ($("nodes-browser-notify").checked) caps.push("system.notify");
  if ($("nodes-browser-location").checked) caps.push("location.get");
  if ($("nodes-browser-camera").checked) caps.push("camera.snap");
  try {
    await HabakkukNode.permit(caps);
    const body = await api("/api/nodes/pair", { json: {} });
    const node = await HabakkukNode.pair(body.code, $("nodes-browser-name").value.trim(), caps);
    HabakkukNode.start(node, browserNodeStatus);
    await loadNodes();
  } catch (error) {
    nodesError(error);
  }
}

// Called once the dashboard has started: a browser paired before serves again.
function startBrowserNode() {
  const saved = HabakkukNode.saved();
  if (saved) HabakkukNode.start(saved, browserNodeStatus);
}

$("nodes-new-code").addEventListener("click", newPairingCode);
$("nodes-reload").addEventListener("click", loadNodes);
$("nodes-browser-form").addEventListener("submit", pairThisBrowser);
