(function (op, arg, cfg) {
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) return false;
    const s = getComputedStyle(el);
    return s.visibility !== 'hidden' && s.display !== 'none' && s.opacity !== '0';
  };
  const cut = (sel) => { try { return Array.from(document.querySelectorAll(sel)); } catch (e) { return []; } };
  const regions = () => cut(cfg.captions).concat(cut(cfg.chat));
  const inside = (el, list) => list.some((r) => r.contains(el));
  const clickable = 'button, a[href], [role=button], [role=menuitem], [role=menuitemcheckbox], [role=switch], [role=tab], [role=checkbox]';
  const labelOf = (el) => {
    let label = (el.getAttribute('aria-label') || el.innerText || el.textContent || '').trim().replace(/\s+/g, ' ');
    const role = el.getAttribute('role');
    const state = el.getAttribute('aria-checked') || el.getAttribute('aria-pressed');
    if ((role === 'switch' || role === 'menuitemcheckbox' || el.hasAttribute('aria-pressed')) && state) {
      label += state === 'true' ? ' [on]' : ' [off]';
    }
    return label;
  };
  const fieldLabel = (el) => {
    let label = el.getAttribute('aria-label') || el.getAttribute('placeholder') || '';
    if (!label && el.id) { const l = document.querySelector('label[for="' + el.id + '"]'); if (l) label = l.innerText; }
    if (!label && el.closest('label')) label = el.closest('label').innerText;
    return label.trim().replace(/\s+/g, ' ');
  };
  const controls = () => { const cutOut = regions(); return Array.from(document.querySelectorAll(clickable)).filter((el) => visible(el) && !inside(el, cutOut)); };
  const fields = () => Array.from(document.querySelectorAll('input:not([type=hidden]):not([type=checkbox]), textarea, [contenteditable=true]')).filter(visible);
  if (op === 'probe') {
    const cutOut = regions();
    const clone = document.body ? document.body.cloneNode(true) : null;
    let text = '';
    if (clone) {
      const originals = Array.from(document.body.querySelectorAll('*'));
      const copies = Array.from(clone.querySelectorAll('*'));
      originals.forEach((el, i) => { if (cutOut.includes(el) && copies[i]) copies[i].setAttribute('data-hbk-cut', '1'); });
      clone.querySelectorAll('[data-hbk-cut], script, style').forEach((el) => el.remove());
      document.body.appendChild(clone); clone.style.position = 'absolute'; clone.style.left = '-100000px';
      text = clone.innerText; clone.remove();
    }
    return {
      title: document.title,
      text: text.replace(/[ \t]+/g, ' ').slice(0, 20000),
      buttons: controls().map(labelOf).filter(Boolean).slice(0, 300),
      fields: fields().map(fieldLabel).slice(0, 50),
      captions: cut(cfg.captions).length > 0,
    };
  }
  if (op === 'find') {
    const re = new RegExp(arg, 'i');
    const found = controls().reverse().find((el) => re.test(labelOf(el)));
    if (!found) return null;
    found.scrollIntoView({block: 'center', inline: 'center'});
    const r = found.getBoundingClientRect();
    return {x: r.left + r.width / 2, y: r.top + r.height / 2, label: labelOf(found)};
  }
  if (op === 'focus') {
    const re = new RegExp(arg, 'i');
    const found = fields().find((el) => re.test(fieldLabel(el)));
    if (!found) return false;
    found.focus();
    if ('value' in found) { found.select(); } else { document.getSelection().selectAllChildren(found); }
    return true;
  }
  if (op === 'observe') {
    if (window.__hbkObserver) return true;
    if (typeof window[cfg.binding] !== 'function') return false;
    let next = 1; let pending = false;
    const ids = new WeakMap(); const last = new Map();
    const flush = () => {
      pending = false;
      const changed = []; const seen = new Set();
      for (const root of cut(cfg.captions)) {
        let blocks = [];
        try { blocks = Array.from(root.querySelectorAll(cfg.block)); } catch (e) { blocks = Array.from(root.children); }
        for (const b of blocks) {
          if (!ids.has(b)) ids.set(b, next++);
          const id = ids.get(b); seen.add(id);
          const lines = (b.innerText || '').split('\n').map((s) => s.trim()).filter(Boolean);
          const speaker = lines.length > 1 ? lines[0] : '';
          const text = (lines.length > 1 ? lines.slice(1) : lines).join(' ');
          const key = speaker + '\u0000' + text;
          if (last.get(id) !== key) { last.set(id, key); changed.push({id: id, speaker: speaker, text: text}); }
        }
      }
      const removed = [];
      for (const id of Array.from(last.keys())) { if (!seen.has(id)) { last.delete(id); removed.push(id); } }
      if (changed.length || removed.length) window[cfg.binding](JSON.stringify({changed: changed, removed: removed}));
    };
    const observer = new MutationObserver(() => { if (!pending) { pending = true; setTimeout(flush, 200); } });
    observer.observe(document.body, {subtree: true, childList: true, characterData: true});
    window.__hbkObserver = observer;
    flush();
    return true;
  }
  return null;
})
