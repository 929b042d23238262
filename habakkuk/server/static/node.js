// A browser as a device node (spec 000 "Device nodes"): the invokes arrive as server-sent
// events at GET /nodes/events and each result is posted to POST /nodes/result. A browser
// cannot set headers on an EventSource, so the stream is read with fetch. The node's name
// and secret live in this browser's localStorage; a Web Lock keeps one tab as the node.
"use strict";

const NODE_KEY = "habakkuk.node";

const HabakkukNode = {
  saved() {
    try { return JSON.parse(localStorage.getItem(NODE_KEY) || "null"); } catch { return null; }
  },

  save(node) { localStorage.setItem(NODE_KEY, JSON.stringify(node)); },

  forget() { localStorage.removeItem(NODE_KEY); },

  // Pair with a one-time code: the secret comes back once and stays in this browser.
  async pair(code, name, caps) {
    const response = await fetch("/nodes/pair", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ code, name, platform: "browser", caps }),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.error || `pairing failed (${response.status})`);
    const node = { name: body.name, secret: body.secret, caps };
    this.save(node);
    return node;
  },

  headers(node) {
    return { "X-Habakkuk-Node": node.name, Authorization: `Bearer ${node.secret}` };
  },

  // Ask for the permissions the ticked capabilities need, while the user is here.
  async permit(caps) {
    if (caps.includes("system.notify") && "Notification" in window) {
      await Notification.requestPermission();
    }
  },

  async notify(args) {
    const title = args.title || "Habakkuk";
    const options = { body: args.body || "" };
    if ("serviceWorker" in navigator) {
      const registration = await navigator.serviceWorker.getRegistration("/app/");
      if (registration) { await registration.showNotification(title, options); return { text: "notified" }; }
    }
    if (!("Notification" in window) || Notification.permission !== "granted") {
      throw new Error("notifications are not allowed in this browser");
    }
    new Notification(title, options);
    return { text: "notified" };
  },

  location() {
    return new Promise((resolve, reject) => {
      navigator.geolocation.getCurrentPosition(
        (pos) => resolve({ text: JSON.stringify({
          latitude: pos.coords.latitude, longitude: pos.coords.longitude,
          accuracy_m: pos.coords.accuracy, at: new Date(pos.timestamp).toISOString(),
        }) }),
        (err) => reject(new Error(err.message || "location refused")),
        { enableHighAccuracy: true, timeout: 20000 },
      );
    });
  },

  async camera() {
    const stream = await navigator.mediaDevices.getUserMedia({ video: true });
    try {
      const video = document.createElement("video");
      video.srcObject = stream;
      video.muted = true;
      await video.play();
      const canvas = document.createElement("canvas");
      canvas.width = video.videoWidth;
      canvas.height = video.videoHeight;
      canvas.getContext("2d").drawImage(video, 0, 0);
      const blob = await new Promise((resolve) => canvas.toBlob(resolve, "image/jpeg", 0.85));
      const bytes = new Uint8Array(await blob.arrayBuffer());
      let binary = "";
      for (let i = 0; i < bytes.length; i += 0x8000) {
        binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
      }
      return { text: "camera snapshot", files: [{ name: "camera.jpg", data: btoa(binary) }] };
    } finally {
      stream.getTracks().forEach((track) => track.stop());
    }
  },

  async run(command, args) {
    if (command === "system.notify") return this.notify(args);
    if (command === "location.get") return this.location();
    if (command === "camera.snap") return this.camera();
    throw new Error(`this browser does not offer ${command}`);
  },

  async answer(node, invoke) {
    let result;
    try {
      result = await this.run(invoke.command, invoke.args || {});
    } catch (err) {
      result = { error: String(err.message || err) };
    }
    await fetch("/nodes/result", {
      method: "POST",
      headers: { "Content-Type": "application/json", ...this.headers(node) },
      body: JSON.stringify({ id: invoke.id, result }),
    });
  },

  // Hold the stream, reconnecting with jittered backoff, until the server refuses the node
  // (401: revoked or paired again) or `stopped()` says so. `say(text)` reports the state.
  async serve(node, say, stopped = () => false) {
    let backoff = 1000;
    while (!stopped()) {
      const began = Date.now();
      try {
        const response = await fetch("/nodes/events", {
          headers: { ...this.headers(node), "X-Habakkuk-Caps": node.caps.join(","),
            "X-Habakkuk-Platform": "browser" },
        });
        if (response.status === 401) { say("refused: this browser is no longer paired"); this.forget(); return; }
        if (!response.ok) throw new Error(`status ${response.status}`);
        say(`connected as ${node.name}; offering ${node.caps.join(", ") || "nothing"}`);
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let event = "message";
            const data = [];
            for (const line of frame.split("\n")) {
              if (line.startsWith("event:")) event = line.slice(6).trim();
              else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
            }
            if (event === "invoke") this.answer(node, JSON.parse(data.join("\n")));
            if (event === "closed") { say("cut off by the server"); this.forget(); return; }
          }
        }
      } catch (err) {
        say(`disconnected (${err.message || err}); retrying`);
      }
      if (Date.now() - began > 60000) backoff = 1000;
      await new Promise((resolve) => setTimeout(resolve, backoff * (0.5 + Math.random() / 2)));
      backoff = Math.min(backoff * 2, 60000);
    }
  },

  // Serve as this browser's node in one tab only (a Web Lock), when the browser has them.
  start(node, say) {
    if (navigator.locks) {
      navigator.locks.request("habakkuk-node", () => this.serve(node, say));
    } else {
      this.serve(node, say);
    }
  },
};

window.HabakkukNode = HabakkukNode;
