// MOO Arena browser client: protocol v1 over the moo.v1.json subprotocol (docs/protocol.md).
// No framework: one state object, one render per change, the DOM in index.html.

import {
  DEFAULT_RULES, checkCode, commitment, formatResponse, randomSecret, symbolsText,
} from "./rules.js";

const $ = (sel) => document.querySelector(sel);
const LS = {
  name: "moo.name",
  tokens: "moo.tokens",   // {lower-case name: resume token}
  match: "moo.match",     // {id, watch} of the match on screen, to come back to after a reload
};

function load(key, fallback) {
  try {
    const raw = localStorage.getItem(key);
    return raw === null ? fallback : JSON.parse(raw);
  } catch {
    return fallback;
  }
}
function save(key, value) {
  try {
    if (value === null || value === undefined) localStorage.removeItem(key);
    else localStorage.setItem(key, JSON.stringify(value));
  } catch { /* private mode: the session still works, it just won't survive a reload */ }
}

function serverUrl() {
  const param = new URLSearchParams(location.search).get("server");
  if (param) return param;
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/`;
}

// ---------------------------------------------------------------------------------------------
// State

const S = {
  ws: null,
  conn: "offline",          // offline | connecting | online
  name: load(LS.name, ""),
  welcomed: false,
  manualClose: false,
  stopReconnect: false,
  retries: 0,
  retryTimer: null,
  retryAt: 0,
  nextId: 1,
  pending: new Map(),       // id -> {type, ...context}
  tab: "play",              // play | watch | board | match
  needLogin: false,
  queued: false,
  room: null,
  m: null,                  // the match on screen (see newMatch)
  liveMatches: [],
  board: { by: "rating", players: [] },
  offer: null,              // incoming challenge {challenge_id, from}
  challenge: null,          // our outgoing challenge {id, to, state}
  notesMode: false,         // pad taps mark digits instead of typing them
  pingTimer: null,
  tickTimer: null,
};

function newMatch(id, seat) {
  return {
    id,
    seat,                       // 0, 1, or null when spectating
    watch: seat === null,
    players: ["…", "…"],
    opponent: null,
    config: null,
    lastSeq: 0,
    phase: "secrets",           // secrets | playing | finished
    secretSet: [false, false],
    mySecret: null,
    commitments: null,
    guesses: [[], []],          // per seat: [{n, guess, bulls, cows}]
    counts: [0, 0],
    rounds: 0,
    solved: [false, false],
    away: [false, false],
    awaySince: [null, null],
    clocks: [{ left: null, since: null }, { left: null, since: null }],
    secretDeadline: null,
    lastAt: 0,
    offset: 0,                  // Date.now() - server time, from the latest event
    result: null,
    fairness: null,             // [{ok, computed}] once checked
    notes: {},                  // symbol -> "out" | "in": the player's own marks on the pad
    rematchAsked: false,
    rematchOffered: false,
    events: 0,
  };
}

function rulesOf(m) {
  return (m && m.config && m.config.rules) || DEFAULT_RULES;
}

// ---------------------------------------------------------------------------------------------
// Connection

function send(msg, context) {
  if (!S.ws || S.ws.readyState !== WebSocket.OPEN) return null;
  const id = S.nextId++;
  S.pending.set(id, { type: msg.type, ...(context || {}) });
  S.ws.send(JSON.stringify({ ...msg, id }));
  return id;
}

function tokenFor(name) {
  return load(LS.tokens, {})[name.toLowerCase()] || null;
}

function connect() {
  clearTimeout(S.retryTimer);
  S.retryTimer = null;
  if (!S.name) return;
  if (S.ws) {
    S.manualClose = true;
    S.ws.close();
  }
  S.manualClose = false;
  S.stopReconnect = false;
  S.welcomed = false;
  setConn("connecting");
  let ws;
  try {
    ws = new WebSocket(serverUrl(), ["moo.v1.json"]);
  } catch (err) {
    scheduleReconnect();
    return;
  }
  S.ws = ws;
  // A connection that hangs before its welcome is dropped and retried like any other.
  setTimeout(() => {
    if (S.ws === ws && !S.welcomed) ws.close();
  }, 12000);
  ws.addEventListener("open", () => {
    if (S.ws !== ws) return;
    const hello = { type: "hello", name: S.name, client: "moo-web/1" };
    const token = tokenFor(S.name);
    if (token) hello.token = token;
    send(hello);
  });
  ws.addEventListener("message", (e) => {
    if (S.ws !== ws) return;
    let msg;
    try {
      msg = JSON.parse(e.data);
    } catch {
      return;
    }
    handle(msg);
  });
  ws.addEventListener("close", (e) => {
    if (S.ws !== ws) return;
    S.ws = null;
    S.welcomed = false;
    S.pending.clear();
    clearInterval(S.pingTimer);
    if (S.manualClose) {
      setConn("offline");
      return;
    }
    if (e.code === 4001) {
      S.stopReconnect = true;
      setConn("offline");
      banner("This name is now playing in another window or tab.", true);
      return;
    }
    if (S.stopReconnect) {
      setConn("offline");
      return;
    }
    scheduleReconnect();
  });
}

function scheduleReconnect() {
  setConn("offline");
  // Exponential backoff with jitter: 0.5 s, 1 s, 2 s, ... capped at 15 s.
  const base = Math.min(15000, 500 * 2 ** S.retries);
  const delay = Math.round(base * (0.75 + Math.random() * 0.5));
  S.retries += 1;
  S.retryAt = Date.now() + delay;
  clearTimeout(S.retryTimer);
  S.retryTimer = setTimeout(connect, delay);
  updateRetryBanner();
}

function updateRetryBanner() {
  if (!S.retryTimer) return;
  const secs = Math.max(0, Math.ceil((S.retryAt - Date.now()) / 1000));
  banner(`Connection lost — reconnecting${secs ? ` in ${secs} s` : ""}…`, true);
}

function setConn(state) {
  S.conn = state;
  const el = $("#conn");
  el.dataset.state = state;
  el.textContent = state;
}

function banner(text, retry = false) {
  const el = $("#banner");
  el.hidden = !text;
  $("#banner-text").textContent = text || "";
  $("#btn-retry").hidden = !retry;
}

// ---------------------------------------------------------------------------------------------
// Messages from the server

function handle(msg) {
  const ctx = msg.ref !== undefined ? S.pending.get(msg.ref) : undefined;
  if (msg.ref !== undefined) S.pending.delete(msg.ref);
  switch (msg.type) {
    case "welcome": return onWelcome(msg);
    case "event": return onEvent(msg, ctx);
    case "match": return onMatch(msg);
    case "error": return onError(msg, ctx);
    case "queued":
      S.queued = true;
      return renderLobby();
    case "unqueued":
      S.queued = false;
      return renderLobby();
    case "room":
      S.room = msg.code;
      return renderLobby();
    case "matches":
      S.liveMatches = msg.matches || [];
      return renderWatch();
    case "leaderboard":
      S.board = { by: msg.by || "rating", players: msg.players || [] };
      return renderBoard();
    case "rematch_offer":
      if (S.m && S.m.id === msg.match_id) {
        S.m.rematchOffered = true;
        renderMatch();
      }
      return;
    case "challenge":
      S.offer = msg;
      renderToast();
      $("#toast-yes").focus();
      return;
    case "challenge_sent":
      S.challenge = { id: msg.challenge_id, to: msg.to, state: "sent" };
      return renderLobby();
    case "declined":
      if (S.challenge && S.challenge.id === msg.challenge_id) S.challenge.state = "declined";
      return renderLobby();
    default:
      return; // pong, challenge_sent and anything newer: nothing to show
  }
}

function onWelcome(msg) {
  S.welcomed = true;
  S.retries = 0;
  clearTimeout(S.retryTimer);
  S.retryTimer = null;
  banner("");
  setConn("online");
  S.name = msg.name;
  save(LS.name, S.name);
  if (msg.token) {
    const tokens = load(LS.tokens, {});
    tokens[S.name.toLowerCase()] = msg.token;
    save(LS.tokens, tokens);
  }
  clearInterval(S.pingTimer);
  // An application ping now and then keeps an idle spectator's connection open.
  S.pingTimer = setInterval(() => send({ type: "ping" }), 60000);
  if (S.queued) send({ type: "queue", pacing: pacing() }); // the queue does not survive a drop
  if (Array.isArray(msg.strategies) && msg.strategies.length) setStrategies(msg.strategies);
  const open = msg.matches || [];
  if (S.m && S.m.phase !== "finished") {
    // Reconnected within this page: replay only what we missed.
    if (S.m.watch) send({ type: "watch", match_id: S.m.id, last_seq: S.m.lastSeq }, { matchId: S.m.id });
    else send({ type: "resume", match_id: S.m.id, last_seq: S.m.lastSeq }, { matchId: S.m.id });
  } else if (!S.m) {
    // A fresh page: come back to the match we were in (a reload mid-match), or watching.
    const stored = load(LS.match, null);
    const mine = open.find((x) => stored && x.match_id === stored.id) || open[0];
    if (mine) {
      S.m = newMatch(mine.match_id, mine.seat);
      S.tab = "match";
      save(LS.match, { id: mine.match_id, watch: false });
      send({ type: "resume", match_id: mine.match_id, last_seq: 0 }, { matchId: mine.match_id });
    } else if (stored && stored.watch) {
      S.m = newMatch(stored.id, null);
      S.tab = "match";
      send({ type: "watch", match_id: stored.id, last_seq: 0 }, { matchId: stored.id });
    } else if (stored) {
      save(LS.match, null);
    }
  }
  render();
  if (S.tab === "watch") refreshMatches();
  if (S.tab === "board") refreshBoard();
}

function setStrategies(names) {
  // The server's own list (welcome.strategies if it sends one, or an unknown_strategy error).
  const select = $("#bot-select");
  const known = new Map([...select.options].map((o) => [o.value, o.textContent]));
  const current = select.value;
  select.replaceChildren(...names.map((n) => el("option", { value: n, text: known.get(n) || n })));
  if (names.includes(current)) select.value = current;
}

function onMatch(msg) {
  if (S.m && !S.m.watch && S.m.id === msg.match_id) {
    // The server re-announces a match we already show when we resume it: keep its history.
    S.m.seat = msg.seat;
    S.m.opponent = msg.opponent;
    S.m.config = S.m.config || msg.config || null;
    render();
    return;
  }
  if (S.m && S.m.watch) send({ type: "unwatch", match_id: S.m.id });
  S.queued = false;
  S.room = null;
  S.challenge = null;
  S.offer = null;
  $("#rematch-note").textContent = "";
  $("#rematch-note").hidden = true;
  lobbyError("");
  S.m = newMatch(msg.match_id, msg.seat);
  S.m.opponent = msg.opponent;
  S.m.config = msg.config || null;
  const players = ["…", "…"];
  players[msg.seat] = S.name;
  players[1 - msg.seat] = msg.opponent;
  S.m.players = players;
  save(LS.match, { id: msg.match_id, watch: false });
  S.tab = "match";
  render();
  focusEntry();
}

function onError(msg, ctx) {
  const type = ctx ? ctx.type : null;
  const text = msg.message || msg.code;
  if (msg.code === "name_taken" || msg.code === "invalid_name" || msg.code === "bad_token"
      || msg.code === "not_hello" || type === "hello") {
    S.stopReconnect = true;
    S.manualClose = true;
    if (S.ws) S.ws.close();
    S.ws = null;
    setConn("offline");
    banner("");
    const why = msg.code === "name_taken" || msg.code === "bad_token"
      ? `${text} — that name belongs to someone else; pick another.` : text;
    showLogin(why);
    return;
  }
  if (type === "resume" || type === "watch") {
    // The match is gone (it ended while we were away, or is not visible): forget it.
    if (S.m && ctx.matchId === S.m.id) {
      const who = S.m.watch ? null : S.m.players[1 - S.m.seat];
      const seen = S.m.events > 0;
      S.tab = S.m.watch ? "watch" : "play";
      S.m = null;
      save(LS.match, null);
      render();
      if (seen) {
        lobbyError(who ? `Your match with ${who} ended while you were away.`
          : "That match has ended.");
      }
    }
    return;
  }
  if (type === "guess" || type === "secret") {
    const entry = $("#code-input");
    if (ctx.code && !entry.value) entry.value = ctx.code;
    showCodeError(`Not counted: ${text}`);
    renderPad();
    return;
  }
  if (type === "rematch") {
    if (S.m) S.m.rematchAsked = false;
    $("#rematch-note").hidden = false;
    $("#rematch-note").textContent = text;
    renderMatch();
    return;
  }
  if (type === "resign") return;
  if (msg.code === "unknown_strategy" && /available: /.test(text)) {
    setStrategies(text.split("available: ")[1].split(",").map((x) => x.trim()).filter(Boolean));
  }
  if (type === "challenge") {
    S.challenge = null;
    lobbyError(text);
    renderLobby();
    return;
  }
  if (type === "queue" || type === "play_bot" || type === "room_create" || type === "room_join"
      || type === "accept") {
    S.queued = false;
    lobbyError(text);
    renderLobby();
    return;
  }
  if (type === "leaderboard" || type === "matches" || type === "ping" || type === "unwatch") return;
  if (msg.code === "rate_limited") banner("Slow down: too many messages.");
}

// ---------------------------------------------------------------------------------------------
// Match events: a client-side replay of moo/match.py, limited to what this viewer may see.

function owes(m, i) {
  if (m.phase !== "playing") return false;
  if (m.solved[i] || m.counts[i] >= (m.config ? m.config.guess_cap : 64)) return false;
  if (m.config && m.config.pacing === "free") return true;
  return m.counts[i] === m.rounds;
}

function charge(m, i, at) {
  const c = m.clocks[i];
  if (c.left !== null && c.since !== null) c.left -= Math.max(0, at - c.since);
  c.since = null;
}

function runClocks(m, at) {
  for (const i of [0, 1]) {
    if (m.clocks[i].since === null && owes(m, i)) m.clocks[i].since = at;
  }
}

function entryOf(m, seat, n) {
  const list = m.guesses[seat];
  while (list.length < n) list.push({ n: list.length + 1, guess: null, bulls: null, cows: null });
  return list[n - 1];
}

function markSolved(m, seat, bulls) {
  if (bulls !== null && bulls !== undefined && bulls === rulesOf(m).length) m.solved[seat] = true;
}

function applyEvent(m, ev) {
  if (ev.seq <= m.lastSeq) return false;
  m.lastSeq = ev.seq;
  m.events += 1;
  const at = typeof ev.at === "number" ? ev.at : m.lastAt;
  const previousAt = m.lastAt;
  m.lastAt = at;
  m.offset = Date.now() - at;
  switch (ev.kind) {
    case "created":
      m.players = ev.players || m.players;
      m.config = ev.config || m.config;
      for (const c of m.clocks) c.left = m.config ? m.config.clock_total_ms ?? null : null;
      if (m.config && m.config.secret_ms) m.secretDeadline = at + m.config.secret_ms;
      if (m.seat !== null && !m.opponent) m.opponent = m.players[1 - m.seat];
      break;
    case "secret":
      m.secretSet[ev.seat] = true;
      if (ev.secret) m.mySecret = ev.secret;
      break;
    case "started":
      m.phase = "playing";
      m.commitments = ev.commitments || null;
      m.secretDeadline = null;
      runClocks(m, at);
      break;
    case "guess": {
      charge(m, ev.seat, at);
      const e = entryOf(m, ev.seat, ev.n);
      if (ev.guess !== undefined && ev.guess !== null) e.guess = ev.guess;
      if (ev.bulls !== undefined) { e.bulls = ev.bulls; e.cows = ev.cows; }
      m.counts[ev.seat] = Math.max(m.counts[ev.seat], ev.n);
      markSolved(m, ev.seat, ev.bulls);
      runClocks(m, at);
      break;
    }
    case "round":
      (ev.results || []).forEach((r, seat) => {
        const e = entryOf(m, seat, ev.n);
        if (r[0] !== null && r[0] !== undefined) e.guess = r[0];
        e.bulls = r[1];
        e.cows = r[2];
        m.counts[seat] = Math.max(m.counts[seat], ev.n);
        markSolved(m, seat, r[1]);
      });
      m.rounds = ev.n;
      runClocks(m, at);
      break;
    case "away":
      m.away[ev.seat] = true;
      m.awaySince[ev.seat] = at;
      break;
    case "back":
      m.away[ev.seat] = false;
      m.awaySince[ev.seat] = null;
      break;
    case "resumed":
      for (const i of [0, 1]) {
        const c = m.clocks[i];
        if (c.since !== null) {
          if (c.left !== null) c.left -= Math.max(0, previousAt - c.since);
          c.since = at;
        }
        m.away[i] = true;
        m.awaySince[i] = at;
      }
      if (m.secretDeadline !== null) m.secretDeadline += Math.max(0, at - previousAt);
      break;
    case "finished":
      for (const i of [0, 1]) charge(m, i, at);
      m.phase = "finished";
      m.result = ev;
      if (ev.counts) m.counts = ev.counts.slice();
      if (!m.commitments && ev.commitments) m.commitments = ev.commitments;
      if (!m.watch) save(LS.match, null);
      break;
    default:
      break; // resign, timeout and newer kinds: shown through "finished"
  }
  return true;
}

function onEvent(ev, ctx) {
  const m = S.m;
  if (!m || ev.match_id !== m.id) return;
  const wasPlaying = m.phase;
  const couldEnter = canEnter(m);
  if (!applyEvent(m, ev)) return;
  if (ctx && (ctx.type === "guess" || ctx.type === "secret")) {
    showCodeError("");
  }
  if (ev.kind === "finished") verifyFairness(m);
  renderMatch();
  if ((wasPlaying !== m.phase && m.phase === "playing") || (!couldEnter && canEnter(m))) {
    focusEntry();
  }
}

async function verifyFairness(m) {
  const r = m.result;
  if (!r || !r.secrets || !r.salts) return;
  const seen = m.commitments || r.commitments || [];
  const out = [];
  for (const i of [0, 1]) {
    const secret = r.secrets[i];
    const salt = r.salts[i];
    if (!secret || !salt) {
      out.push({ ok: null, computed: null });
      continue;
    }
    const computed = await commitment(secret, salt);
    const published = seen[i];
    const ok = computed === published && (!r.commitments || r.commitments[i] === published);
    out.push({ ok, computed });
  }
  m.fairness = out;
  if (S.m === m) renderMatch();
}

// ---------------------------------------------------------------------------------------------
// Actions

function pacing() {
  const el = document.querySelector('input[name="pacing"]:checked');
  return el ? el.value : "lockstep";
}

function lobbyError(text) {
  $("#lobby-error").textContent = text || "";
}

function requireFree() {
  // The page shows one match at a time: finish (or resign) the one you sit in first.
  if (!S.m || S.m.watch || S.m.phase === "finished") return true;
  lobbyError("You are already in a match — finish or resign it first.");
  $("#lobby-error").scrollIntoView({ block: "nearest" });
  return false;
}

function requireOnline() {
  if (S.conn === "online" && S.welcomed) return true;
  lobbyError("Not connected yet — hold on, reconnecting…");
  return false;
}

function showCodeError(text) {
  $("#code-error").textContent = text || "";
  $("#code-input").setAttribute("aria-invalid", text ? "true" : "false");
}

function submitCode() {
  const m = S.m;
  if (!m || m.watch) return;
  const input = $("#code-input");
  const isSecret = m.phase === "secrets";
  let code;
  try {
    code = checkCode(rulesOf(m), input.value, { secret: isSecret });
  } catch (err) {
    showCodeError(`${err.message} — not sent`);
    input.focus();
    return;
  }
  if (!canEnter(m)) return;
  const type = isSecret ? "secret" : "guess";
  const msg = isSecret
    ? { type, match_id: m.id, secret: code }
    : { type, match_id: m.id, guess: code };
  if (send(msg, { code }) === null) {
    showCodeError("Not connected — not sent. It will reconnect by itself.");
    return;
  }
  showCodeError("");
  input.value = "";
  renderPad();
}

function canEnter(m) {
  if (!m || m.watch || m.seat === null) return false;
  if (m.phase === "secrets") return !m.secretSet[m.seat];
  return owes(m, m.seat);
}

function focusEntry() {
  const input = $("#code-input");
  if (!$("#entry").hidden && !input.disabled && matchMedia("(pointer: fine)").matches) input.focus();
}

function leaveMatch() {
  const m = S.m;
  if (m && m.watch) send({ type: "unwatch", match_id: m.id });
  S.tab = m && m.watch ? "watch" : "play";
  if (S.tab === "watch") refreshMatches();
  S.m = null;
  save(LS.match, null);
  showCodeError("");
  render();
}

function refreshMatches() { send({ type: "matches" }); }
function refreshBoard() { send({ type: "leaderboard", by: S.board.by }); }

function setTab(tab) {
  if (tab !== "match" && S.m && S.m.phase === "finished") leaveMatch();
  S.tab = tab;
  if (tab === "watch") refreshMatches();
  if (tab === "board") refreshBoard();
  render();
  // The button pressed may belong to a view that is now hidden: keep focus in the content.
  if (!document.activeElement || document.activeElement.closest("[hidden]")) {
    $("#main").focus({ preventScroll: true });
  }
}

function showLogin(error) {
  S.welcomed = false;
  S.needLogin = true;
  render();
  $("#login-error").textContent = error || "";
  $("#name-input").value = S.name || "";
  $("#name-input").focus();
}

// ---------------------------------------------------------------------------------------------
// Rendering

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("data-")) node.setAttribute(k, String(v));
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function setText(node, text) {
  // Live regions re-announce on every write: only write what changed.
  if (node.textContent !== text) node.textContent = text;
}

function currentView() {
  if (!S.name || S.needLogin) return "login";
  if (S.tab === "match") return S.m ? "match" : "play";
  return S.tab;
}

function render() {
  const view = currentView();
  document.body.dataset.view = view;
  for (const v of ["login", "play", "watch", "board", "match"]) {
    $(`#view-${v}`).hidden = v !== view;
  }
  const signedIn = view !== "login";
  $("#nav").hidden = !signedIn;
  $("#conn").hidden = !signedIn && S.conn === "offline";
  $("#btn-logout").hidden = !signedIn;
  $("#me-name").textContent = signedIn ? S.name : "";
  const matchTab = $("#tab-match");
  matchTab.hidden = !S.m;
  if (S.m) {
    const live = S.m.phase !== "finished";
    matchTab.querySelector(".tab-text").textContent = S.m.watch ? "Watching" : "Match";
    matchTab.classList.toggle("live", live);
  }
  for (const b of document.querySelectorAll("#nav .tab")) {
    if (b.dataset.tab === view) b.setAttribute("aria-current", "page");
    else b.removeAttribute("aria-current");
  }
  if (view === "play") renderLobby();
  if (view === "watch") renderWatch();
  if (view === "board") renderBoard();
  if (view === "match") renderMatch();
  renderToast();
}

