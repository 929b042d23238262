const fs = require('fs');
const path = require('path');

function walk(dir, total = {}) {
  for (const name of fs.readdirSync(dir)) {
    const p = path.join(dir, name);
    if (fs.statSync(p).isDirectory()) walk(p, total);
    else if (p.endsWith('.ts')) total[dir] = (total[dir] || 0) + fs.readFileSync(p, 'utf8').split('\n').length;
  }
  return total;
}
console.log(walk('src'));
