// protect dashboard: one script, no dependencies. It reads the admin API
// (/v1/) and /ui/now with the session cookie, and sends the session's
// CSRF token with every write.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const $ = (s) => document.querySelector(s);
  const SVG = "http://www.w3.org/2000/svg";
  const nf = new Intl.NumberFormat("en-US");
  const refusedStatuses = ["limited", "banned", "unknown", "unavailable", "exhausted", "blocked", "challenged"];

  // el makes an element with text and classes.
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function row(cells) {
    const tr = document.createElement("tr");
    for (const c of cells) tr.appendChild(c instanceof Node ? c : el("td", c));
    return tr;
  }
  function fill(tbody, rows, cols, empty) {
    tbody.replaceChildren(...rows);
    if (rows.length === 0) {
      const td = el("td", empty, "empty");
      td.colSpan = cols;
      tbody.appendChild(row([td]));
    }
  }
  function toast(msg, error) {
    const t = $("#toast");
    t.textContent = msg;
    t.className = error ? "error" : "";
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { t.hidden = true; }, 5000);
  }
  function duration(s) {
    if (s === null || s === undefined) return "never";
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60 ? " " + (s % 60) + "s" : "");
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }
  function ago(iso) {
    const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    return duration(s) + " ago";
  }
  function clock(iso) {
    const d = new Date(iso);
    return d.toISOString().replace("T", " ").slice(0, 19);
  }

  // api calls the admin API. A lost session reloads the page once, which
  // shows the login form; a 401 again right after the reload (the page is
  // served but the API refuses the browser, as a proxy's header can make
  // it) stops the calls and says so, never reloading in a loop.
  const RELOADED = "protect-dashboard-reloaded";
  let refused = false;
  async function api(method, path, body) {
    if (refused) throw new Error("refused by the admin API");
    const opt = { method, headers: {}, credentials: "same-origin" };
    if (method !== "GET") opt.headers["X-CSRF-Token"] = csrf;
    if (body !== undefined) {
      opt.headers["Content-Type"] = "application/json";
      opt.body = JSON.stringify(body);
    }
    const res = await fetch(path, opt);
    if (res.status === 401) {
      if (sessionStorage.getItem(RELOADED) === null) {
        sessionStorage.setItem(RELOADED, "1");
        location.reload();
      } else {
        refused = true;
        clearTimeout(toast.timer);
        const t = $("#toast");
        t.textContent = "The admin API refuses this session (401) though the page is served: log out and in again, " +
          "and check that no proxy sends an Authorization: Bearer header of its own.";
        t.className = "error";
        t.hidden = false;
      }
      throw new Error("logged out");
    }
    sessionStorage.removeItem(RELOADED);
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
    if (!res.ok) throw new Error((data && data.detail) || res.status + " " + res.statusText);
    return { data, res };
  }

  // target is what lifts a record: consumer keys are named so.
  function target(key) {
    return /^[0-9.]+(\/\d+)?$/.test(key) || /^[0-9a-fA-F:.]*:[0-9a-fA-F:.]*(\/\d+)?$/.test(key) ? key : "consumer:" + key;
  }
  function targets(s) {
    return s.split(/[\s,]+/).filter((t) => t !== "");
  }

  // refusedCount shows the refusals of a key that are certain, count −
  // error: a key that took another's place in the table inherited the
  // other's count, which the title gives as the most it may have been.
  function refusedCount(k) {
    const td = el("td", nf.format(k.count - k.error), "num");
    if (k.error > 0) td.title = "at least " + nf.format(k.count - k.error) + ", at most " + nf.format(k.count) +
      " (" + nf.format(k.error) + " may be another key's, whose place it took)";
    return td;
  }

  // ---- now ----
  const HISTORY = 300; // seconds the chart holds
  const samples = []; // {t, counts: {status: total over protectors}}
  let last = null;
  async function pollNow() {
    let rec;
    try {
      rec = (await api("GET", "ui/now")).data;
    } catch (e) {
      return;
    }
    last = rec;
    const counts = {};
    for (const s of rec.statuses) counts[s] = 0;
    for (const p of rec.protectors) for (const s of rec.statuses) counts[s] += p.decisions[s] || 0;
    samples.push({ t: Date.parse(rec.time), counts });
    while (samples.length > HISTORY + 1) samples.shift();
    document.body.dataset.samples = String(samples.length);
    if (page() === "now") drawNow();
    if (page() === "lists") drawLists();
  }
  function rates() {
    const out = [];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1], b = samples[i];
      const dt = Math.max((b.t - a.t) / 1000, 0.001);
      const r = { t: b.t, d: {}, per: {} };
      for (const s in b.counts) {
        r.d[s] = Math.max(0, b.counts[s] - (a.counts[s] || 0));
        r.per[s] = r.d[s] / dt;
      }
      out.push(r);
    }
    return out;
  }
  function card(label, value, cls) {
    const c = el("div", null, "card");
    c.appendChild(el("div", label, "label"));
    c.appendChild(el("div", value, "value" + (cls ? " " + cls : "")));
    return c;
  }
  function drawNow() {
    if (!last) return;
    const rs = rates();
    const statuses = last.statuses;
    // Cards: totals of every protector.
    let calls = 0, errors = 0, timeouts = 0, failures = 0, pending = 0, open = false, meanSum = 0;
    for (const p of last.protectors) {
      calls += p.store_calls; errors += p.store_errors; timeouts += p.store_timeouts;
      failures += p.store_failures; pending += p.pending_bans; open = open || p.circuit_open;
      meanSum += p.store_mean_ms * p.store_calls;
    }
    const lastRate = rs.length ? rs[rs.length - 1] : null;
    let served = 0, refused = 0;
    if (lastRate) {
      for (const s of statuses) {
        if (refusedStatuses.includes(s)) refused += lastRate.per[s];
        else served += lastRate.per[s];
      }
    }
    $("#cards").replaceChildren(
      card("served /s", nf.format(Math.round(served))),
      card("refused /s", nf.format(Math.round(refused)), refused > 0 ? "bad" : ""),
      card("store", open ? "circuit open" : "circuit closed", open ? "bad" : "ok"),
      card("store calls", nf.format(calls)),
      card("store errors · timeouts", nf.format(errors) + " · " + nf.format(timeouts), errors > 0 ? "bad" : ""),
      card("store mean latency", calls ? (meanSum / calls).toFixed(2) + " ms" : "–"),
      card("decided by the policy", nf.format(failures), failures > 0 ? "bad" : ""),
      card("bans pending", nf.format(pending)),
    );
    drawChart(rs, statuses);
    // Legend: each status's rate now, its sum in the chart and since start.
    const tbody = $("#legend tbody");
    const rows = [];
    for (const s of statuses) {
      let sum = 0;
      for (const r of rs) sum += r.d[s];
      const total = samples.length ? samples[samples.length - 1].counts[s] : 0;
      const tr = row([el("td", s, "dot s-" + s), el("td", lastRate ? lastRate.per[s].toFixed(1) : "0.0", "num"),
        el("td", nf.format(sum), "num sum"), el("td", nf.format(total), "num")]);
      tr.dataset.status = s;
      tr.dataset.sum = String(sum);
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
    $("#chart-span").textContent = rs.length ? "· the last " + duration(Math.round((rs[rs.length - 1].t - samples[0].t) / 1000)) : "· starting";
    // Refused keys.
    fill($("#refused tbody"), last.refused.map((k) => row([el("td", k.key, "key"), el("td", k.status, "dot s-" + k.status),
      refusedCount(k), el("td", ago(k.last), "num")])), 4, "nothing refused in the last minutes");
  }
  function drawChart(rs, statuses) {
    const svg = $("#chart");
    const W = 800, H = 220, L = 44, B = 18, T = 8;
    let max = 1;
    for (const r of rs) for (const s of statuses) max = Math.max(max, r.per[s]);
    max = niceCeil(max);
    const nodes = [];
    // The window grows with the samples, from a minute to HISTORY.
    const now = rs.length ? rs[rs.length - 1].t : 0;
    const span = rs.length ? (now - samples[0].t) / 1000 : 0;
    const win = Math.min(HISTORY, Math.max(60, Math.ceil(span / 30) * 30));
    const x = (i) => L + ((W - L - 4) * (win - (now - rs[i].t) / 1000)) / win;
    const y = (v) => T + (H - T - B) * (1 - v / max);
    for (let g = 0; g <= 4; g++) {
      const v = (max * g) / 4;
      const line = document.createElementNS(SVG, "line");
      line.setAttribute("x1", L); line.setAttribute("x2", W - 4);
      line.setAttribute("y1", y(v)); line.setAttribute("y2", y(v));
      line.setAttribute("class", "grid");
      nodes.push(line);
      const label = document.createElementNS(SVG, "text");
      label.setAttribute("x", L - 6); label.setAttribute("y", y(v) + 4); label.setAttribute("text-anchor", "end");
      label.textContent = nf.format(Math.round(v * 10) / 10);
      nodes.push(label);
    }
    for (const [sec, anchor] of [[win, "start"], [win / 2, "middle"], [0, "end"]]) {
      const t = document.createElementNS(SVG, "text");
      t.setAttribute("x", L + ((W - L - 4) * (win - sec)) / win); t.setAttribute("y", H - 4);
      t.setAttribute("text-anchor", anchor);
      t.textContent = sec === 0 ? "now" : "−" + duration(sec);
      nodes.push(t);
    }
    for (const s of statuses) {
      if (!rs.some((r) => r.per[s] > 0)) continue;
      const pl = document.createElementNS(SVG, "polyline");
      pl.setAttribute("points", rs.map((r, i) => x(i).toFixed(1) + "," + y(r.per[s]).toFixed(1)).join(" "));
      pl.setAttribute("class", "s-" + s);
      pl.dataset.status = s;
      nodes.push(pl);
    }
    svg.replaceChildren(...nodes);
  }
  function niceCeil(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  // ---- bans ----
  const bans = { q: "", covers: "", within: "", source: "", reason: "", sort: "", offset: 0, limit: 50, total: 0 };
  async function loadBans() {
    const p = new URLSearchParams();
    if (bans.covers) p.set("covers", bans.covers);
    if (bans.within) p.set("within", bans.within);
    if (bans.q) p.set("q", bans.q);
    if (bans.source) p.set("source", bans.source);
    if (bans.reason) p.set("reason", bans.reason);
    if (bans.sort) p.set("sort", bans.sort);
    p.set("offset", bans.offset);
    p.set("limit", bans.limit);
    const started = performance.now();
    let out;
    try {
      out = await api("GET", "v1/bans?" + p);
    } catch (e) {
      toast(e.message, true);
      return;
    }
    bans.total = Number(out.res.headers.get("X-Total-Count") || out.data.length);
    // With several ban lists a row names its list, and its Lift sends
    // it: a key banned in two lists is two rows, each lifted alone.
    const lists = new Set(out.data.map((b) => b.ban_namespace));
    if (last) for (const p of last.protectors) lists.add(p.ban_namespace);
    const several = lists.size > 1;
    $("#bans-list").hidden = !several;
    const rows = out.data.map((b) => {
      const box = el("input");
      box.type = "checkbox";
      box.value = target(b.key);
      box.dataset.ns = b.ban_namespace || "";
      box.className = "pick";
      const lift = el("button", "Lift", "danger");
      lift.type = "button";
      lift.dataset.target = target(b.key);
      lift.dataset.ns = b.ban_namespace || "";
      const list = el("td", b.ban_namespace, "key");
      list.hidden = !several;
      const tr = row([wrapTd(box), el("td", target(b.key), "key"), el("td", b.malformed ? "damaged: " + b.malformed : b.reason, "wrap"),
        el("td", b.source), el("td", b.by), el("td", b.created ? ago(b.created) : "", "num"),
        el("td", b.permanent ? "permanent" : duration(b.seconds_left), "num"), el("td", b.offense, "num"), list, wrapTd(lift)]);
      tr.dataset.key = b.key;
      if (several) tr.dataset.list = b.ban_namespace;
      return tr;
    });
    fill($("#bans-table tbody"), rows, 10, "no ban matches");
    const from = bans.total ? bans.offset + 1 : 0, to = bans.offset + out.data.length;
    const count = $("#bans-count");
    count.textContent = nf.format(from) + "–" + nf.format(to) + " of " + nf.format(bans.total);
    count.dataset.total = String(bans.total);
    count.dataset.ms = String(Math.round(performance.now() - started));
    $("#bans-prev").disabled = bans.offset === 0;
    $("#bans-next").disabled = to >= bans.total;
    $("#bans-all").checked = false;
    $("#lift-selected").disabled = true;
    for (const b of document.querySelectorAll("button.sort")) {
      const s = b.dataset.sort;
      b.classList.toggle("asc", bans.sort === s || (s === "expires" && bans.sort === ""));
      b.classList.toggle("desc", bans.sort === "-" + s);
    }
    document.body.dataset.bansLoaded = String(Date.now());
  }
  function wrapTd(child) {
    const td = el("td");
    td.appendChild(child);
    return td;
  }
  // lift lifts picks ({target, ns}): one DELETE per ban list, each naming
  // its list (namespace=), so that only the bans picked go, never the
  // same key's ban in another list.
  async function lift(picks) {
    if (picks.length === 0) return;
    const byList = new Map();
    for (const p of picks) {
      if (!byList.has(p.ns)) byList.set(p.ns, []);
      byList.get(p.ns).push(p.target);
    }
    let lifted = 0;
    try {
      for (const [ns, ts] of byList) {
        const p = new URLSearchParams();
        for (const t of ts) p.append("target", t);
        if (ns) p.set("namespace", ns);
        p.set("by", "dashboard");
        lifted += (await api("DELETE", "v1/bans?" + p)).data.length;
      }
      toast("lifted " + lifted + " ban" + (lifted === 1 ? "" : "s"));
    } catch (e) {
      toast(e.message, true);
    }
    loadBans();
  }
  // ipv6 reports whether s is a whole IPv6 address (the URL parser reads
  // it): a partial one such as 2001:db8: is searched as text.
  function ipv6(s) {
    try {
      new URL("http://[" + s + "]/");
      return true;
    } catch (e) {
      return false;
    }
  }
  function setupBans() {
    $("#ban-search").addEventListener("submit", (e) => {
      e.preventDefault();
      // An address finds the bans that refuse it, a CIDR the bans inside
      // it, any other text the keys that hold it.
      const q = $("#bans-q").value.trim();
      const addr = /^\d{1,3}(\.\d{1,3}){3}$/.test(q) || (/^[0-9a-fA-F:.]+$/.test(q) && q.split(":").length > 2 && ipv6(q));
      bans.covers = addr ? q : "";
      bans.within = !addr && q.includes("/") ? q : "";
      bans.q = !addr && !q.includes("/") ? q : "";
      bans.source = $("#bans-source").value;
      bans.reason = $("#bans-reason").value.trim();
      bans.offset = 0;
      loadBans();
    });
    $("#bans-prev").addEventListener("click", () => { bans.offset = Math.max(0, bans.offset - bans.limit); loadBans(); });
    $("#bans-next").addEventListener("click", () => { bans.offset += bans.limit; loadBans(); });
    for (const b of document.querySelectorAll("button.sort")) {
      b.addEventListener("click", () => {
        const s = b.dataset.sort;
        const cur = bans.sort || "expires";
        bans.sort = cur === s ? "-" + s : s;
        if (bans.sort === "expires") bans.sort = "";
        bans.offset = 0;
        loadBans();
      });
    }
    const tbody = $("#bans-table tbody");
    tbody.addEventListener("click", (e) => {
      const b = e.target.closest("button[data-target]");
      if (b) lift([{ target: b.dataset.target, ns: b.dataset.ns }]);
    });
    tbody.addEventListener("change", () => {
      $("#lift-selected").disabled = !tbody.querySelector("input.pick:checked");
    });
    $("#bans-all").addEventListener("change", (e) => {
      for (const c of tbody.querySelectorAll("input.pick")) c.checked = e.target.checked;
      $("#lift-selected").disabled = !e.target.checked || !tbody.querySelector("input.pick");
    });
    $("#lift-selected").addEventListener("click", () => {
      lift([...tbody.querySelectorAll("input.pick:checked")].map((c) => ({ target: c.value, ns: c.dataset.ns })));
    });
    $("#ban-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      const len = $("#ban-for").value;
      const req = { targets: targets($("#ban-targets").value), reason: $("#ban-reason").value.trim(), by: "dashboard" };
      if (len === "permanent") req.permanent = true; else req.for = len;
      try {
        const out = await api("POST", "v1/bans", req);
        toast("banned " + out.data.map((b) => b.key).join(", "));
        $("#ban-targets").value = "";
        $("#ban-reason").value = "";
      } catch (err) {
        toast(err.message, true);
      }
      loadBans();
    });
  }

  // ---- allows ----
  async function loadAllows() {
    let out;
    try {
      out = await api("GET", "v1/allows");
    } catch (e) {
      fill($("#allows-table tbody"), [], 6, e.message);
      return;
    }
    fill($("#allows-table tbody"), out.data.map((a) => {
      const rm = el("button", "Remove", "danger");
      rm.type = "button";
      rm.dataset.target = a.key;
      return row([el("td", a.key, "key"), el("td", a.reason, "wrap"), el("td", a.by), el("td", a.created ? ago(a.created) : "", "num"),
        el("td", a.permanent ? "until removed" : duration(a.seconds_left), "num"), wrapTd(rm)]);
    }), 6, "the allowlist is empty");
  }
  function setupAllows() {
    $("#allows-table tbody").addEventListener("click", async (e) => {
      const b = e.target.closest("button[data-target]");
      if (!b) return;
      try {
        await api("DELETE", "v1/allows?target=" + encodeURIComponent(b.dataset.target));
        toast("removed " + b.dataset.target);
      } catch (err) {
        toast(err.message, true);
      }
      loadAllows();
    });
    $("#allow-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      const req = { targets: targets($("#allow-targets").value), reason: $("#allow-reason").value.trim(), by: "dashboard", for: $("#allow-for").value };
      try {
        const out = await api("POST", "v1/allows", req);
        toast("allowed " + out.data.allowed.length + ", lifted " + out.data.lifted.length + " bans");
        $("#allow-targets").value = "";
        $("#allow-reason").value = "";
      } catch (err) {
        toast(err.message, true);
      }
      loadAllows();
    });
  }

  // ---- lists ----
  function drawLists() {
    if (!last) return;
    fill($("#protectors-table tbody"), last.protectors.map((p) => {
      const c = el("td");
      c.appendChild(el("span", p.circuit_open ? "open" : "closed", "pill " + (p.circuit_open ? "down" : "up")));
      return row([el("td", p.namespace, "key"), el("td", p.ban_namespace, "key"), el("td", p.on_store_error), c,
        el("td", p.range_bans < 0 ? "–" : nf.format(p.range_bans), "num"), el("td", nf.format(p.auto_bans + p.manual_bans), "num"),
        el("td", nf.format(p.bans_lifted), "num")]);
    }), 7, "no protector");
    const rows = [];
    for (const p of last.protectors) for (const l of p.block_lists) {
      const c = el("td");
      c.appendChild(el("span", l.up ? "up" : "failing", "pill " + (l.up ? "up" : "down")));
      rows.push(row([el("td", l.name, "key"), c, el("td", nf.format(l.entries), "num"),
        el("td", l.age_seconds < 0 ? "never read" : duration(l.age_seconds), "num"), el("td", nf.format(l.errors), "num")]));
    }
    fill($("#lists-table tbody"), rows, 5, "no block list configured");
  }

  // ---- events ----
  // One stream per ban list: the journal is a ban list's.
  let following = false;
  const shown = [];
  function followEvents() {
    if (following) return;
    if (!last) {
      setTimeout(followEvents, 200);
      return;
    }
    following = true;
    const lists = [...new Set(last.protectors.map((p) => p.ban_namespace))];
    let pending = [];
    const flush = () => {
      const tbody = $("#events-table tbody");
      // Only the last 200 are shown: a journal read from its start may
      // bring thousands at once.
      for (const ev of pending.slice(-200)) {
        const tr = row([el("td", clock(ev.time), "num"), el("td", ev.kind, "dot ev-" + ev.kind), el("td", target(ev.key), "key"),
          el("td", ev.reason, "wrap"), el("td", ev.source), el("td", ev.by), el("td", ev.expires ? clock(ev.expires) : (ev.kind === "ban" ? "permanent" : ""), "num")]);
        tr.dataset.kind = ev.kind;
        tr.dataset.key = ev.key;
        if (lists.length > 1) tr.dataset.list = ev.ban_namespace;
        shown.unshift(tr);
      }
      pending = [];
      shown.splice(200);
      fill(tbody, shown.slice(), 7, "no event yet");
    };
    for (const ns of lists) {
      const source = new EventSource(lists.length > 1 ? "v1/events?namespace=" + encodeURIComponent(ns) : "v1/events");
      source.onopen = () => { $("#events-state").textContent = "following the journal"; };
      source.onerror = () => { $("#events-state").textContent = "reconnecting…"; };
      for (const kind of ["ban", "lift", "expire", "allow", "disallow"]) {
        source.addEventListener(kind, (m) => {
          try { pending.push(JSON.parse(m.data)); } catch (e) { return; }
          if (pending.length === 1) setTimeout(flush, 100);
        });
      }
      source.addEventListener("error", (m) => {
        if (m.data) $("#events-state").textContent = "error: " + m.data;
      });
    }
    flush();
  }

  // ---- pages ----
  function page() {
    const p = location.hash.slice(1);
    return ["now", "bans", "allows", "lists", "events"].includes(p) ? p : "now";
  }
  function show() {
    const p = page();
    for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== "page-" + p;
    for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.getAttribute("href") === "#" + p);
    document.title = "protect · " + p;
    $("#toast").hidden = true;
    if (p === "now") drawNow();
    if (p === "bans") loadBans();
    if (p === "allows") loadAllows();
    if (p === "lists") drawLists();
    if (p === "events") followEvents();
  }
  setupBans();
  setupAllows();
  window.addEventListener("hashchange", show);
  show();
  pollNow();
  setInterval(pollNow, 1000);
})();