function renderLobby() {
  const cs = $("#challenge-status");
  cs.hidden = !S.challenge;
  if (S.challenge) {
    cs.textContent = S.challenge.state === "declined"
      ? `${S.challenge.to} declined your challenge.`
      : `Challenge sent to ${S.challenge.to} — waiting for an answer…`;
  }
  $("#queue-status").hidden = !S.queued;
  $("#btn-queue").hidden = S.queued;
  $("#room-status").hidden = !S.room;
  $("#room-code").textContent = S.room || "";
  $("#btn-room-create").hidden = !!S.room;
}

function renderWatch() {
  const list = $("#live-list");
  list.replaceChildren();
  const live = S.liveMatches.filter((x) => x.phase !== "finished");
  for (const x of live) {
    const counts = x.counts ? `${x.counts[0]} – ${x.counts[1]} guesses` : "";
    const btn = el("button", { type: "button", class: "btn small", "data-watch": x.match_id },
      "Watch");
    btn.addEventListener("click", () => watchMatch(x.match_id));
    list.append(el("li", { class: "live-item", "data-match": x.match_id },
      el("div", { class: "live-players" },
        el("strong", { text: x.players[0] }), el("span", { class: "vs-small", text: "vs" }),
        el("strong", { text: x.players[1] })),
      el("div", { class: "live-meta" },
        el("span", { class: "chip", text: x.pacing }),
        el("span", { class: "chip", text: x.phase === "secrets" ? "choosing secrets" : "playing" }),
        el("span", { class: "muted", text: counts })),
      btn));
  }
  $("#live-empty").hidden = live.length > 0;
}

