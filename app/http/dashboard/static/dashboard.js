/* The dashboard's logic: sign in, call /dashboard/api with the key, and render what it answers.
 *
 * The key lives in sessionStorage (this tab only, gone when it closes) and is sent only to this
 * gateway, as "Authorization: Bearer". Every value from the server is put on the page with
 * textContent, never as HTML. Money arrives as exact JSON numbers; the page keeps each amount as
 * the digits the server sent (JSON.parse's source text), so what is shown is the ledger's figure,
 * not a float's rounding of it. */
"use strict";

(() => {
  const KEY = "tollgate.dashboard.key";
  const MONEY = new Set(["balance", "held", "available", "amount", "balance_after", "cost", "cost_usd", "total_cost",
                         "value", "budget_limit", "remaining", "owed"]);
  const PER_PAGE = 20;
  const $ = (id) => document.getElementById(id);
  const state = { session: null, team: null, page: 1, ticket: 0, by: "user" };

  /** JSON with money kept as the server's exact digits (strings), everything else as usual. */
  function parse(text) {
    return JSON.parse(text, (key, value, context) => {
      if (typeof value !== "number" || !MONEY.has(key)) return value;
      return context && context.source !== undefined ? context.source : String(value);
    });
  }

  class ApiError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  async function call(path) {
    const answer = await fetch("/dashboard/api" + path, {
      headers: { Authorization: "Bearer " + sessionStorage.getItem(KEY) }, cache: "no-store",
    });
    if (!answer.ok) {
      let message = answer.statusText;
      try { message = JSON.parse(await answer.text()).error.message; } catch (_) { /* not our JSON */ }
      throw new ApiError(answer.status, message);
    }
    return answer;
  }
  const json = async (path) => parse(await (await call(path)).text());
  const teamPath = (suffix) => "/teams/" + encodeURIComponent(state.team) + suffix;

  /** "1234567.5" → "1,234,567.5", "-0.25" → "−0.25"; digits are never rounded. */
  function credits(exact, signed) {
    const negative = exact.startsWith("-"), digits = negative ? exact.slice(1) : exact;
    const [whole, fraction] = digits.split(".");
    const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",") + (fraction ? "." + fraction : "");
    return (negative ? "\u2212" : signed ? "+" : "") + grouped;
  }
  const count = (n) => Number(n).toLocaleString("en-US");
  const when = (iso) => iso.slice(0, 19).replace("T", " ");
  const tokensIn = (e) => e.input_tokens + e.cache_write_tokens + e.cache_hit_tokens;

  function cell(text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  function modelCell(model, colour) {
    const td = cell(""), swatch = document.createElement("span");
    swatch.className = "swatch";
    if (colour) swatch.style.backgroundColor = colour;
    td.append(swatch, document.createTextNode(" " + model));
    return td;
  }

  function fill(tbody, rows, columns, makeCells) {
    tbody.replaceChildren();
    if (!rows.length) {
      const tr = document.createElement("tr");
      const td = cell("Nothing yet.", "placeholder");
      td.colSpan = columns;
      tr.append(td);
      tbody.append(tr);
    }
    for (const row of rows) {
      const tr = document.createElement("tr");
      tr.append(...makeCells(row));
      tbody.append(tr);
    }
  }

  function showError(message) {
    $("load-error").textContent = message;
    $("load-error").hidden = !message;
  }

  function renderTeam(team) {
    $("team-name").textContent = "Team " + team.name;
    $("team-state").textContent = team.suspended ? "suspended" : "active";
    $("team-state").className = "badge " + (team.suspended ? "suspended" : "active");
    $("balance-value").textContent = credits(team.balance);
    $("balance-value").dataset.credits = team.balance;
    $("held-value").textContent = credits(team.held);
    $("available-value").textContent = credits(team.available);
    const limits = [team.rpm && count(team.rpm) + " requests/min", team.tpm && count(team.tpm) + " tokens/min"];
    const live = team.keys.filter((k) => !k.revoked).length;
    $("limits").textContent = `${live} active key${live === 1 ? "" : "s"} · team limits: ` +
      (limits.filter(Boolean).join(", ") || "none");
    const owes = team.owed && team.owed !== "0";
    $("owed").hidden = !owes;
    $("owed").textContent = owes ? `The team owes ${credits(team.owed)} credits (a refund or dispute of spent ` +
      "credit): requests are refused until a top-up pays it." : "";
    fill($("lots").tBodies[0], team.lots, 5, (lot) => [
      cell(lot.id, "mono"), cell(lot.kind), cell(credits(lot.remaining), "num"),
      cell(lot.expires_at ? when(lot.expires_at) : "never"), cell(String(lot.priority), "num"),
    ]);
    $("buy-form").hidden = !team.buy;
    if (team.buy) {
      $("buy-currency").textContent = `${team.buy.currency.toUpperCase()} (${team.buy.min_amount}–${team.buy.max_amount})`;
    }
  }

  /** "Buy credits": a Stripe Checkout Session for the amount, then to Stripe's page to pay. */
  async function buy(amount) {
    const answer = await fetch("/dashboard/api" + teamPath("/checkout"), {
      method: "POST", cache: "no-store",
      headers: { Authorization: "Bearer " + sessionStorage.getItem(KEY), "Content-Type": "application/json" },
      body: JSON.stringify({ amount }),
    });
    const text = await answer.text();
    if (!answer.ok) {
      let message = answer.statusText;
      try { message = JSON.parse(text).error.message; } catch (_) { /* not our JSON */ }
      throw new ApiError(answer.status, message);
    }
    window.location.assign(JSON.parse(text).url);
  }

  function renderUsage(usage) {
    const colours = TollgateChart.draw($("chart"), $("legend"), usage.daily);
    const order = [...colours.keys()];
    const models = [...usage.by_model].sort((a, b) => order.indexOf(a.model) - order.indexOf(b.model));
    fill($("usage-totals").tBodies[0], models, 5, (m) => [
      modelCell(m.model, colours.get(m.model)), cell(count(m.requests), "num"),
      cell(count(m.input_tokens + m.cache_write_tokens + m.cache_hit_tokens), "num"),
      cell(count(m.output_tokens), "num"), cell(credits(m.cost), "num"),
    ]);
    fill($("usage-endpoints").tBodies[0], usage.by_endpoint || [], 6, (e) => [
      cell(e.label), cell(e.path, "mono"), cell(count(e.requests), "num"),
      cell(count(e.input_tokens + e.cache_write_tokens + e.cache_hit_tokens), "num"),
      cell(count(e.output_tokens), "num"), cell(credits(e.cost), "num"),
    ]);
  }

  function renderRequests(requests) {
    fill($("requests-table").tBodies[0], requests.data, 10, (e) => [
      cell(when(e.occurred_at)), cell(e.model), cell(e.endpoint), cell(e.key_id, "mono"),
      cell(count(tokensIn(e)), "num"), cell(count(e.output_tokens), "num"),
      cell(credits(e.amount.replace(/^-/, "")), "num"), cell(e.tags, "mono"), cell(e.end_user),
      cell(e.request_id, "mono request-id"),
    ]);
  }

  function renderAlerts(alerts) {
    fill($("alerts-table").tBodies[0], alerts.data, 7, (a) => [
      cell(when(a.occurred_at)), cell(a.kind === "balance_below" ? "balance low" : "budget reached", "alert-kind"),
      cell(a.key_id || "team", "mono"), cell(a.threshold), cell(credits(a.value), "num"), cell(a.period),
      cell(a.deliveries === 0 ? "none configured or not sent yet" : (a.delivered ? "delivered" : "retrying")),
    ]);
  }

  /** Usage by the values of the chosen dimension; the select lists the team's dimensions. */
  function renderAttribution(usage) {
    const select = $("attribution-by");
    select.replaceChildren(...usage.dimensions.map((d) =>
      new Option(d === "user" ? "End user" : "Tag " + d.slice(4), d, false, d === usage.by)));
    fill($("attribution-table").tBodies[0], usage.data, 5, (v) => [
      cell(v.value === null ? "(other)" : v.value || "(none)", v.value ? "" : "muted"), cell(count(v.requests), "num"),
      cell(count(v.input_tokens + v.cache_write_tokens + v.cache_hit_tokens), "num"),
      cell(count(v.output_tokens), "num"), cell(credits(v.cost), "num"),
    ]);
    $("attribution-requests").textContent = count(usage.total_requests);
    $("attribution-total").textContent = credits(usage.total_cost);
  }

  const attributionPath = () => teamPath("/attribution?by=" + encodeURIComponent(state.by));

  async function loadAttribution() {
    renderAttribution(await json(attributionPath()));
  }

  function renderHistory(history) {
    fill($("history-table").tBodies[0], history.data, 7, (e) => {
      const kind = document.createElement("span");
      kind.className = "kind " + e.kind;
      kind.textContent = e.kind === "top_up" ? "top-up" : e.kind.replaceAll("_", " ");
      const kindCell = cell("");
      kindCell.append(kind);
      return [
        cell(when(e.occurred_at)), kindCell, cell(e.model),
        cell(e.kind === "charge" ? `${count(tokensIn(e))} / ${count(e.output_tokens)}` : "", "num"),
        cell(credits(e.amount, true), "num " + (e.amount.startsWith("-") ? "minus" : "plus")),
        cell(credits(e.balance_after), "num"), cell(e.request_id || e.reference, "mono"),
      ];
    });
    const pages = Math.max(1, Math.ceil(history.total / history.per_page));
    $("page-label").textContent = `Page ${history.page} of ${pages} · ${count(history.total)} entries`;
    $("newer").disabled = history.page <= 1;
    $("older").disabled = !history.has_more;
  }

  async function loadHistory() {
    renderHistory(await json(teamPath(`/history?page=${state.page}&per_page=${PER_PAGE}`)));
  }

  async function loadTeam() {
    if (!state.team) return;
    const ticket = ++state.ticket;  // a later choice of team wins over answers still on their way
    showError("");
    try {
      const [team, usage, requests, history, attribution, alerts] = await Promise.all([
        json(teamPath("")), json(teamPath("/usage")), json(teamPath("/requests?limit=20")),
        json(teamPath(`/history?page=${state.page}&per_page=${PER_PAGE}`)), json(attributionPath()),
        json(teamPath("/alerts?limit=20")),
      ]);
      if (ticket !== state.ticket) return;
      renderHistory(history);
      renderTeam(team);
      renderUsage(usage);
      renderRequests(requests);
      renderAttribution(attribution);
      renderAlerts(alerts);
      $("views").hidden = false;
      $("choose").hidden = true;
      document.body.dataset.loaded = state.team;
    } catch (error) {
      if (ticket === state.ticket) failed(error);
    }
  }

  function failed(error) {
    if (error instanceof ApiError && error.status === 401) {
      signOut("Your key was refused: " + error.message);
    } else {
      showError("Could not load the dashboard: " + error.message);
    }
  }

  /** Fetch one of the team's files (with the key, which a plain link could not send) and save it. */
  async function download(path, fallback) {
    try {
      const answer = await call(teamPath(path));
      const disposition = answer.headers.get("content-disposition") || "";
      const name = (/filename="([^"]+)"/.exec(disposition) || [])[1] || fallback;
      const link = document.createElement("a");
      link.href = URL.createObjectURL(await answer.blob());
      link.download = name;
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 10000);
    } catch (error) {
      failed(error);
    }
  }

  function chooseTeam(name) {
    state.team = name || null;
    state.page = 1;
    state.by = "user";
    $("views").hidden = true;
    $("choose").hidden = Boolean(state.team);
    delete document.body.dataset.loaded;
    loadTeam();
  }

  async function start() {
    if (!sessionStorage.getItem(KEY)) return signOut("");
    try {
      state.session = await json("/session");
    } catch (error) {
      return error instanceof ApiError && error.status === 401
        ? signOut("That key was refused: " + error.message) : showError(error.message);
    }
    const admin = state.session.role === "admin";
    $("sign-in").hidden = true;
    $("account").hidden = false;
    $("who").textContent = admin ? "Signed in as admin" : `Signed in with key ${state.session.key_id}`;
    $("picker").hidden = !admin;
    if (admin) {
      const picker = $("team-picker");
      picker.replaceChildren(picker.options[0] || new Option("Choose a team…", ""));
      for (const name of state.session.teams) picker.append(new Option(name, name));
      chooseTeam("");
    } else {
      chooseTeam(state.session.team);
    }
  }

  function signOut(message) {
    sessionStorage.removeItem(KEY);
    Object.assign(state, { session: null, team: null, page: 1, ticket: state.ticket + 1 });
    $("account").hidden = true;
    $("views").hidden = true;
    $("choose").hidden = true;
    showError("");
    $("sign-in").hidden = false;
    $("sign-in-error").textContent = message || "";
    $("sign-in-error").hidden = !message;
    $("key").value = "";
    $("key").focus();
  }

  $("sign-in-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = $("key").value.trim();
    if (!key) return;
    sessionStorage.setItem(KEY, key);
    $("key").value = "";
    start();
  });
  $("sign-out").addEventListener("click", () => signOut(""));
  $("buy-form").addEventListener("submit", (event) => {
    event.preventDefault();
    $("buy-error").hidden = true;
    buy($("buy-amount").value.trim()).catch((error) => {
      $("buy-error").textContent = error.message;
      $("buy-error").hidden = false;
    });
  });
  $("refresh").addEventListener("click", () => loadTeam());
  $("team-picker").addEventListener("change", (event) => chooseTeam(event.target.value));
  $("newer").addEventListener("click", () => { state.page -= 1; loadHistory().catch(failed); });
  $("older").addEventListener("click", () => { state.page += 1; loadHistory().catch(failed); });
  $("attribution-by").addEventListener("change", (event) => {
    state.by = event.target.value;
    loadAttribution().catch(failed);
  });
  $("export-csv").addEventListener("click", () => download("/export?format=csv", "ledger.csv"));
  $("export-jsonl").addEventListener("click", () => download("/export?format=jsonl", "ledger.jsonl"));
  $("statement-month").value = new Date().toISOString().slice(0, 7);  // this month, UTC
  $("statement-download").addEventListener("click", () => {
    const month = $("statement-month").value, format = $("statement-format").value;
    if (!/^\d{4}-\d{2}$/.test(month)) return showError("Choose a month for the statement.");
    const chained = $("statement-chained").checked;
    download(`/statements/${month}?format=${format}&chained=${chained}`, `statement-${month}.${format}`);
  });
  start();
})();
