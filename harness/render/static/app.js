"use strict";
// compat's published table: filter, sort, per-card memory charts, evidence. Every string from a
// record is untrusted (error text comes from logs): it only ever goes into textContent or an SVG
// text node, never into innerHTML, and links are made only from https:// addresses.
(function () {
  const DATA = JSON.parse(document.getElementById("compat-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const FILTERS = ["run", "hardware", "stack", "model", "precision", "quantization", "method", "strategy", "outcome"];
  const FIGURES = { rss: "peak RSS", allocated: "torch max allocated", reserved: "torch max reserved", nvml_used: "NVML peak used" };
  const rows = DATA.rows;
  // measurement runs (size sweeps, fit calibration) are their own section of the table: a filter value
  for (const r of rows) r.run = r.measurement ? "measurement run" : "feature check";
  const PAGE = 1000;  // rows listed at a time: a page of 100k rows stays quick to open and to filter
  const state = { sort: "cell", dir: 1, selected: null, limit: PAGE };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }
  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function link(url, text) {
    if (typeof url === "string" && /^https:\/\//.test(url)) {
      return el("a", { href: url, rel: "noopener noreferrer" }, text || url);
    }
    return document.createTextNode(text || String(url));
  }
  // A record's own address (its CI run) is a link only to a forge or CI service, parsed as the
  // browser parses it: https://github.com@evil.example/ is evil.example's, and stays text.
  const RECORD_LINK_HOSTS = ["github.com", "gitlab.com", "codeberg.org", "bitbucket.org", "dev.azure.com", "app.circleci.com", "buildkite.com"];
  function recordLink(url, text) {
    let host = "";
    try { host = new URL(url).hostname; } catch (e) { host = ""; }
    const allowed = /^https:\/\//.test(String(url)) && RECORD_LINK_HOSTS.some((h) => host === h || host.endsWith("." + h));
    return allowed ? link(url, text) : document.createTextNode(String(url));
  }
  function maxOf(values, floor) {  // Math.max(...values) overflows the call stack past ~100k values
    let m = floor;
    for (const v of values) if (v > m) m = v;
    return m;
  }
  function mib(n) { return n ? Math.round(n / 1048576).toLocaleString("en-US") + " MiB" : "—"; }
  function badge(outcome) { return el("span", { class: "badge o-" + outcome }, outcome); }

  // -- filters -------------------------------------------------------------------------------
  const form = document.getElementById("filters");
  for (const f of FILTERS) {
    const values = [...new Set(rows.map((r) => String(r[f])))].sort();
    const select = el("select", { id: "filter-" + f, "data-filter": f }, el("option", { value: "" }, "all"));
    for (const v of values) select.append(el("option", { value: v }, v + " (" + rows.filter((r) => String(r[f]) === v).length + ")"));
    form.append(el("label", {}, f, select));
  }
  const search = el("input", { type: "search", id: "filter-text", placeholder: "cell, error, runner…" });
  form.append(el("label", {}, "text", search));
  const onlyConflicts = el("input", { type: "checkbox", id: "filter-conflicts" });
  form.append(el("label", { class: "check" }, onlyConflicts, "conflicts only"));
  const clearPick = el("button", { type: "button", id: "picked-clear" }, "show all");
  const pickedNote = el("span", { id: "picked-note", class: "muted" }, el("span", {}, ""), clearPick);
  pickedNote.hidden = true;
  form.append(pickedNote);
  clearPick.addEventListener("click", () => { pickedArch = ""; pickedNote.hidden = true; render(); });

  function current() {
    const want = {};
    for (const f of FILTERS) want[f] = document.getElementById("filter-" + f).value;
    return { want, text: search.value.trim().toLowerCase(), conflicts: onlyConflicts.checked };
  }
  let pickedArch = "";  // a card chosen in the picker: the cell list shows its architecture's rows
  function matches(r, q) {
    for (const f of FILTERS) if (q.want[f] && String(r[f]) !== q.want[f]) return false;
    if (pickedArch && String(r.hardware).split(" ")[0] !== pickedArch) return false;
    if (q.conflicts && !r.conflict) return false;
    if (q.text) {
      const hay = [r.cell, r.runner, r.error, r.reason, (r.known_issues || []).join(" ")].join(" ").toLowerCase();
      if (!hay.includes(q.text)) return false;
    }
    return true;
  }

  // -- the table -----------------------------------------------------------------------------
  const tbody = document.querySelector("#cells tbody");
  const SORTS = {
    cell: (r) => r.cell, hardware: (r) => r.hardware, stack: (r) => r.stack, outcome: (r) => r.outcome,
    peak: (r) => r.peak || 0, date: (r) => r.date, runner: (r) => r.runner,
  };
  for (const th of document.querySelectorAll("#cells th[data-sort]")) {
    th.classList.add("sortable");
    th.addEventListener("click", () => {
      const k = th.getAttribute("data-sort");
      state.dir = state.sort === k ? -state.dir : 1;
      state.sort = k;
      render();
    });
  }

  function memoryBars(r, scale) {
    const cards = r.cards.filter((c) => c.peak);
    const h = 9, gap = 3, width = 140;
    const box = svg("svg", { width: width + 70, height: Math.max(1, cards.length) * (h + gap), class: "mem", role: "img" });
    cards.forEach((c, i) => {
      const w = Math.max(1, Math.round((c.peak / scale) * width));
      const bar = svg("rect", { x: 0, y: i * (h + gap), width: w, height: h, class: "bar-" + c.peak_what });
      bar.append(svg("title", {}, c.card + ": " + mib(c.peak) + " " + FIGURES[c.peak_what]));
      box.append(bar);
      box.append(svg("text", { x: w + 4, y: i * (h + gap) + h - 1 }, mib(c.peak)));
    });
    box.append(svg("title", {}, cards.map((c) => c.card + ": " + mib(c.peak) + " " + FIGURES[c.peak_what]).join("\n") || "no memory figures"));
    return box;
  }

  function render() {
    const q = current();
    const shown = rows.filter((r) => matches(r, q));
    const key = SORTS[state.sort];
    shown.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : a.cell < b.cell ? -1 : 1) * state.dir);
    for (const th of document.querySelectorAll("#cells th[data-sort]")) {
      th.setAttribute("aria-sort", th.getAttribute("data-sort") === state.sort ? (state.dir > 0 ? "ascending" : "descending") : "none");
    }
    const scale = maxOf(shown.map((r) => r.peak || 0), 1);
    const listed = shown.slice(0, state.limit);
    tbody.replaceChildren();
    for (const r of listed) {
      const outcome = el("td", {}, badge(r.outcome));
      if (r.conflict) outcome.append(" ", el("span", { class: "badge conflict", title: "runners disagree" }, "conflict"));
      if (r.agreement && r.agreement.status === "differs") {
        outcome.append(" ", el("span", { class: "badge differs", title: "its losses part from " + r.agreement.reference + "'s on this cell" },
          "≠ " + r.agreement.reference + " from step " + r.agreement.parted_at_step));
      }
      const tr = el("tr", { "data-id": r.id, "data-outcome": r.outcome, "data-hardware": r.hardware },
        el("td", { class: "mono" }, r.cell),
        el("td", {}, r.hardware),
        el("td", {}, r.stack),
        outcome,
        el("td", {}, memoryBars(r, scale)),
        el("td", { class: "mono" }, r.loss ? r.loss[0].toFixed(3) + " → " + r.loss[1].toFixed(3) : "—"),
        el("td", {}, r.date.slice(0, 10)),
        el("td", {}, r.runner),
        el("td", { class: "error" }, r.error || r.reason || "", ...(r.known_issues || []).map((k) => el("div", { class: "muted" }, "known issue: " + k))));
      if (state.selected === r.id) tr.classList.add("selected");
      tr.addEventListener("click", () => { state.selected = r.id; render(); showDetail(r); });
      tbody.append(tr);
    }
    const note = document.getElementById("shown");
    if (listed.length === shown.length) {
      note.textContent = shown.length + " of " + rows.length + " rows shown";
    } else {
      const more = el("button", { id: "more", type: "button" }, "list " + Math.min(PAGE, shown.length - listed.length) + " more");
      more.addEventListener("click", () => { state.limit += PAGE; render(); });
      note.replaceChildren(listed.length + " of " + shown.length + " matching rows listed (" + rows.length + " rows in all) ", more);
    }
    outcomeChart(shown);
    writeHash(q);
  }

  // -- outcome chart: one stacked bar per stack, for the rows shown ---------------------------
  function outcomeChart(shown) {
    const box = document.getElementById("outcome-chart");
    box.replaceChildren();
    const stacks = [...new Set(shown.map((r) => r.stack))].sort();
    const outcomes = DATA.outcomes;
    const barW = 150, rowH = 18, left = 90;
    box.setAttribute("width", left + barW + 180);
    box.setAttribute("height", Math.max(1, stacks.length) * rowH + 4);
    stacks.forEach((s, i) => {
      const mine = shown.filter((r) => r.stack === s);
      box.append(svg("text", { x: 0, y: i * rowH + 12 }, s));
      let x = left;
      for (const o of outcomes) {
        const n = mine.filter((r) => r.outcome === o).length;
        if (!n) continue;
        const w = (n / mine.length) * barW;
        const seg = svg("rect", { x: x, y: i * rowH + 2, width: w, height: rowH - 5, class: "seg-" + o });
        seg.append(svg("title", {}, s + ": " + n + " " + o));
        box.append(seg);
        x += w;
      }
      const counts = outcomes.map((o) => [o, mine.filter((r) => r.outcome === o).length]).filter(([, n]) => n);
      box.append(svg("text", { x: left + barW + 6, y: i * rowH + 12 }, counts.map(([o, n]) => n + " " + o).join(", ")));
    });
  }

  // -- one record's evidence and per-card memory --------------------------------------------
  function showDetail(r) {
    const box = document.getElementById("detail");
    box.hidden = false;
    const dl = el("dl", {});
    const add = (k, ...v) => dl.append(el("dt", {}, k), el("dd", {}, ...v));
    add("evidence", el("span", { class: "kind measured" }, "measured"), " record ", el("code", {}, r.id), " on ", r.date);
    add("runner", r.runner, ...(r.ci_run ? [" · ", recordLink(r.ci_run, "CI run")] : []));
    add("evidence", "measured " + r.measured);
    add("hardware", r.hardware);
    for (const p of r.provenance || []) add("merged from", p.file + ":" + p.line + " (sha256 " + p.sha256.slice(0, 12) + "…) on " + p.merged_at);
    add("versions", Object.entries(r.versions).map(([k, v]) => k + " " + v).join(", ") + ", python " + r.python);
    add("axes", ["model " + r.model, "precision " + r.precision, "quantization " + r.quantization, "method " + r.method, "strategy " + r.strategy,
      "ranks " + r.ranks, "gradient checkpointing " + (r.grad_ckpt ? "on" : "off")].join(", "));
    if (r.eval) add("eval loss", r.eval[0].toFixed(3) + " → " + r.eval[1].toFixed(3));
    add("duration", r.duration + " s");
    if (r.log) add("log", el("code", {}, r.log));
    if (r.reason) add("reason", r.reason);
    if (r.conflict) {
      const ul = el("ul", {});
      for (const c of r.conflict) ul.append(el("li", {}, badge(c.outcome), " on " + c.runner + ", " + c.date.slice(0, 10) + ", record ", el("code", {}, c.id)));
      add("conflict", "runners disagree on this cell and these versions:", ul);
    }
    const a = r.agreement;
    const num = (x, digits) => (typeof x === "number" ? x.toPrecision(digits) : "—");
    if (a && a.status === "differs") {
      add("losses across stacks", "trains differently from " + a.reference + ": from step " + a.parted_at_step + " (0: the eval loss before training), "
        + num(a.loss, 5) + " against " + num(a.reference_loss, 5) + " (allowed gap " + num(a.allowed, 3) + "), reference record ", el("code", {}, String(a.reference_record || "—")));
    } else if (a && a.status === "agrees") {
      add("losses across stacks", "agree with " + a.reference + "'s, reference record ", el("code", {}, String(a.reference_record || "—")));
    } else if (a) {
      add("losses across stacks", "not compared with " + a.reference + "'s: " + (a.why || ""));
    }
    const parts = [el("h2", {}, r.cell), dl, el("h3", {}, "Peak memory per card"), cardChart(r)];
    if (r.error) parts.push(el("h3", {}, "Error"), el("pre", { class: "error-text" }, r.error));
    if (r.message && r.message !== r.error) parts.push(el("pre", {}, r.message));
    if (r.excerpt) parts.push(el("h3", {}, "Log excerpt (last lines)"), el("pre", { class: "excerpt" }, r.excerpt));
    for (const k of r.known_issues || []) {
      const issue = Object.prototype.hasOwnProperty.call(DATA.known_issues, k) ? DATA.known_issues[k] : null;
      parts.push(el("h3", {}, "Known issue: " + k));
      if (!issue) { parts.push(el("p", { class: "muted" }, "not in this page's known-issue base")); continue; }
      const fixes = el("ul", {}, ...issue.fix.map((f) => el("li", {}, f)));
      const sources = el("ul", {}, ...issue.sources.map((s) => el("li", {}, link(s))));
      parts.push(el("p", {}, issue.title), el("p", { class: "muted" }, issue.cause), el("div", {}, "fix:"), fixes, el("div", {}, "sources:"), sources);
    }
    box.replaceChildren(...parts);
    box.scrollIntoView({ block: "start" });
  }

  function cardChart(r) {
    const cards = r.cards;
    if (!cards.length) return el("p", { class: "muted" }, "no memory figures in this record");
    const kinds = Object.keys(FIGURES).filter((k) => cards.some((c) => c[k]));
    const scale = maxOf(cards.flatMap((c) => kinds.map((k) => c[k] || 0)), 0);
    const barH = 12, left = 70, width = 420;
    const groupH = kinds.length * (barH + 2) + 8;
    const box = svg("svg", { width: left + width + 110, height: cards.length * groupH + 24, id: "card-chart", role: "img" });
    cards.forEach((c, i) => {
      const y0 = i * groupH;
      box.append(svg("text", { x: 0, y: y0 + barH }, c.card));
      kinds.forEach((k, j) => {
        if (!c[k]) return;
        const w = Math.max(1, (c[k] / scale) * width);
        const bar = svg("rect", { x: left, y: y0 + j * (barH + 2), width: w, height: barH, class: "bar-" + k });
        bar.append(svg("title", {}, c.card + " " + FIGURES[k] + ": " + mib(c[k])));
        box.append(bar);
        box.append(svg("text", { x: left + w + 4, y: y0 + j * (barH + 2) + barH - 2 }, mib(c[k])));
      });
    });
    let x = left;
    const y = cards.length * groupH + 8;
    for (const k of kinds) {
      box.append(svg("rect", { x: x, y: y, width: 10, height: 10, class: "legend-" + k }));
      box.append(svg("text", { x: x + 14, y: y + 9 }, FIGURES[k]));
      x += 24 + FIGURES[k].length * 6;
    }
    return box;
  }

  // -- what works on my GPU: the support statements measured on it, and what is predicted ------
  const STATE_TEXT = { works: "works", note: "works, with a note", fails: "fails", unknown: "unknown" };
  const picker = document.getElementById("gpu-picker");
  const measuredGroup = el("optgroup", { label: "hardware with records" });
  for (const hw of DATA.support) measuredGroup.append(el("option", { value: "hw:" + hw.label }, hw.label));
  const cardGroup = el("optgroup", { label: "every card compat knows (" + DATA.predicted.length + ")" });
  for (const p of DATA.predicted) {
    const measured = DATA.support.some((h) => h.arch === p.arch);
    cardGroup.append(el("option", { value: "gpu:" + p.gpu }, p.gpu + " (" + p.arch + ", " + (measured ? "measured" : "predicted only") + ")"));
  }
  if (DATA.support.length) picker.append(measuredGroup);
  if (DATA.predicted.length) picker.append(cardGroup);

  function stateBadge(state) { return el("span", { class: "state s-" + state }, STATE_TEXT[state] || state); }

  function supportTable(hw) {
    const dates = hw.first_tested === hw.last_tested ? hw.first_tested : hw.first_tested + " to " + hw.last_tested;
    const head = el("tr", {}, el("th", {}, "feature"), ...hw.stacks.map((s) => el("th", { title: hw.stack_versions[s] || "" }, s)));
    const body = el("tbody", {});
    hw.features.forEach(([feature, value], i) => {
      const tr = el("tr", {}, el("td", {}, feature + " ", el("code", {}, value)));
      hw.stacks.forEach((stack, j) => {
        const st = hw.grid[i][j];
        const td = el("td", { class: "entry", "data-state": st.state, "data-stack": stack, "data-feature": feature + "=" + value }, stateBadge(st.state));
        if (st.state !== "unknown") td.append(" " + st.passed + "/" + st.total + " · " + st.last_tested);
        if (st.state === "note" || st.state === "fails") td.addEventListener("click", () => showWhy(hw, feature, value, stack, st));
        tr.append(td);
      });
      body.append(tr);
    });
    return el("div", { class: "support-of", "data-hardware": hw.label },
      el("h3", {}, hw.label),
      el("p", { class: "muted" }, "Tested " + dates + (hw.host ? " on " + hw.host : "") + "; evidence: ",
        ...hw.evidence.map((e, i) => [i ? "; " : "", el("span", { class: "kind measured" }, "measured"), " " + e.replace(/^measured /, "")]).flat(),
        ". Stacks as their newest record ran them: " + hw.stacks.map((s) => s + " (" + hw.stack_versions[s] + ")").join("; ") + "."),
      stackTable(hw),
      hw.stacks.length ? el("div", { class: "scroll" }, el("table", { class: "support" }, el("thead", {}, head), body))
        : el("p", { class: "muted" }, "No feature check on this card yet: its records are measurement runs."));
  }

  // each stack on a GPU card: its cells' newest records and what compat's grids plan that it has not run
  function stackTable(hw) {
    if (!hw.by_stack || !hw.by_stack.length) return el("span", {});
    const cols = ["stack", "versions (newest record)", "passed", "did not pass", "unsupported", "not run"];
    const rows = hw.by_stack.map((b) => el("tr", { class: "by-stack", "data-stack": b.stack },
      el("td", {}, el("code", {}, b.stack)),
      el("td", {}, b.versions || "no record"),
      el("td", {}, String(b.passed)),
      el("td", {}, Object.entries(b.not_passed).map(([o, n]) => n + " " + o).join(", ") || "—"),
      el("td", {}, String(b.unsupported)),
      el("td", {}, b.planned ? b.not_run + " of " + b.planned + " planned" : "—")));
    return el("div", { class: "scroll" }, el("table", { class: "support by-stack" },
      el("thead", {}, el("tr", {}, ...cols.map((c) => el("th", {}, c)))), el("tbody", {}, ...rows)));
  }

  function showWhy(hw, feature, value, stack, st) {
    const box = document.getElementById("pick-why");
    box.hidden = false;
    const reasons = el("ul", {}, ...st.reasons.map((r) => el("li", {}, badge(r.outcome), " in " + r.cells.length + " cell(s): ",
      el("span", { class: "mono" }, r.cells.join(", ")), " — " + r.why + " (last tested " + r.last_tested + "; " + r.evidence.join("; ") + ")")));
    if (st.disputed.length) reasons.append(el("li", {}, el("span", { class: "badge conflict" }, "conflict"), " runners disagree on " + st.disputed.join(", ")));
    const show = el("button", { type: "button", id: "why-cells" }, "show these cells in the table");
    show.addEventListener("click", () => {
      for (const f of FILTERS) document.getElementById("filter-" + f).value = "";
      const want = { hardware: hw.label, stack: stack, run: "feature check" };
      want[feature] = value;
      for (const [f, v] of Object.entries(want)) {
        const select = document.getElementById("filter-" + f);
        if (select && [...select.options].some((o) => o.value === v)) select.value = v;
      }
      render();
      document.getElementById("cells").scrollIntoView({ block: "start" });
    });
    box.replaceChildren(el("h4", {}, stack + ", " + feature + " " + value + ": ", stateBadge(st.state),
      " — " + st.passed + " of " + st.total + " cell(s) passed, last tested " + st.last_tested), reasons, show);
  }

  // a predicted card: its one-line answer, the rules and records behind it folded (about 30 lines)
  function predictedCard(p) {
    const dl = el("dl", { class: "predicted-card", "data-gpu": p.gpu });
    const add = (into, k, ...v) => into.append(el("dt", {}, k), el("dd", {}, ...v));
    add(dl, "card", p.gpu + (p.cc ? ", compute capability " + p.cc : ", " + p.backend + ", predicted only") + " (" + p.arch + ")");
    add(dl, "answer", "precision " + p.precision + ", torch " + p.torch + (p.bitsandbytes ? ", bitsandbytes " + p.bitsandbytes : ""));
    const why = el("dl", { class: "predicted-card" });
    for (const e of p.evidence) {
      add(why, e.about, el("span", { class: "kind " + e.kind }, e.kind), " " + e.says,
        ...(e.rule ? [el("span", { class: "muted" }, " (rule " + e.rule + ")")] : []),
        ...(e.records ? [el("span", { class: "muted" }, " (records " + e.records.map((x) => x.slice(0, 12)).join(", ") + ")")] : []),
        ...(e.sources || []).slice(0, 3).flatMap((src) => [" ", link(src, "source")]));
    }
    const folded = el("details", { class: "evidence" }, el("summary", {}, "why: " + p.evidence.length + " rules and records behind it"), why);
    return el("div", { class: "predicted-of", "data-gpu": p.gpu }, dl, folded);
  }

  function showPick(value) {
    let measured = [], cards = [], name = "";
    if (value.startsWith("hw:")) {
      measured = DATA.support.filter((h) => "hw:" + h.label === value);
      const arch = measured.length ? measured[0].arch : "";
      cards = DATA.predicted.filter((p) => p.arch === arch);
      name = value.slice(3);
    } else if (value.startsWith("gpu:")) {
      cards = DATA.predicted.filter((p) => "gpu:" + p.gpu === value);
      measured = cards.length ? DATA.support.filter((h) => h.arch === cards[0].arch) : [];
      name = value.slice(4) + (cards.length ? " (" + cards[0].arch + ")" : "");
    }
    const m = document.getElementById("pick-measured");
    if (measured.length) {
      m.replaceChildren(...(value.startsWith("gpu:") ? [el("h3", {}, "Measured on " + name)] : []), ...measured.map(supportTable));
    } else {
      m.replaceChildren(el("h3", {}, "Measured on " + name),
        el("p", { id: "nothing-measured" }, "Nothing measured on this architecture yet: no record in this table. What follows is ",
          el("span", { class: "kind predicted" }, "predicted"), ", not measured. Run ", el("code", {}, "compat run"),
          " on such a card to measure it (README.md)."));
    }
    const pr = document.getElementById("pick-predicted");
    pr.replaceChildren(...(cards.length ? [el("h3", {}, "Predicted: what compat recommend --gpu NAME --method qlora answers, and from what"),
      ...cards.map(predictedCard)] : [el("p", { class: "muted" }, "No prediction: compat predicts for the GPUs of matrix/gpus.toml.")]));
    document.getElementById("pick-why").hidden = true;
  }
  // the cell list follows the choice: a hardware with records by its label, a card by its architecture
  function filterToPick(value) {
    const hw = document.getElementById("filter-hardware");
    pickedArch = "";
    if (value.startsWith("hw:") && [...hw.options].some((o) => o.value === value.slice(3))) {
      hw.value = value.slice(3);
    } else if (value.startsWith("gpu:")) {
      const card = DATA.predicted.find((p) => "gpu:" + p.gpu === value);
      hw.value = "";
      pickedArch = card ? card.arch : "";
    }
    const note = document.getElementById("picked-note");
    note.hidden = !pickedArch;
    note.firstChild.textContent = pickedArch ? "cells of " + pickedArch + ", the card chosen above " : "";
  }
  picker.addEventListener("change", () => { showPick(picker.value); filterToPick(picker.value); render(); writeHash(current()); });

  // -- conflicts, predicted cards, summary -------------------------------------------------------
  const conflictList = document.getElementById("conflict-list");
  const conflicted = rows.filter((r) => r.conflict);
  if (conflicted.length) {
    document.getElementById("conflicts").hidden = false;
    for (const r of conflicted) {
      conflictList.append(el("li", {}, el("code", {}, r.cell), " on " + r.hardware + ": ",
        ...r.conflict.flatMap((c, i) => [i ? "; " : "", badge(c.outcome), " on " + c.runner + " (" + c.date.slice(0, 10) + ")"])));
    }
  }
  const pbody = document.querySelector("#predicted tbody");
  for (const p of DATA.predicted) {
    const ev = el("td", {});
    for (const e of p.evidence) {
      ev.append(el("div", {}, el("span", { class: "kind " + e.kind }, e.kind), " " + e.about + ": " + e.says,
        ...(e.rule ? [el("span", { class: "muted" }, " (rule " + e.rule + ")")] : []),
        ...(e.sources || []).slice(0, 2).flatMap((s) => [" ", link(s, "source")])));
    }
    pbody.append(el("tr", {}, el("td", {}, p.gpu), el("td", {}, p.cc || p.backend), el("td", {}, p.arch), el("td", {}, String(p.measured)),
      el("td", {}, p.precision), el("td", { class: "mono" }, p.torch), el("td", { class: "mono" }, p.bitsandbytes || "—"), ev));
  }
  document.getElementById("summary").textContent =
    rows.length + " rows from " + DATA.record_count + " records of " + DATA.runners.length + " runner(s): " + DATA.runners.join(", ") +
    (DATA.bad_lines ? ". " + DATA.bad_lines + " unreadable line(s) skipped." : ".");

  // -- the filters live in the address (#outcome=fail&stack=hf2026), so a view can be linked ----
  function writeHash(q) {
    const parts = FILTERS.filter((f) => q.want[f]).map((f) => f + "=" + encodeURIComponent(q.want[f]));
    if (q.conflicts) parts.push("conflicts=1");
    if (picker.value) parts.push("gpu=" + encodeURIComponent(picker.value));
    const hash = parts.length ? "#" + parts.join("&") : "";
    try {
      if (location.hash !== hash) history.replaceState(null, "", hash || location.pathname + location.search);
    } catch (e) { /* some browsers refuse this for file: pages; the view still works */ }
  }
  const runFilter = document.getElementById("filter-run");
  if ([...runFilter.options].some((o) => o.value === "measurement run") && [...runFilter.options].some((o) => o.value === "feature check")) {
    runFilter.value = "feature check";  // measurement runs are their own section: one choice away
  }
  for (const part of location.hash.slice(1).split("&")) {
    const [k, raw] = part.split("=");
    let v;
    try { v = decodeURIComponent(raw || ""); } catch (e) { continue; }
    const select = FILTERS.includes(k) && document.getElementById("filter-" + k);
    if (select && [...select.options].some((o) => o.value === v)) select.value = v;
    if (k === "conflicts") onlyConflicts.checked = true;
    if (k === "gpu" && [...picker.options].some((o) => o.value === v)) picker.value = v;
  }
  form.addEventListener("input", render);
  form.addEventListener("change", render);
  if (picker.value) showPick(picker.value);
  if (/(^#|&)gpu=/.test(location.hash) && picker.value) filterToPick(picker.value);  // a linked pick filters too
  render();
})();