function watchMatch(id) {
  if (!requireOnline() || !requireFree()) return;
  if (S.m && S.m.watch && S.m.id !== id) send({ type: "unwatch", match_id: S.m.id });
  S.m = newMatch(id, null);
  S.tab = "match";
  save(LS.match, { id, watch: true });
  send({ type: "watch", match_id: id, last_seq: 0 }, { matchId: id });
  render();
}

function fmt(value, digits = 1) {
  return value === null || value === undefined ? "—" : Number(value).toFixed(digits);
}

function renderBoard() {
  for (const r of document.querySelectorAll('input[name="board-by"]')) {
    r.checked = r.value === S.board.by;
  }
  const body = $("#board-body");
  body.replaceChildren();
  S.board.players.forEach((p, i) => {
    const me = p.name.toLowerCase() === (S.name || "").toLowerCase();
    body.append(el("tr", { class: me ? "me" : null, "data-player": p.name },
      el("td", { class: "rank", text: String(i + 1) }),
      el("th", { scope: "row", class: "player", text: p.name }),
      el("td", { class: "num strong", text: fmt(p.rating, 0) }),
      el("td", { class: "num", text: String(p.games ?? 0) }),
      el("td", { class: "num", text: `${p.wins ?? 0}–${p.draws ?? 0}–${p.losses ?? 0}` }),
      el("td", { class: "num", text: fmt(p.avg_guesses, 2) }),
      el("td", { class: "num hide-sm", text: p.avg_time_s == null ? "—" : `${fmt(p.avg_time_s, 1)} s` })));
  });
  $("#board-empty").hidden = S.board.players.length > 0;
}

