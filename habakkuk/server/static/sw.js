// Caches only the dashboard's static shell; API responses are never cached.
const CACHE = "habakkuk-shell-v11";
const SHELL = [
  "/app/", "/app/app.js", "/app/views.js", "/app/memory.js", "/app/skills.js", "/app/schedules.js", "/app/board.js", "/app/usage.js", "/app/config.js", "/app/node.js", "/app/nodes.js", "/app/app.css", "/app/manifest.webmanifest",
  "/app/icon.svg", "/app/icon-180.png", "/app/icon-192.png", "/app/icon-512.png",
];

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(CACHE).then((cache) => cache.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches.keys()
      .then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== "GET" || url.origin !== self.location.origin || !SHELL.includes(url.pathname)) {
    return; // the network answers everything else, uncached
  }
  // Network first so an upgrade shows at once; the cache serves when offline.
  event.respondWith(
    fetch(event.request)
      .then((response) => {
        const copy = response.clone();
        caches.open(CACHE).then((cache) => cache.put(event.request, copy));
        return response;
      })
      .catch(() => caches.match(event.request)),
  );
});
