// prov report: draws the embedded data (see crates/prov-report/src/model.rs).
// Every recorded string is put on the page with textContent, never as markup.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("prov-data").textContent);
  const sessions = data.sessions;
  const commands = data.commands;
  const n = commands.length;

  const LANE_H = 30;        // px per session lane
  const AXIS_H = 26;        // px of the time axis above the lanes
  const MAX_LANES_SHOWN = 12;
  const MIN_BOX = 2;        // px: even an instant command stays clickable
  const BOX_PAD = 4;
  const GAP_MIN = 60;       // s: idle time longer than this is shortened
  const ROW_H = 24;         // px per row of the command list
  const TICK_STEPS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30,
    60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800,
    2592000, 31536000];
  const COLORS = { ok: "#3b82c4", fail: "#d64545", unknown: "#98a2b3", sel: "#f5a524" };
  const FADED = { ok: "#cfe0f1", fail: "#f3caca", unknown: "#e4e7ec" };

  // ---------- formatting

  const pad = (v, w) => String(v).padStart(w || 2, "0");
  function fmtDate(d) { return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`; }
  function fmtTime(us) {
    const d = new Date(us / 1000);
    return `${fmtDate(d)} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }
  function fmtDur(s) {
    if (s < 1) return `${(s * 1000).toFixed(1)} ms`;
    if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }
  function fmtSize(b) {
    if (b < 1024) return `${b} B`;
    const units = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    let v = b / 1024, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
  }
  function firstLine(s) { const k = s.indexOf("\n"); return k < 0 ? s : s.slice(0, k) + " …"; }
  function ordinal(k) {
    const tens = k % 100, ones = k % 10;
    const suffix = tens >= 11 && tens <= 13 ? "th" : ones === 1 ? "st" : ones === 2 ? "nd" : ones === 3 ? "rd" : "th";
    return `${k}${suffix}`;
  }
  function cut(s, max) { return s.length <= max ? s : s.slice(0, max - 1) + "…"; }
  // For paths, whose end says more than their start.
  function cutStart(s, max) { return s.length <= max ? s : "…" + s.slice(s.length - max + 1); }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      if (k === "class") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    return e;
  }

  // ---------- time: seconds, then a compressed axis where long idle gaps are short

  const start = new Float64Array(n), end = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const c = commands[i];
    start[i] = c.start_us / 1e6;
    end[i] = Math.max(start[i], (c.end_us === null ? c.start_us : c.end_us) / 1e6);
  }
  const byStart = Array.from({ length: n }, (_, i) => i).sort((a, b) => start[a] - start[b] || a - b);

  // Segments of the axis: busy ones at 1 compressed second per second, idle
  // gaps (> GAP_MIN) at a width growing with the log of their length.
  const segT0 = [], segT1 = [], segC0 = [], segC1 = [], segGap = [];
  function gapWidth(d) { return GAP_MIN * (1 + Math.log10(d / GAP_MIN)); }
  (function buildSegments() {
    if (!n) return;
    let c = 0, s0 = start[byStart[0]], e0 = end[byStart[0]];
    const push = (t0, t1, gap) => {
      const w = gap ? gapWidth(t1 - t0) : t1 - t0;
      segT0.push(t0); segT1.push(t1); segC0.push(c); segC1.push(c + w); segGap.push(gap);
      c += w;
    };
    for (let k = 1; k < n; k++) {
      const i = byStart[k];
      if (start[i] > e0 + GAP_MIN) {
        push(s0, e0, false);
        push(e0, start[i], true);
        s0 = start[i];
        e0 = end[i];
      } else if (end[i] > e0) {
        e0 = end[i];
      }
    }
    push(s0, e0, false);
  })();
  const nSegs = segT0.length;
  const cTotal = nSegs ? segC1[nSegs - 1] : 0;
  // Last index with arr[k] <= v (0 if none).
  function lastLE(arr, v) {
    let lo = 0, hi = arr.length - 1, r = 0;
    while (lo <= hi) { const m = (lo + hi) >> 1; if (arr[m] <= v) { r = m; lo = m + 1; } else hi = m - 1; }
    return r;
  }
  function toC(t) {
    if (!nSegs) return 0;
    const k = lastLE(segT0, t);
    if (t <= segT0[k]) return segC0[k] - (segT0[k] - t);
    if (t >= segT1[k] && k === nSegs - 1) return segC1[k] + (t - segT1[k]);
    if (segGap[k]) return segC0[k] + ((t - segT0[k]) / (segT1[k] - segT0[k])) * (segC1[k] - segC0[k]);
    return segC0[k] + (t - segT0[k]);
  }
  function fromC(c) {
    if (!nSegs) return 0;
    const k = lastLE(segC0, c);
    if (c <= segC0[k]) return segT0[k] - (segC0[k] - c);
    if (c >= segC1[k] && k === nSegs - 1) return segT1[k] + (c - segC1[k]);
    if (segGap[k]) return segT0[k] + ((c - segC0[k]) / (segC1[k] - segC0[k])) * (segT1[k] - segT0[k]);
    return segT0[k] + (c - segC0[k]);
  }
  const cs = new Float64Array(n), ce = new Float64Array(n);
  for (let i = 0; i < n; i++) { cs[i] = toC(start[i]); ce[i] = toC(end[i]); }

  // Lanes: each session's commands by start, and the longest one (to find
  // the first box reaching into the view).
  const laneCmds = sessions.map(() => []);
  for (const i of byStart) laneCmds[commands[i].s].push(i);
  const laneMaxDur = laneCmds.map((idx) => idx.reduce((m, i) => Math.max(m, ce[i] - cs[i]), 0));
  const laneStarts = laneCmds.map((idx) => Float64Array.from(idx, (i) => cs[i]));

  // ---------- state

  let selected = -1;
  let matches = null; // Uint8Array of the filter's matches, null: no filter
  const canvas = document.getElementById("tl-canvas");
  const ctx = canvas.getContext("2d");
  const lanesEl = document.getElementById("lanes");
  const timelineEl = document.getElementById("timeline");
  let W = 0, H = 0, dpr = 1;
  let viewC0 = 0, scale = 1, laneScroll = 0;
  const lanesShown = Math.max(1, Math.min(sessions.length, MAX_LANES_SHOWN));
  H = AXIS_H + lanesShown * LANE_H;
  timelineEl.style.height = `${H + 2}px`;

  // At least 10 ms: a single instant command still gets a readable scale.
  function span() { return Math.max(cTotal, 0.01); }
  function fit() {
    scale = W / (span() * 1.04);
    viewC0 = -span() * 0.02;
    schedule();
  }
  function zoomAt(x, factor) {
    const c = viewC0 + x / scale;
    const minScale = W / (span() * 4), maxScale = W / 1e-4;
    scale = Math.min(maxScale, Math.max(minScale, scale * factor));
    viewC0 = c - x / scale;
    schedule();
  }
  function maxLaneScroll() { return Math.max(0, sessions.length * LANE_H - (H - AXIS_H)); }
  function scrollLanesTo(v) { laneScroll = Math.min(maxLaneScroll(), Math.max(0, v)); schedule(); }

  let pending = false;
  function schedule() {
    if (!pending) { pending = true; requestAnimationFrame(draw); }
  }

  // ---------- drawing

  const hatch = (function () {
    const p = document.createElement("canvas");
    p.width = p.height = 8;
    const g = p.getContext("2d");
    g.fillStyle = "#f2f4f7"; g.fillRect(0, 0, 8, 8);
    g.strokeStyle = "#d0d5dd"; g.beginPath(); g.moveTo(0, 8); g.lineTo(8, 0); g.stroke();
    return ctx.createPattern(p, "repeat");
  })();

  function colorOf(i) {
    const x = commands[i].exit;
    const kind = x === null ? "unknown" : x === 0 ? "ok" : "fail";
    return matches && !matches[i] ? FADED[kind] : COLORS[kind];
  }
  function tickLabel(t, step) {
    const d = new Date(Math.round(t * 1000));
    if (step >= 86400) return fmtDate(d);
    if (step >= 60) return `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    if (step >= 1) return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    return `:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }
  function firstSegInView() {
    let lo = 0, hi = nSegs - 1, r = nSegs;
    while (lo <= hi) { const m = (lo + hi) >> 1; if (segC1[m] >= viewC0) { r = m; hi = m - 1; } else lo = m + 1; }
    return r;
  }
  function laneOfY(y) { return Math.floor((y - AXIS_H + laneScroll) / LANE_H); }
  function laneY(l) { return AXIS_H + l * LANE_H - laneScroll; }
  function boxX(i) {
    const x0 = (cs[i] - viewC0) * scale;
    return [x0, Math.max(x0 + MIN_BOX, (ce[i] - viewC0) * scale)];
  }
  // First position in lane l whose box may reach into compressed time c.
  function laneFrom(l, c) {
    const st = laneStarts[l], v = c - laneMaxDur[l] - MIN_BOX / scale;
    let lo = 0, hi = st.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (st[m] < v) lo = m + 1; else hi = m; }
    return lo;
  }

  function draw() {
    pending = false;
    if (!W) return;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    const c1 = viewC0 + W / scale;
    const firstLane = Math.max(0, laneOfY(AXIS_H));
    const lastLane = Math.min(sessions.length - 1, laneOfY(H - 1));

    for (let l = firstLane; l <= lastLane; l++) {
      ctx.fillStyle = l % 2 ? "#fafbfc" : "#ffffff";
      ctx.fillRect(0, laneY(l), W, LANE_H);
    }

    // Idle gaps, then the axis over the busy stretches.
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    const step = TICK_STEPS.find((s) => s * scale >= 80) || TICK_STEPS[TICK_STEPS.length - 1];
    ctx.fillStyle = "#f6f7f9";
    ctx.fillRect(0, 0, W, AXIS_H);
    let lastLabelEnd = -Infinity;
    // The date at the left edge: the ticks show times of day only.
    if (n) {
      const left = fmtDate(new Date(fromC(viewC0) * 1000));
      ctx.fillStyle = "#1d2330";
      ctx.fillText(left, 4, AXIS_H / 2);
      lastLabelEnd = 4 + ctx.measureText(left).width;
    }
    for (let k = firstSegInView(); k < nSegs && segC0[k] <= c1; k++) {
      const x0 = (segC0[k] - viewC0) * scale, x1 = (segC1[k] - viewC0) * scale;
      if (segGap[k]) {
        if (x1 - x0 < 1) continue;
        ctx.fillStyle = hatch;
        ctx.fillRect(x0, AXIS_H, x1 - x0, H - AXIS_H);
        const label = `idle ${fmtDur(segT1[k] - segT0[k])}`;
        const w = ctx.measureText(label).width;
        if (x1 - x0 > w + 8) {
          ctx.fillStyle = "#667085";
          ctx.fillText(label, (x0 + x1 - w) / 2, AXIS_H + 10);
        }
        continue;
      }
      // A stretch after an idle gap is labelled with its start: at a wide
      // zoom the regular ticks may all fall into gaps.
      if (k > 0 && segGap[k - 1]) {
        const x = Math.max(0, (segC0[k] - viewC0) * scale);
        const d = new Date(Math.round(segT0[k] * 1000));
        const label = `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
        if (x > lastLabelEnd + 8) {
          ctx.fillStyle = "#98a2b3";
          ctx.fillRect(Math.round(x), AXIS_H - 5, 1, 5);
          ctx.fillStyle = "#1d2330";
          ctx.fillText(label, x + 2, AXIS_H / 2);
          lastLabelEnd = x + 2 + ctx.measureText(label).width;
        }
      }
      // The first and last stretches extend to the view's edges (the margins).
      const tFrom = fromC(k === 0 ? viewC0 : Math.max(segC0[k], viewC0));
      const tTo = fromC(k === nSegs - 1 ? c1 : Math.min(segC1[k], c1));
      const off = -new Date(tFrom * 1000).getTimezoneOffset() * 60;
      const j0 = Math.ceil((tFrom + off) / step);
      for (let j = j0, t = j0 * step - off; t <= tTo; j++, t = j * step - off) {
        const x = (toC(t) - viewC0) * scale;
        ctx.fillStyle = "#eaecf0";
        ctx.fillRect(Math.round(x), AXIS_H, 1, H - AXIS_H);
        const label = tickLabel(t, step);
        const w = ctx.measureText(label).width;
        if (x - w / 2 > lastLabelEnd + 8) {
          ctx.fillStyle = "#98a2b3";
          ctx.fillRect(Math.round(x), AXIS_H - 5, 1, 5);
          ctx.fillStyle = "#1d2330";
          ctx.fillText(label, x - w / 2, AXIS_H / 2);
          lastLabelEnd = x + w / 2;
        }
      }
    }
    ctx.fillStyle = "#d0d5dd";
    ctx.fillRect(0, AXIS_H - 1, W, 1);

    // Boxes. Boxes under a pixel wide that land on one already drawn are
    // skipped: with 10 000 commands at full view most are. Failed commands
    // are marked again last, in the lower third of the lane and no wider
    // than they are (1 px at least): a zoomed-out view still shows where
    // they are without turning the lane red.
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, AXIS_H, W, H - AXIS_H);
    ctx.clip();
    let drawn = 0, inView = 0;
    const failed = [];
    for (let l = firstLane; l <= lastLane; l++) {
      const idx = laneCmds[l], y = laneY(l);
      let coveredTo = -Infinity, lastColor = "";
      for (let k = laneFrom(l, viewC0); k < idx.length; k++) {
        const i = idx[k];
        if (cs[i] > c1) break;
        const [x0, x1] = boxX(i);
        if (x1 < 0) continue;
        inView++;
        const color = colorOf(i);
        if (commands[i].exit) failed.push([i, y, color]);
        if (x1 <= coveredTo && color === lastColor) continue;
        ctx.fillStyle = color;
        ctx.fillRect(x0, y + BOX_PAD, x1 - x0, LANE_H - 2 * BOX_PAD);
        drawn++;
        if (x1 - x0 > 40) {
          ctx.save();
          ctx.beginPath();
          ctx.rect(x0 + 3, y, x1 - x0 - 6, LANE_H);
          ctx.clip();
          ctx.fillStyle = "#ffffff";
          ctx.fillText(firstLine(commands[i].text[0]), Math.max(x0, 0) + 4, y + LANE_H / 2);
          ctx.restore();
        }
        coveredTo = Math.max(coveredTo, x1);
        lastColor = color;
      }
    }
    const third = (LANE_H - 2 * BOX_PAD) / 3;
    for (const [i, y, color] of failed) {
      const x0 = (cs[i] - viewC0) * scale, x1 = Math.max(x0 + 1, (ce[i] - viewC0) * scale);
      ctx.fillStyle = color;
      ctx.fillRect(x0, y + LANE_H - BOX_PAD - third, x1 - x0, third);
    }
    if (selected >= 0) {
      const l = commands[selected].s;
      const [x0, x1] = boxX(selected);
      ctx.strokeStyle = COLORS.sel;
      ctx.lineWidth = 3;
      ctx.strokeRect(x0 - 1.5, laneY(l) + BOX_PAD - 1.5, x1 - x0 + 3, LANE_H - 2 * BOX_PAD + 3);
    }
    ctx.restore();

    canvas.dataset.lanes = String(sessions.length);
    canvas.dataset.lanesShown = String(Math.max(0, lastLane - firstLane + 1));
    canvas.dataset.inView = String(inView);
    canvas.dataset.boxes = String(drawn);
    renderLanes(firstLane, lastLane);
    // Ready once the first frame is drawn (drawing waits for an animation
    // frame, which a busy machine delays past the script's end).
    if (!document.body.dataset.ready) document.body.dataset.ready = String(Math.round(performance.now()));
  }

  function renderLanes(first, last) {
    lanesEl.replaceChildren(el("div", { class: "lane", style: `top:0;height:${AXIS_H}px;line-height:${AXIS_H - 4}px` },
      `${sessions.length} session${sessions.length === 1 ? "" : "s"}`));
    for (let l = first; l <= last; l++) {
      const s = sessions[l];
      const who = `${s.user}@${s.host} · ${s.shell}`;
      const div = el("div", { class: "lane", "data-session": s.id, style: `top:${laneY(l)}px;height:${LANE_H}px`,
        title: `${who}\nsession ${s.id}\nfirst command ${fmtTime(s.start_us)}\n${s.commands} commands` },
        el("span", { class: "who" }, who), el("br"),
        el("span", { class: "when" }, `session ${s.label} · from ${fmtTime(s.start_us).slice(0, 16)} · ${s.commands} cmd`));
      lanesEl.append(div);
    }
  }

  // The command whose drawn box is at (x, y) on the canvas, -1 if none: the
  // one drawn last (on top) among those containing x, else the nearest
  // within 3 px.
  function commandAt(x, y) {
    const l = laneOfY(y);
    if (y < AXIS_H || l < 0 || l >= sessions.length) return -1;
    const yIn = y - laneY(l);
    if (yIn < BOX_PAD - 2 || yIn > LANE_H - BOX_PAD + 2) return -1;
    const c = viewC0 + x / scale, idx = laneCmds[l];
    let best = -1, bestDist = 3.0001;
    for (let k = laneFrom(l, c - 3 / scale); k < idx.length; k++) {
      const i = idx[k];
      const [x0, x1] = boxX(i);
      if (x0 > x + 3) break;
      const dist = x < x0 ? x0 - x : x > x1 ? x - x1 : 0;
      if (dist <= bestDist) { best = i; bestDist = dist; }
    }
    return best;
  }

  // ---------- timeline input

  let drag = null;
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    if (e.shiftKey) { viewC0 += (e.deltaY || e.deltaX) / scale; schedule(); return; }
    zoomAt(e.clientX - canvas.getBoundingClientRect().left, Math.exp(-e.deltaY * 0.0015));
  }, { passive: false });
  lanesEl.addEventListener("wheel", (e) => { e.preventDefault(); scrollLanesTo(laneScroll + e.deltaY); }, { passive: false });
  canvas.addEventListener("pointerdown", (e) => {
    drag = { x: e.clientX, y: e.clientY, c0: viewC0, ls: laneScroll, moved: false, id: e.pointerId };
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; canvas.classList.add("dragging"); }
    if (drag.moved) {
      viewC0 = drag.c0 - dx / scale;
      scrollLanesTo(drag.ls - dy);
    }
  });
  function endDrag(e, click) {
    if (!drag) return;
    const moved = drag.moved;
    drag = null;
    canvas.classList.remove("dragging");
    if (click && !moved) {
      const r = canvas.getBoundingClientRect();
      const i = commandAt(e.clientX - r.left, e.clientY - r.top);
      if (i >= 0) select(i, "list");
    }
  }
  canvas.addEventListener("pointerup", (e) => endDrag(e, true));
  canvas.addEventListener("pointercancel", (e) => endDrag(e, false));
  canvas.addEventListener("keydown", (e) => {
    const step = W / scale / 10;
    if (e.key === "+" || e.key === "=") zoomAt(W / 2, 1.5);
    else if (e.key === "-") zoomAt(W / 2, 1 / 1.5);
    else if (e.key === "0") fit();
    else if (e.key === "ArrowLeft") { viewC0 -= step; schedule(); }
    else if (e.key === "ArrowRight") { viewC0 += step; schedule(); }
    else if (e.key === "ArrowUp") scrollLanesTo(laneScroll - LANE_H);
    else if (e.key === "ArrowDown") scrollLanesTo(laneScroll + LANE_H);
    else return;
    e.preventDefault();
  });
  document.getElementById("zoom-in").addEventListener("click", () => zoomAt(W / 2, 2));
  document.getElementById("zoom-out").addEventListener("click", () => zoomAt(W / 2, 0.5));
  document.getElementById("zoom-fit").addEventListener("click", fit);

  function resize() {
    const w = canvas.clientWidth;
    if (!w) return;
    const first = W === 0;
    const c1 = viewC0 + W / scale;
    dpr = window.devicePixelRatio || 1;
    W = w;
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
    canvas.style.height = `${H}px`;
    if (first) fit();
    else { scale = W / (c1 - viewC0); schedule(); }
  }
  new ResizeObserver(resize).observe(timelineEl);

  // ---------- command list

  const listEl = document.getElementById("list");
  const spacer = document.getElementById("list-spacer");
  const countEl = document.getElementById("list-count");
  const newestFirst = byStart.slice().reverse();
  const showAside = document.getElementById("show-aside");
  // Housekeeping (exit, clear, prov's own commands): listed only when asked.
  const nAside = commands.reduce((k, c) => k + (c.aside ? 1 : 0), 0);
  let shown = newestFirst;
  let lower = null;

  function applyFilter(q) {
    q = q.trim().toLowerCase();
    const listed = showAside.checked || !nAside ? newestFirst : newestFirst.filter((i) => !commands[i].aside);
    if (!q) { shown = listed; matches = null; }
    else {
      lower = lower || commands.map((c) => [c.text[0].toLowerCase(), c.cwd.toLowerCase()]);
      matches = new Uint8Array(n);
      for (const i of newestFirst) matches[i] = lower[i][0].includes(q) || lower[i][1].includes(q);
      shown = listed.filter((i) => matches[i]);
    }
    const hidden = showAside.checked ? 0 : nAside;
    const total = n - hidden;
    countEl.textContent = (matches ? `${shown.length} of ${total} commands match` : `${total} commands, newest first`) +
      (hidden ? ` (${hidden} not listed: exit, clear and prov's own commands)` : "");
    spacer.style.height = `${shown.length * ROW_H}px`;
    renderList();
    schedule();
  }
  let listPending = false;
  function renderList() {
    listPending = false;
    const first = Math.max(0, Math.floor(listEl.scrollTop / ROW_H) - 2);
    const last = Math.min(shown.length, first + Math.ceil(listEl.clientHeight / ROW_H) + 5);
    const rows = [spacer];
    for (let p = first; p < last; p++) {
      const i = shown[p], c = commands[i];
      const x = c.exit === null ? "?" : String(c.exit);
      rows.push(el("div", { class: `row${i === selected ? " selected" : ""}`, role: "option", "data-id": String(c.id),
        "data-index": String(i), style: `top:${p * ROW_H}px`, title: c.cwd },
        el("span", { class: "t" }, fmtTime(c.start_us).slice(0, 19)),
        el("span", { class: `x${c.exit ? " fail" : ""}` }, x),
        firstLine(c.text[0])));
    }
    listEl.replaceChildren(...rows);
  }
  listEl.addEventListener("scroll", () => { if (!listPending) { listPending = true; requestAnimationFrame(renderList); } });
  listEl.addEventListener("click", (e) => {
    const row = e.target.closest(".row");
    if (row) select(Number(row.dataset.index), "timeline");
  });
  const filterEl = document.getElementById("filter");
  filterEl.addEventListener("input", () => applyFilter(filterEl.value));
  showAside.parentElement.hidden = !nAside;
  showAside.addEventListener("change", () => applyFilter(filterEl.value));

  // ---------- details

  const detailsEl = document.getElementById("details");

  function filePath(d, name) {
    const dir = data.dirs[d];
    return dir === "" ? name : dir.endsWith("/") ? dir + name : `${dir}/${name}`;
  }

  // A path read: a link to the entry of the command that wrote it, when
  // the report has it.
  function pathCell(path, writer) {
    if (writer === null || writer === undefined) return el("td", { class: "path" }, path);
    const w = indexOfId.get(writer);
    if (w === undefined) return el("td", { class: "path", title: `written by command ${writer}, not in this report` }, path);
    const a = el("a", { href: `#command-${writer}`, class: "writer", "data-writer": String(writer), title: `written by command ${writer}: show it` }, path);
    a.addEventListener("click", (e) => { e.preventDefault(); select(w, "both"); });
    return el("td", { class: "path" }, a);
  }

  function lineageCell(path, k) {
    if (k === null || k === undefined) {
      return el("td", { class: "lineage", title: `no recorded writer, or not looked up for this report: prov query lineage ${path}` }, "—");
    }
    const b = el("button", { type: "button", class: "show-lineage", "data-lineage": String(k), title: `Where ${path} came from` }, "lineage");
    b.addEventListener("click", () => showLineage(path, k));
    return el("td", { class: "lineage" }, b);
  }

  function fileTable(files, total, what) {
    const parts = [el("h3", {}, `Files ${what} (${total})`)];
    if (!files.length) { parts.push(el("p", { class: "more" }, "none")); return parts; }
    const body = el("tbody");
    for (const [d, name, size, mtime, hash, writer, lineage] of files) {
      const path = filePath(d, name);
      body.append(el("tr", { class: "file" },
        pathCell(path, writer),
        el("td", { class: "num", title: `${size} bytes` }, fmtSize(size)),
        el("td", { class: "num" }, fmtTime(mtime).slice(0, 19)),
        el("td", { class: "hash" }, hash === null ? "unreadable" : hash),
        lineageCell(path, lineage)));
    }
    parts.push(el("table", { class: `files ${what}` },
      el("thead", {}, el("tr", {}, el("th", {}, "path"), el("th", {}, "size"), el("th", {}, "mtime"), el("th", {}, "hash"), el("th", {}, ""))), body));
    if (total > files.length) {
      parts.push(el("p", { class: "more" },
        `and ${total - files.length} more (a report lists at most ${data.files_per_access} per command; prov query shows them all)`));
    }
    return parts;
  }

  const indexOfId = new Map(commands.map((c, i) => [c.id, i]));
  const lineagePanel = document.getElementById("lineage-panel");
  // The lineage of a file version as `prov query lineage` draws it.
  function showLineage(path, k) {
    const [tree, left] = data.lineages[k];
    const pre = el("pre", { class: "lineage" }, tree);
    if (left) pre.append(el("span", { class: "more" }, `\n… ${left} more bytes not included (prov query lineage shows it all)`));
    const close = el("button", { type: "button", class: "close" }, "close");
    close.addEventListener("click", () => { lineagePanel.hidden = true; lineagePanel.replaceChildren(); });
    lineagePanel.replaceChildren(el("h2", {}, "Lineage of ", el("code", {}, path), " ", close), pre);
    lineagePanel.dataset.path = path;
    lineagePanel.hidden = false;
    lineagePanel.scrollIntoView({ block: "nearest" });
  }

  function renderDetails(i) {
    const c = commands[i], s = sessions[c.s];
    const exit = c.exit === null ? "unknown (still running, or its end was not recorded)" : String(c.exit);
    const text = el("pre", { class: "cmd" }, c.text[0]);
    if (c.text[1]) text.append(el("span", { class: "more" }, `\n… ${c.text[1]} more bytes not included`));
    const facts = [
      ["Directory", c.cwd],
      ["Exit status", exit],
      ["Started", fmtTime(c.start_us)],
      ["Ended", c.end_us === null ? "—" : fmtTime(c.end_us)],
      ["Duration", c.end_us === null ? "—" : fmtDur((c.end_us - c.start_us) / 1e6)],
      ["Session", `${ordinal(c.seq)} command of session ${s.label} (from ${fmtTime(s.start_us).slice(0, 16)}) · ${s.user}@${s.host} · ${s.shell}`],
      ["Record", c.incomplete ? `incomplete: ${c.incomplete.map(([k, v]) => `${k} ${v}`).join(", ")}` : "complete"],
    ];
    const dl = el("dl");
    for (const [k, v] of facts) {
      dl.append(el("dt", {}, k), el("dd", { class: k === "Exit status" && c.exit ? "fail" : "", "data-field": k.toLowerCase() }, v));
    }
    const parts = [el("h2", {}, `Command ${c.id}`), text, dl,
      ...fileTable(c.w, c.n_w, "written"), ...fileTable(c.r, c.n_r, "read")];
    // The process tree, shown on click (a build's can be long).
    const procs = c.p || [];
    if (procs.length) {
      const lines = procs.map(([depth, pid, label, writes]) =>
        `${"  ".repeat(depth)}${pid}  ${label}${writes ? `  (wrote ${writes})` : ""}`);
      const pre = el("pre", { class: "procs" }, lines.join("\n"));
      if (c.n_p > procs.length) pre.append(el("span", { class: "more" }, `\n… ${c.n_p - procs.length} more (prov query processes ${c.id})`));
      parts.push(el("details", { class: "processes" }, el("summary", {}, `Processes (${c.n_p})`), pre));
    }
    // The environment and the programs' versions, shown on click.
    const envLines = c.env === undefined ? [] : data.envs[c.env];
    if (envLines.length || (c.x || []).length) {
      const lines = [...envLines, ...(c.x || []).map((x) => `program: ${x}`)];
      parts.push(el("details", { class: "environment" }, el("summary", {}, "Environment"), el("pre", {}, lines.join("\n"))));
    }
    const scripts = c.scripts || [];
    parts.push(el("h3", {}, `Archived scripts (${scripts.length})`));
    if (!scripts.length) parts.push(el("p", { class: "more" }, "none"));
    for (const [path, k] of scripts) {
      const [body, left] = data.scripts[k];
      const pre = el("pre", {}, body);
      if (left) pre.append(el("span", { class: "more" }, `\n… ${left} more bytes not included`));
      parts.push(el("details", { class: "script" }, el("summary", {}, path), pre));
    }
    detailsEl.replaceChildren(...parts);
    detailsEl.dataset.command = String(c.id);
  }

  // `reveal`: which other view to bring the command into ("list", "timeline", "both").
  function select(i, reveal) {
    selected = i;
    renderDetails(i);
    if (reveal === "list" || reveal === "both") {
      const p = shown.indexOf(i);
      if (p >= 0 && (p * ROW_H < listEl.scrollTop || (p + 1) * ROW_H > listEl.scrollTop + listEl.clientHeight)) {
        listEl.scrollTop = p * ROW_H - listEl.clientHeight / 2;
      }
    }
    if (reveal === "timeline" || reveal === "both") {
      const viewW = W / scale;
      if (ce[i] < viewC0 || cs[i] > viewC0 + viewW) viewC0 = cs[i] - viewW / 2;
      const y = commands[i].s * LANE_H;
      if (y < laneScroll || y + LANE_H > laneScroll + H - AXIS_H) scrollLanesTo(y - (H - AXIS_H) / 2);
    }
    renderList();
    schedule();
  }

  // ---------- charts

  function chart(id, bars, onClick, keepEnd) {
    const fig = document.getElementById(id);
    if (!bars.length) { fig.append(el("p", { class: "none" }, "nothing recorded")); return; }
    // Percentages: the bars scale with the figure, the text does not.
    const rowH = 22, labelW = 50, barW = 38;
    const max = bars.reduce((m, b) => Math.max(m, b.count), 1);
    const s = svg("svg", { height: bars.length * rowH, role: "img" });
    bars.forEach((b, k) => {
      const g = svg("g", { class: `bar-row${onClick ? " clickable" : ""}`, transform: `translate(0 ${k * rowH})` });
      const title = svg("title"); title.textContent = `${b.label}: ${b.count}`;
      const w = Math.max(0.5, (b.count / max) * barW);
      const label = svg("text", { x: 0, y: rowH / 2 + 4 }); label.textContent = (keepEnd ? cutStart : cut)(firstLine(b.label), 28);
      const bar = svg("rect", { class: "bar", x: `${labelW}%`, y: 3, height: rowH - 6, width: `${w}%` });
      const count = svg("text", { class: "n", x: `${labelW + w}%`, dx: 4, y: rowH / 2 + 4 });
      count.textContent = String(b.count);
      g.append(title, label, bar, count);
      if (onClick) g.addEventListener("click", () => onClick(b));
      s.append(g);
    });
    fig.append(s);
  }
  chart("chart-writes", data.charts.writes, (b) => select(b.command, "both"));
  chart("chart-sessions", data.charts.sessions, (b) => scrollLanesTo(b.session * LANE_H));
  chart("chart-dirs", data.charts.dirs, null, true);

  // ---------- start

  document.title = data.title || "prov report";
  document.getElementById("title").textContent = data.title || "prov report";
  const summary = [`${n} command${n === 1 ? "" : "s"} in ${sessions.length} session${sessions.length === 1 ? "" : "s"}`];
  if (n) summary.push(`${fmtTime(commands[byStart[0]].start_us).slice(0, 16)} to ${fmtTime(commands[byStart[n - 1]].start_us).slice(0, 16)}`);
  if (data.description) summary.push(data.description);
  summary.push(`made ${fmtTime(data.generated_us).slice(0, 19)}`);
  document.getElementById("summary").textContent = summary.join(" · ");
  applyFilter("");
  resize();

  // For tests and the curious: positions of boxes, hit tests, selection.
  window.provReport = {
    commands: n,
    sessions: sessions.length,
    indexOf: (id) => commands.findIndex((c) => c.id === id),
    boxCenter(id) {
      const i = this.indexOf(id);
      if (i < 0) return null;
      const [x0, x1] = boxX(i);
      return { x: (Math.max(x0, 0) + Math.min(x1, W)) / 2, y: laneY(commands[i].s) + LANE_H / 2 };
    },
    commandAt(x, y) { const i = commandAt(x, y); return i < 0 ? null : commands[i].id; },
    select(id) { select(this.indexOf(id), "both"); },
    fit,
    redraw: draw,
  };
})();