function clockText(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function clockFor(m, i) {
  // Remaining time the clock shows now, or null when the match has no clock for it.
  const cfg = m.config || {};
  const c = m.clocks[i];
  const now = Date.now() - m.offset;
  const running = c.since !== null && m.phase === "playing";
  let shown = null;
  if (c.left !== null && c.left !== undefined) shown = c.left - (running ? now - c.since : 0);
  if (cfg.clock_guess_ms && running) {
    const perGuess = cfg.clock_guess_ms - (now - c.since);
    shown = shown === null ? perGuess : Math.min(shown, perGuess);
  }
  if (m.phase === "secrets" && m.secretDeadline && !m.secretSet[i]) {
    shown = m.secretDeadline - now;
  }
  return shown === null ? null : { ms: shown, running: running || m.phase === "secrets" };
}

function renderClocks() {
  const m = S.m;
  if (!m) return;
  // The sides are drawn you-first; clocks follow the seat shown on each side.
  for (const pos of [0, 1]) {
    const i = Number($(`#side-${pos}`).dataset.seat ?? pos);
    const note = $(`#side-${pos} .away-note`);
    const grace = m.config ? m.config.grace_ms : null;
    const showAway = m.away[i] && m.phase !== "finished" && m.awaySince[i] !== null && grace;
    note.hidden = !showAway;
    if (showAway) {
      const left = m.awaySince[i] + grace - (Date.now() - m.offset);
      note.textContent = `away · ${clockText(left)} to return`;
    }
    const node = $(`#side-${pos} .clock`);
    const c = m.phase === "finished" && !(m.config && (m.config.clock_total_ms || m.config.clock_guess_ms))
      ? null : clockFor(m, i);
    node.hidden = c === null;
    if (c) {
      node.textContent = clockText(c.ms);
      node.classList.toggle("running", c.running);
      node.classList.toggle("low", c.running && c.ms < 10000);
    }
  }
}

function sideLabel(m, i) {
  if (m.watch) return null;
  return i === m.seat ? "you" : null;
}

function historyRow(m, seat, e) {
  const length = rulesOf(m).length;
  const known = e.bulls !== null && e.bulls !== undefined;
  const guessText = e.guess === null || e.guess === undefined ? "•".repeat(length) : e.guess;
  const badge = known
    ? el("span", {
      class: `badge${e.bulls === length ? " win" : ""}`,
      "aria-label": `${e.bulls} bull${e.bulls === 1 ? "" : "s"}, ${e.cows} cow${e.cows === 1 ? "" : "s"}`,
      text: formatResponse(e.bulls, e.cows),
    })
    : el("span", { class: "badge pending", "aria-label": "waiting for the round", text: "…" });
  const pips = el("span", { class: "pips", "aria-hidden": "true" });
  if (known) {
    for (let k = 0; k < length; k++) {
      const kind = k < e.bulls ? "bull" : k < e.bulls + e.cows ? "cow" : "miss";
      pips.append(el("i", { class: `pip ${kind}` }));
    }
  }
  return el("li", {
    class: `hist-row${known ? "" : " pending"}${e.guess === null ? " hidden-guess" : ""}`,
    "data-n": e.n,
    "data-guess": e.guess ?? "",
    "data-bulls": known ? e.bulls : "",
    "data-cows": known ? e.cows : "",
  },
  el("span", { class: "n", text: String(e.n) }),
  el("span", { class: "g", text: guessText, "aria-label": e.guess ? `guess ${e.guess}` : "hidden guess" }),
  pips, badge);
}

function statusText(m) {
  const opp = m.seat === null ? null : m.players[1 - m.seat];
  if (m.watch) {
    if (m.phase === "secrets") return "Watching live · the players are choosing their secrets…";
    if (m.phase === "playing") {
      return m.config && m.config.pacing === "free"
        ? "Watching live · free race in progress"
        : `Watching live · round ${m.rounds + 1}`;
    }
    return "";
  }
  if (m.phase === "secrets") {
    if (!m.secretSet[m.seat]) return `Choose your secret: ${rulesOf(m).length} ${rulesOf(m).repeats_in_guess ? "" : "distinct "}${symbolsText(rulesOf(m)).split(" ")[0]}. ${opp} will try to crack it.`;
    return `Waiting for ${opp} to choose a secret…`;
  }
  if (m.phase === "playing") {
    const away = m.away[1 - m.seat] ? ` ${opp} has dropped out — they have a grace period to come back.` : "";
    if (m.solved[m.seat]) return `You cracked it in ${m.counts[m.seat]}! Waiting for ${opp}…${away}`;
    if (owes(m, m.seat)) {
      if (m.config && m.config.pacing === "free") return `Your move.${away}`;
      const theyGuessed = m.counts[1 - m.seat] > m.rounds ? ` ${opp} has guessed —` : "";
      return `Round ${m.rounds + 1}:${theyGuessed} your guess.${away}`;
    }
    const cap = m.config ? m.config.guess_cap : 64;
    if (m.counts[m.seat] >= cap) return `You have used all ${cap} guesses. Waiting for ${opp}…${away}`;
    return `Waiting for ${opp}'s guess…${away}`;
  }
  return "";
}

function resultTexts(m) {
  const r = m.result;
  const names = m.players;
  let title;
  if (r.winner === null || r.winner === undefined) title = "Draw";
  else if (m.watch) title = `${names[r.winner]} wins`;
  else title = r.winner === m.seat ? "You win!" : "You lose";
  const loser = r.winner === null || r.winner === undefined ? null : names[1 - r.winner];
  const counts = r.counts || m.counts;
  let detail;
  switch (r.reason) {
    case "solved":
      if (r.winner === null || r.winner === undefined) detail = `Both cracked it in ${counts[0]} guesses.`;
      else {
        const w = r.winner;
        const plural = (k) => `${k} guess${k === 1 ? "" : "es"}`;
        const other = r.solved && r.solved[1 - w]
          ? `${names[1 - w]} needed ${plural(counts[1 - w])}.`
          : `${names[1 - w]} had not cracked it after ${plural(counts[1 - w])}.`;
        detail = `${names[w]} cracked it in ${plural(counts[w])}; ${other}`;
      }
      break;
    case "resign": detail = `${loser} resigned.`; break;
    case "timeout": detail = loser ? `${loser} ran out of time.` : "Both ran out of time."; break;
    case "disconnect": detail = loser ? `${loser} left and did not come back.` : "Both players left."; break;
    case "guess_cap": detail = `Nobody cracked it within ${m.config ? m.config.guess_cap : 64} guesses.`; break;
    default: detail = r.reason || "";
  }
  return { title, detail };
}

function renderFairness(m) {
  const list = $("#fairness");
  list.replaceChildren();
  const r = m.result;
  const seen = m.commitments || r.commitments || [];
  for (const i of [0, 1]) {
    const f = m.fairness ? m.fairness[i] : undefined;
    const secret = r.secrets ? r.secrets[i] : null;
    let mark; let state; let label;
    if (!m.fairness) { mark = "…"; state = "checking"; label = "checking"; }
    else if (f.ok === null) { mark = "–"; state = "none"; label = "no secret was set"; }
    else if (f.ok) { mark = "✓"; state = "ok"; label = "commitment verified"; }
    else { mark = "✗"; state = "bad"; label = "commitment does NOT match"; }
    const hash = seen[i] ? `${seen[i].slice(0, 12)}…` : "—";
    list.append(el("li", { class: `fair ${state}`, "data-seat": i, "data-ok": state },
      el("span", { class: "mark", "aria-hidden": "true", text: mark }),
      el("span", { class: "fair-body" },
        el("span", { class: "fair-name", text: `${m.players[i]}'s secret ` }),
        el("strong", { class: "secret", text: secret || "—" }),
        el("span", { class: "fair-hash", title: seen[i] || "", text: ` · commitment ${hash}` }),
        el("span", { class: "sr-only", text: ` — ${label}` }))));
  }
}

function renderPad() {
  const m = S.m;
  const pad = $("#pad");
  const rules = rulesOf(m);
  const input = $("#code-input");
  const value = input.value;
  const distinct = m && (m.phase === "secrets" || !rules.repeats_in_guess);
  const enabled = m && canEnter(m) && S.conn === "online";
  if (pad.dataset.alphabet !== rules.alphabet) {
    pad.replaceChildren();
    for (const ch of rules.alphabet) {
      const b = el("button", { type: "button", class: "key", "data-key": ch, "aria-label": `${ch}` }, ch);
      b.addEventListener("click", () => typeKey(ch));
      pad.append(b);
    }
    const back = el("button", { type: "button", class: "key wide", "data-key": "Backspace", "aria-label": "Delete last digit" }, "⌫");
    back.addEventListener("click", () => typeKey("Backspace"));
    pad.append(back);
    pad.dataset.alphabet = rules.alphabet;
  }
  const noting = S.notesMode && m && m.phase === "playing";
  pad.classList.toggle("noting", !!noting);
  for (const b of pad.querySelectorAll(".key")) {
    const k = b.dataset.key;
    const note = m && m.phase === "playing" ? m.notes[k] : undefined;
    if (k === "Backspace") {
      b.disabled = noting || !enabled || !value;
      continue;
    }
    if (note) b.dataset.note = note;
    else delete b.dataset.note;
    b.setAttribute("aria-label", note === "out" ? `${k}, marked not in the code`
      : note === "in" ? `${k}, marked in the code` : k);
    b.disabled = noting ? false
      : !enabled || (distinct && value.includes(k)) || [...value].length >= rules.length;
  }
  const notesBtn = $("#btn-notes");
  notesBtn.hidden = !m || m.watch || m.phase !== "playing";
  notesBtn.setAttribute("aria-pressed", noting ? "true" : "false");
  notesBtn.textContent = noting ? "Notes on — tap digits to mark" : "Notes";
  $("#code-submit").disabled = !enabled;
  input.disabled = !enabled;
}

function typeKey(key) {
  if (S.notesMode && S.m && S.m.phase === "playing" && key !== "Backspace") {
    // Notes: none -> out (✗) -> in (✓) -> none.
    const notes = S.m.notes;
    if (!notes[key]) notes[key] = "out";
    else if (notes[key] === "out") notes[key] = "in";
    else delete notes[key];
    renderPad();
    return;
  }
  const input = $("#code-input");
  const rules = rulesOf(S.m);
  if (key === "Backspace") input.value = [...input.value].slice(0, -1).join("");
  else if ([...input.value].length < rules.length) input.value += key;
  showCodeError("");
  renderPad();
}

function renderMatch() {
  const m = S.m;
  if (!m || currentView() !== "match") return;
  const view = $("#view-match");
  view.dataset.phase = m.phase;
  view.dataset.mode = m.watch ? "watch" : "play";
  // Sides: you first when playing, seat order when spectating.
  const order = m.watch || m.seat === null ? [0, 1] : [m.seat, 1 - m.seat];
  order.forEach((seat, pos) => {
    const side = $(`#side-${pos}`);
    side.dataset.seat = seat;
    side.querySelector(".pname").textContent = m.players[seat];
    side.querySelector(".tag").textContent = sideLabel(m, seat) || "";
    side.querySelector(".count").textContent = m.phase === "secrets"
      ? (m.secretSet[seat] ? "secret set" : "choosing secret…")
      : `${m.counts[seat]} guess${m.counts[seat] === 1 ? "" : "es"}${m.solved[seat] ? " · solved" : ""}`;
    side.classList.toggle("away", m.away[seat]);
    side.classList.toggle("to-move", owes(m, seat));
    side.classList.toggle("winner", !!m.result && m.result.winner === seat);
    const title = $(`#hist-title-${pos}`);
    title.textContent = !m.watch && seat === m.seat ? "Your guesses" : `${m.players[seat]}'s guesses`;
    const list = $(`#hist-${pos}`);
    list.dataset.seat = seat;
    list.replaceChildren(...m.guesses[seat].map((e) => historyRow(m, seat, e)));
    list.nextElementSibling.hidden = m.guesses[seat].length > 0;
    list.scrollTop = list.scrollHeight; // newest guess in view, without scrolling the page
  });
  setText($("#match-status"), statusText(m));

  // Entry: secret first, then guesses; hidden for spectators and at the end.
  const entry = $("#entry");
  const showEntry = !m.watch && m.phase !== "finished" && m.config !== null;
  entry.hidden = !showEntry;
  if (showEntry) {
    const rules = rulesOf(m);
    const isSecret = m.phase === "secrets";
    entry.dataset.mode = isSecret ? "secret" : "guess";
    $("#code-label").textContent = isSecret ? "Your secret code" : "Your guess";
    $("#code-submit").textContent = isSecret ? "Set secret" : "Guess";
    $("#btn-random").hidden = !isSecret || m.secretSet[m.seat];
    const input = $("#code-input");
    input.maxLength = rules.length;
    input.inputMode = /^[0-9]+$/.test(rules.alphabet) ? "numeric" : "text";
    input.placeholder = "·".repeat(rules.length);
    $("#code-hint").textContent = `${rules.length} ${isSecret || !rules.repeats_in_guess ? "distinct " : ""}${symbolsText(rules)} · type or tap, then Enter`;
    renderPad();
  }
  const mySecret = $("#my-secret");
  mySecret.hidden = m.watch || !m.mySecret || m.phase === "finished";
  mySecret.textContent = m.mySecret ? `Your secret: ${m.mySecret}` : "";
  $("#btn-resign").hidden = m.watch || m.phase === "finished";
  $("#btn-stop-watch").hidden = !m.watch || m.phase === "finished";

  // Result
  const panel = $("#result-panel");
  panel.hidden = m.phase !== "finished";
  if (m.phase === "finished" && m.result) {
    const { title, detail } = resultTexts(m);
    setText($("#result-title"), title);
    setText($("#result-detail"), detail);
    const outcome = m.result.winner === null || m.result.winner === undefined ? "draw"
      : m.watch ? "over" : m.result.winner === m.seat ? "win" : "loss";
    panel.dataset.outcome = outcome;
    renderFairness(m);
    const rematch = $("#btn-rematch");
    rematch.hidden = m.watch;
    rematch.disabled = m.rematchAsked;
    rematch.textContent = m.rematchOffered && !m.rematchAsked ? "Accept rematch" : m.rematchAsked ? "Rematch asked…" : "Rematch";
    const note = $("#rematch-note");
    if (m.rematchOffered && !m.rematchAsked) {
      note.hidden = false;
      note.textContent = `${m.players[1 - m.seat]} wants a rematch.`;
    } else if (m.rematchAsked) {
      note.hidden = false;
      note.textContent = `Waiting for ${m.players[1 - m.seat]} to accept…`;
    } else if (!note.textContent) {
      note.hidden = true;
    }
  }
  renderClocks();
}

function renderToast() {
  const t = $("#toast");
  t.hidden = !S.offer || currentView() === "login";
  if (S.offer) {
    const pace = S.offer.pacing ? ` (${S.offer.pacing})` : "";
    $("#toast-text").textContent = `${S.offer.from} challenges you to a match${pace}.`;
  }
}

// ---------------------------------------------------------------------------------------------
// Wiring

function wire() {
  $("#login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = $("#name-input").value.trim();
    if (!/^[A-Za-z0-9_.-]{1,24}$/.test(name)) {
      $("#login-error").textContent = "Use 1–24 letters, digits, _ - or .";
      $("#name-input").focus();
      return;
    }
    $("#login-error").textContent = "";
    if (name.toLowerCase() !== (S.name || "").toLowerCase()) {
      S.m = null;
      save(LS.match, null);
    }
    S.name = name;
    S.needLogin = false;
    save(LS.name, name);
    S.tab = "play";
    connect();
    render();
  });
  $("#btn-logout").addEventListener("click", () => {
    S.manualClose = true;
    S.stopReconnect = true;
    clearTimeout(S.retryTimer);
    S.retryTimer = null;
    if (S.ws) S.ws.close(1000);
    S.ws = null;
    S.m = null;
    S.queued = false;
    S.room = null;
    save(LS.match, null);
    save(LS.name, null);
    setConn("offline");
    banner("");
    showLogin("");
  });
  $("#btn-retry").addEventListener("click", () => {
    S.retries = 0;
    S.stopReconnect = false;
    connect();
  });
  for (const b of document.querySelectorAll("#nav .tab")) {
    b.addEventListener("click", () => setTab(b.dataset.tab));
  }
  $("#btn-queue").addEventListener("click", () => {
    if (!requireOnline() || !requireFree()) return;
    lobbyError("");
    send({ type: "queue", pacing: pacing() });
    S.queued = true;
    renderLobby();
  });
  $("#btn-unqueue").addEventListener("click", () => {
    send({ type: "unqueue" });
    S.queued = false;
    renderLobby();
  });
  $("#btn-bot").addEventListener("click", () => {
    if (!requireOnline() || !requireFree()) return;
    lobbyError("");
    send({ type: "play_bot", strategy: $("#bot-select").value, pacing: pacing() });
  });
  $("#btn-room-create").addEventListener("click", () => {
    if (!requireOnline() || !requireFree()) return;
    lobbyError("");
    send({ type: "room_create", pacing: pacing() });
  });
  $("#join-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const code = $("#room-input").value.trim();
    if (!code) {
      lobbyError("Enter the room code you were given.");
      $("#room-input").focus();
      return;
    }
    if (!requireOnline() || !requireFree()) return;
    lobbyError("");
    send({ type: "room_join", code });
  });
  $("#challenge-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const opponent = $("#challenge-input").value.trim();
    if (!opponent) {
      lobbyError("Enter the name of a player who is online.");
      $("#challenge-input").focus();
      return;
    }
    if (!requireOnline() || !requireFree()) return;
    lobbyError("");
    send({ type: "challenge", opponent, pacing: pacing() });
  });
  $("#btn-refresh-matches").addEventListener("click", refreshMatches);
  for (const r of document.querySelectorAll('input[name="board-by"]')) {
    r.addEventListener("change", () => {
      S.board.by = r.value;
      refreshBoard();
    });
  }
  $("#entry").addEventListener("submit", (e) => {
    e.preventDefault();
    submitCode();
  });
  $("#code-input").addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      $("#code-input").value = "";
      showCodeError("");
      renderPad();
    }
  });
  $("#code-input").addEventListener("input", () => {
    showCodeError("");
    renderPad();
  });
  $("#btn-notes").addEventListener("click", () => {
    S.notesMode = !S.notesMode;
    renderPad();
  });
  $("#btn-random").addEventListener("click", () => {
    $("#code-input").value = randomSecret(rulesOf(S.m));
    showCodeError("");
    renderPad();
    $("#code-input").focus();
  });
  // Resigning takes two taps (no blocking dialog): the first arms the button for 4 seconds.
  let disarm = null;
  $("#btn-resign").addEventListener("click", () => {
    const m = S.m;
    const btn = $("#btn-resign");
    if (!m || m.watch) return;
    clearTimeout(disarm);
    if (btn.dataset.armed !== "true") {
      btn.dataset.armed = "true";
      btn.textContent = "Really resign? Tap again";
      disarm = setTimeout(() => {
        btn.dataset.armed = "false";
        btn.textContent = "Resign";
      }, 4000);
      return;
    }
    btn.dataset.armed = "false";
    btn.textContent = "Resign";
    send({ type: "resign", match_id: m.id });
  });
  $("#btn-stop-watch").addEventListener("click", leaveMatch);
  $("#btn-leave").addEventListener("click", leaveMatch);
  $("#btn-rematch").addEventListener("click", () => {
    const m = S.m;
    if (!m || m.watch || !requireOnline()) return;
    m.rematchAsked = true;
    $("#rematch-note").textContent = "";
    send({ type: "rematch", match_id: m.id });
    renderMatch();
  });
  $("#toast-yes").addEventListener("click", () => {
    if (S.offer) send({ type: "accept", challenge_id: S.offer.challenge_id });
    S.offer = null;
    renderToast();
  });
  $("#toast-no").addEventListener("click", () => {
    if (S.offer) send({ type: "decline", challenge_id: S.offer.challenge_id });
    S.offer = null;
    renderToast();
  });
  // Typing anywhere on the match screen goes to the code entry.
  document.addEventListener("keydown", (e) => {
    if (currentView() !== "match" || e.ctrlKey || e.metaKey || e.altKey) return;
    const input = $("#code-input");
    if ($("#entry").hidden || input.disabled || document.activeElement === input) return;
    const tag = document.activeElement ? document.activeElement.tagName : "";
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    const rules = rulesOf(S.m);
    if (e.key.length === 1 && rules.alphabet.includes(e.key)) {
      e.preventDefault();
      input.focus();
      typeKey(e.key);
    } else if (e.key === "Backspace") {
      e.preventDefault();
      input.focus();
      typeKey("Backspace");
    } else if (e.key === "Enter" && (tag === "BODY" || tag === "MAIN")) {
      e.preventDefault();
      submitCode();
    }
  });
  // Phones suspend background tabs: come back at once instead of waiting out the backoff.
  const wake = () => {
    if (!S.ws && S.name && !S.stopReconnect && !S.needLogin) {
      S.retries = 0;
      connect();
    }
  };
  window.addEventListener("online", wake);
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) wake();
  });
  let ticks = 0;
  S.tickTimer = setInterval(() => {
    ticks += 1;
    if (S.retryTimer) updateRetryBanner();
    if (S.m && currentView() === "match") renderClocks();
    // The live list refreshes itself while it is on screen.
    if (ticks % 20 === 0 && currentView() === "watch" && S.welcomed && !document.hidden) {
      refreshMatches();
    }
  }, 250);
}

wire();
if (S.name) {
  connect();
  render();
} else {
  showLogin("");
}

// A read-only handle for debugging from the console.
window.moo = { state: S };
