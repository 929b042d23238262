// /app/pair.html: pair this browser as a device node with the code in the address
// (#CODE, from the QR code `habakkuk node pair` prints), then serve as the node.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);

  function showPaired(node) {
    $("pair").hidden = true;
    $("paired").hidden = false;
    const say = (text) => { $("paired-status").textContent = text; };
    say(`paired as ${node.name}; connecting…`);
    HabakkukNode.start(node, say);
  }

  $("pair-code").value = decodeURIComponent(location.hash.slice(1));
  $("pair-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    $("pair-error").textContent = "";
    const caps = [];
    if ($("cap-notify").checked) caps.push("system.notify");
    if ($("cap-location").checked) caps.push("location.get");
    if ($("cap-camera").checked) caps.push("camera.snap");
    try {
      await HabakkukNode.permit(caps);
      const node = await HabakkukNode.pair($("pair-code").value.trim(), $("pair-name").value.trim(), caps);
      history.replaceState(null, "", location.pathname); // the used code leaves the address
      showPaired(node);
    } catch (err) {
      $("pair-error").textContent = String(err.message || err);
    }
  });
  $("unpair-button").addEventListener("click", () => {
    HabakkukNode.forget();
    location.reload();
  });

  const saved = HabakkukNode.saved();
  if (saved) showPaired(saved);
})();
