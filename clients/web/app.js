// MOO Arena browser client: protocol v1 over the moo.v1.json subprotocol (docs/protocol.md).
// No framework: one state object, one render per change, the DOM in index.html.

import {
  DEFAULT_RULES, answerWords, assist, checkCode, commitment, formatAnswer, isClassic,
  isHitsMisses, isMastermind, isWords, pegColour, randomSecret, rulesLabel, rulesSpec, sha256Fallback,
  symbolsText,
} from "./rules.js";

const $ = (sel) => document.querySelector(sel);
const LS = {
  name: "moo.name",
  tokens: "moo.tokens",   // {lower-case name: resume token}
  match: "moo.match",     // {id, watch} of the match on screen, to come back to after a reload
  variant: "moo.variant", // the Game picker's last choice (a rules spec)
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
  unanswered: [],           // lobby requests a closed connection left unanswered: resent after welcome
  tab: "play",              // play | watch | board | tourneys | tourney | match | ...
  needLogin: false,
  queued: false,
  variants: [DEFAULT_RULES], // welcome.variants: the rules this server offers, default first
  analyses: {}, // match id -> {state: "loading" | "done" | "error", players, error}
  room: null,
  m: null,                  // the match on screen (see newMatch)
  liveMatches: [],
  board: { by: "rating", players: [] },
  offer: null,              // incoming challenge {challenge_id, from}
  rematch: null,            // a rematch offer {match_id, from} for a match no longer on screen
  opponents: {},            // match id -> the opponent's name, for the notices about it
  challenge: null,          // our outgoing challenge {id, to, state}
  acceptAfter: null,        // {challengeId, matchId}: accept once that match has ended (resigned)
  afterFinish: null,        // {matchId, then}: run `then` once that match has ended
  extra: null,              // a second match announced while one is live (a server without in_match)
  password: null,           // typed on the sign-in screen; sent once in hello, never stored
  moving: false,            // a resume was refused as "try again" (a cluster takeover): retrying
  secured: false,           // welcome.secured: the name has a password
  loginNote: "",            // why the sign-in screen is shown (a shared link, a sign-out elsewhere)
  player: null,             // the player page on screen: {name, data, rows, next, error, loading}
  record: null,             // the finished match on screen: {id, events, step, steps, error, live}
  tourneys: { list: [], loaded: false }, // the Tournaments tab: summaries from `tournaments`
  tourney: null,            // the tournament page on screen: {id, data, error, watching}
  tourneyNames: {},         // tournament id -> name, for a tournament match's label
  next: null,               // {msg, at}: the next tournament game, waiting behind a result
  ladder: { rows: [], loaded: false, at: 0, error: "" }, // the Ladder tab: `ladder_standings`
  bot: null,                // the bot page on screen: {id, data, error}
  // your hosted bots (`ladder_mine`), the submission under way, what the page says about each
  mine: newMine(""),
  focusAfterWelcome: false, // the sign-in form was sent: focus the next screen once welcomed
  notesMode: false,         // pad taps mark digits instead of typing them
  pingTimer: null,
  tickTimer: null,
};

/** Your hosted bots and what the page is doing with them (the Ladder section below). */
function newMine(owner) {
  return {
    owner, bots: [], job: null, notes: {}, verdicts: {}, open: {}, busy: null, armed: null,
    versionFor: null, formError: "",
    spare: {}, // sha256 -> an upload refused at submit, still open on this connection
  };
}

function newMatch(id, seat, watch = seat === null) {
  return {
    id,
    seat,                       // 0, 1, or null when spectating (or not yet known)
    watch,
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
    tournamentId: null,         // the tournament this match is a game of (match.tournament_id)
    events: 0,
    synced: false,              // this connection has the match (its match message came)
    outbox: null,               // {type, code, phase, count, n}: a move entered offline, sent on resume
    sentN: 0,                   // the number of our latest guess sent and not yet answered
  };
}

function rulesOf(m) {
  return (m && m.config && m.config.rules) || DEFAULT_RULES;
}

// ---------------------------------------------------------------------------------------------
// Connection

// The requests that make something (a queue entry, room, challenge, match, tournament, a
// participant, a ladder bot or version): each carries a request_id, fixed at the first try, so
// that sending it again after a lost answer is answered as the first was (docs/protocol.md,
// "Retrying safely").
const REQUEST_ID_TYPES = new Set(["queue", "challenge", "accept", "room_create", "room_join",
  "play_bot", "rematch", "tournament_create", "tournament_join", "ladder_submit"]);
// a request refused with "try again" (or storage_unavailable) is sent again this many times
const REQUEST_RETRIES = 5;

function newRequestId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16)); // (randomUUID needs https)
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function send(msg, context) {
  if (!S.ws || S.ws.readyState !== WebSocket.OPEN) return null;
  const id = S.nextId++;
  if (REQUEST_ID_TYPES.has(msg.type) && !msg.request_id) msg = { ...msg, request_id: newRequestId() };
  const ctx = { type: msg.type, ...(context || {}) };
  if (msg.request_id) ctx.request = msg; // kept for a resend under the same request_id
  S.pending.set(id, ctx);
  S.ws.send(JSON.stringify({ ...msg, id }));
  return id;
}

/** Send a lobby request again, under its request_id (a lost answer, or "try again"). */
function resend(ctx) {
  const tries = (ctx.tries || 0) + 1;
  if (tries > REQUEST_RETRIES) return false;
  const { type, request, ...rest } = ctx;
  return send(request, { ...rest, tries }) !== null;
}

function tokenFor(name) {
  return load(LS.tokens, {})[name.toLowerCase()] || null;
}

function storeToken(name, token) {
  const tokens = load(LS.tokens, {});
  tokens[name.toLowerCase()] = token;
  save(LS.tokens, tokens);
}

function forgetToken(name) {
  const tokens = load(LS.tokens, {});
  delete tokens[(name || "").toLowerCase()];
  save(LS.tokens, tokens);
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
    if (S.password) hello.password = S.password;
    else if (token) hello.token = token;
    send(hello, { name: S.name, withPassword: !!S.password, withToken: !S.password && !!token });
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
    // moves wait until the match is resumed on the next connection (flushOutbox); the guesses
    // sent on this one and not answered are counted from the resumed match's events
    if (S.m) {
      keepUnanswered(S.m);
      S.m.synced = false;
      S.m.sentN = 0;
    }
    // lobby requests not answered yet: they may have been done; sent again after the welcome
    S.unanswered = [...S.pending.values()].filter((c) => c.request);
    S.pending.clear();
    ladderConnectionLost();
    clearInterval(S.pingTimer);
    if (S.manualClose) {
      setConn("offline");
      return;
    }
    if (e.code === 4001) {
      S.stopReconnect = true;
      setConn("offline");
      banner("This name was signed in somewhere else (another tab, window or device), which took over its matches. Retry takes it back here.", true);
      return;
    }
    if (e.code === 4003) {
      // Signed out everywhere from another device: this browser's token no longer works.
      forgetToken(S.name);
      S.stopReconnect = true;
      setConn("offline");
      banner("");
      showLogin("", {
        note: `“${S.name}” was signed out everywhere from another device. Sign in with its password to come back.`,
        password: true,
      });
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
  // nobody's presence is known while this page is offline: the scoreboard's dots say so
  $("#view-match").dataset.conn = state;
  for (const dot of document.querySelectorAll("#view-match .scoreboard .dot")) {
    dot.title = state === "online" ? "" : "Not known: this page is offline";
  }
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
    case "event":
      if (S.m && msg.match_id === S.m.id) S.m.heardAt = Date.now();
      return onEvent(msg, ctx);
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
    case "room_closed":
      if (!S.room || S.room === msg.code) S.room = null;
      return renderLobby();
    case "password_set": return onPasswordSet();
    case "signed_out": return onSignedOut(msg);
    case "player": return onPlayer(msg);
    case "history": return onHistory(msg);
    case "match_record": return onRecord(msg);
    case "analysis":
      S.analyses[msg.match_id] = { state: "done", players: msg.players || [] };
      return renderAnalyses();
    case "matches":
      S.liveMatches = msg.matches || [];
      return renderWatch();
    case "tournaments":
      S.tourneys = { list: msg.tournaments || [], loaded: true };
      for (const t of S.tourneys.list) S.tourneyNames[t.tournament_id] = t.name;
      return renderTourneys();
    case "tournament": return onTourney(msg, ctx);
    case "ladder_uploaded": return onUploaded(msg, ctx);
    case "ladder_submitted": return onSubmitted(msg, ctx);
    case "ladder_checked": return onChecked(msg);
    case "ladder_mine":
      S.mine.bots = msg.bots || [];
      return renderMine();
    case "ladder_status": return onBotStatus(msg, ctx);
    case "ladder_standings": return onLadderStandings(msg, ctx);
    case "ladder_page": return onBotPage(msg);
    case "tournament_joined":
    case "tournament_left":
      if (S.tourney && S.tourney.id === msg.tournament_id) {
        S.tourney.busy = false;
        renderTourney();
      }
      return;
    case "leaderboard":
      S.board = {
        by: msg.by || "rating", variant: msg.variant || rulesSpec(DEFAULT_RULES),
        players: msg.players || [],
      };
      return renderBoard();
    case "rematch_offer":
      if (S.m && S.m.id === msg.match_id) {
        S.m.rematchOffered = true;
        renderMatch();
      }
      // Anywhere else (a live match since, another tab) it is a notice, as a challenge is.
      S.rematch = { match_id: msg.match_id, from: S.opponents[msg.match_id] || "Your last opponent" };
      renderToast();
      return;
    case "challenge":
      // A notice, never a focus thief: Enter typed for a guess must not answer it.
      S.offer = msg;
      renderToast();
      return;
    case "challenge_sent":
      S.challenge = { id: msg.challenge_id, to: msg.to, state: "sent" };
      return renderLobby();
    case "declined":
      // Also the decliner's own confirmation (a reply with ref): nothing more to show then.
      if (S.challenge && S.challenge.id === msg.challenge_id) {
        S.challenge.state = "declined";
        renderLobby();
        $("#challenge-status").scrollIntoView({ block: "nearest" });
        return;
      }
      return renderLobby();
    case "pong":
      if (ctx && ctx.flushFor && S.m && S.m.id === ctx.flushFor) flushOutbox();
      return;
    default:
      return; // challenge_sent and anything newer: nothing to show
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
  // another name in this tab: the bots and notes of the previous one are not this one's
  if (!sameName(S.mine.owner, msg.name)) S.mine = newMine(msg.name);
  S.password = null;
  $("#password-input").value = "";
  S.secured = msg.secured === true;
  S.loginNote = "";
  save(LS.name, S.name);
  if (msg.token) storeToken(S.name, msg.token);
  clearInterval(S.pingTimer);
  // An application ping now and then keeps an idle spectator's connection open.
  S.pingTimer = setInterval(() => send({ type: "ping" }), 60000);
  setVariants(Array.isArray(msg.variants) && msg.variants.length ? msg.variants : [DEFAULT_RULES]);
  // requests the last connection left unanswered go again under their request_id: done
  // already, they are answered as the first time (the same match, room or tournament)
  const again = S.unanswered;
  S.unanswered = [];
  for (const ctx of again) resend(ctx);
  // the queue does not survive a drop
  if (S.queued && !again.some((c) => c.type === "queue")) {
    send({ type: "queue", pacing: pacing(), rules: chosenRules(), ...practice() });
  }
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
      if (!pathRoute()) S.tab = "match";
      save(LS.match, { id: mine.match_id, watch: false });
      send({ type: "resume", match_id: mine.match_id, last_seq: 0 }, { matchId: mine.match_id });
    } else if (stored && stored.watch) {
      S.m = newMatch(stored.id, null);
      if (!pathRoute()) S.tab = "match";
      send({ type: "watch", match_id: stored.id, last_seq: 0 }, { matchId: stored.id });
    } else if (stored) {
      save(LS.match, null);
    }
  }
  render();
  if (S.tab === "watch") refreshMatches();
  if (S.tab === "board") refreshBoard();
  if (S.tab === "player" && S.player) requestPlayer(S.player.name, true);
  if (S.tab === "record" && S.record && !S.record.events) requestRecord(S.record.id);
  if (S.tab === "tourneys") refreshTourneys();
  if (S.tab === "ladder") refreshLadder();
  if (S.tab === "bot" && S.bot) requestBot(S.bot.id);
  // watching belongs to the connection: a reconnect watches the tournament on screen again
  if (S.tourney) watchTourney(S.tourney.id);
  if (S.focusAfterWelcome) {
    S.focusAfterWelcome = false;
    if (focusIsIn(null)) focusView();
  }
}

function setStrategies(names) {
  // The server's own list (welcome.strategies if it sends one, or an unknown_strategy error).
  const select = $("#bot-select");
  const known = new Map([...select.options].map((o) => [o.value, o.textContent]));
  const current = select.value;
  select.replaceChildren(...names.map((n) => el("option", { value: n, text: known.get(n) || n })));
  if (names.includes(current)) select.value = current;
  renderBotOptions();
}

// What each hosted bot does, shown under the picker (the option itself holds only the name, so a
// narrow picker never cuts its text off).
const BOT_DESCRIPTIONS = {
  random: "Guesses a random code that is still possible.",
  minimum: "Fewest guesses on average (5.21): Tanaka's optimum.",
  strongest: "Best win rate against the minimum strategy.",
  entropy: "Picks the most informative guess.",
  minimax: "Smallest worst case for the next answer.",
  expected: "Smallest expected number of codes left.",
  parts: "Splits the remaining codes into the most groups.",
  first: "The first code that is still possible.",
  larmouth: "Larmouth's 1971 method.",
  words: "Word MOO only: guesses dictionary words, each one splitting the words still possible.",
};

// Mastermind's bots are the exact solver's trees for its rules (bots/mastermind.py).
const MASTERMIND_BOTS = {
  minimum: "The optimal Mastermind tree: fewest guesses on average (4.34 for 4 of 6).",
  strongest: "The Mastermind tree with the best win rate against the minimum tree.",
};

/** The heuristics that play any MOO rules (bots/variants.py VARIANT_HEURISTICS). */
const VARIANT_HEURISTICS = ["entropy", "expected", "minimax", "parts", "larmouth", "first"];

/** MOO rules whose optimal trees the server solves on first use (bots/variant_trees.py
 * exact_feasible): distinct symbols, at most 10 of them and 3024 codes. */
function treeFeasible(rules) {
  if (isClassic(rules) || isMastermind(rules) || rules.repeats_in_guess) return false;
  const n = rules.alphabet.length;
  if (n > 10) return false;
  let codes = 1;
  for (let i = 0; i < rules.length; i++) codes *= n - i;
  return codes <= 3024;
}

function renderBotDesc() {
  const name = $("#bot-select").value;
  const rules = chosenRules();
  let text = isMastermind(rules) ? MASTERMIND_BOTS[name] : undefined;
  if (!text && !isClassic(rules) && !isMastermind(rules) && (name === "minimum" || name === "strongest")) {
    text = treeFeasible(rules)
      ? `The exact solver's ${name} tree for ${rulesLabel(rules)}, computed by the server on first use.`
      : `Plays the entropy heuristic for ${rulesLabel(rules)}: too large for the exact solver, so there is no optimal tree.`;
  }
  $("#bot-desc").textContent = text || BOT_DESCRIPTIONS[name] || "A bot hosted by this server.";
}

function onMatch(msg) {
  if (msg.opponent) S.opponents[msg.match_id] = msg.opponent;
  if (S.m && !S.m.watch && S.m.id === msg.match_id) {
    // The server re-announces a match we already show when we resume it: keep its history.
    if (S.moving) {
      S.moving = false;
      banner("");
    }
    S.m.seat = msg.seat;
    S.m.opponent = msg.opponent;
    S.m.config = S.m.config || msg.config || null;
    S.m.tournamentId = S.m.tournamentId || msg.tournament_id || null;
    if (S.m.players[msg.seat] === "…") S.m.players[msg.seat] = S.name;
    if (S.m.players[1 - msg.seat] === "…") S.m.players[1 - msg.seat] = msg.opponent;
    // the seat is ours again on this connection; a move typed while offline goes once the
    // replayed events are applied: the ping's answer comes after them
    S.m.synced = true;
    render();
    if (S.m.outbox) send({ type: "ping" }, { flushFor: S.m.id });
    return;
  }
  if (liveMatch()) {
    // One live match on screen, always: a second one (only a server without the in_match rule
    // can start it) waits in a notice instead of taking the screen over.
    if (!S.extra || S.extra.match_id !== msg.match_id) S.extra = msg;
    renderToast();
    return;
  }
  const cup = msg.tournament_id || (msg.config && msg.config.tournament_id) || null;
  if (S.m && !S.m.watch && S.m.phase === "finished" && cup && S.m.tournamentId === cup) {
    // The next game of a tournament starts the moment the last one ends: its result (the
    // outcome, the fairness check, the opponent's secret) stays on screen with a countdown,
    // until it runs out or the player moves on (docs/web.md, "A tournament's page").
    S.next = { msg, at: Date.now() + NEXT_GAME_MS };
    save(LS.match, { id: msg.match_id, watch: false }); // a reload goes to the live game
    const hadFocus = focusIsIn("#view-match");
    renderMatch();
    renderMatchTab();
    if (hadFocus) focusFirst("#btn-next-game");
    return;
  }
  takeMatch(msg, true);
}

/** How long a finished tournament game's result stays before the next game takes the screen. */
const NEXT_GAME_MS = 10000;

/** The next tournament game that waited behind a result comes in: on screen (its countdown ran
 * out, "Play it now") or, when the player left the result for another page, in the background
 * (the Match tab and the lobby lead to it). Its events so far were not applied: replay them. */
function startNextGame(onScreen) {
  const next = S.next;
  if (!next) return false;
  S.next = null;
  S.m = null;
  takeMatch(next.msg, onScreen);
  send({ type: "resume", match_id: next.msg.match_id, last_seq: 0 }, { matchId: next.msg.match_id });
  return true;
}

function tickNext() {
  if (!S.next) return;
  if (Date.now() >= S.next.at) {
    const hadFocus = focusIsIn("#view-match");
    startNextGame(true);
    if (hadFocus) focusView();
    return;
  }
  if (currentView() === "match") renderNext();
}

function renderNext() {
  const box = $("#next-game");
  const next = S.next;
  box.hidden = !next;
  if (!next) return;
  const secs = Math.max(0, Math.ceil((next.at - Date.now()) / 1000));
  setText($("#next-game-text"),
    `Your next game, against ${next.msg.opponent}, starts in ${secs} s.`);
}

/** A match of ours takes the page's state; `onScreen` also gives it the screen. */
function takeMatch(msg, onScreen) {
  if (S.m && S.m.watch) send({ type: "unwatch", match_id: S.m.id });
  // A person plays one match at a time: whatever else was waiting is withdrawn (the server does
  // it too; these only tidy up after a server that does not).
  if (S.queued) send({ type: "unqueue" });
  if (S.room) send({ type: "room_cancel" });
  S.queued = false;
  S.room = null;
  S.challenge = null;
  S.offer = null;
  if (S.rematch && sameName(S.rematch.from, msg.opponent)) S.rematch = null; // it is this match
  $("#rematch-note").textContent = "";
  $("#rematch-note").hidden = true;
  lobbyError("");
  S.m = newMatch(msg.match_id, msg.seat);
  S.m.opponent = msg.opponent;
  S.m.config = msg.config || null;
  S.m.tournamentId = msg.tournament_id || (msg.config && msg.config.tournament_id) || null;
  const players = ["…", "…"];
  players[msg.seat] = S.name;
  players[1 - msg.seat] = msg.opponent;
  S.m.players = players;
  S.m.synced = true;
  save(LS.match, { id: msg.match_id, watch: false });
  if (!onScreen) {
    render();
    return;
  }
  S.tab = "match";
  if (pathRoute()) history.pushState(null, "", `/${location.search}`);
  render();
  focusEntry();
}

function helloProblem(msg, ctx) {
  // One plain sentence for a person; the protocol's own wording ("send its token") is for programs.
  const name = (ctx && ctx.name) || S.name;
  if (msg.code === "bad_credentials") {
    return { text: "That name and password do not match.", password: true };
  }
  if (msg.code === "too_many_attempts") {
    const secs = Math.max(1, Math.ceil((msg.retry_after_ms || 0) / 1000));
    return { text: `Too many failed sign-ins. Try again in ${secs} s.`, password: true };
  }
  if (msg.code === "too_many_names") {
    // Only new names are budgeted: signing in to an existing name with its password still works.
    const secs = Math.max(1, Math.ceil((msg.retry_after_ms || 0) / 1000));
    return { text: `Too many new names from this address. Try again in ${secs} s.`, password: true };
  }
  if (msg.code === "bad_token" && ctx && ctx.withToken) {
    // The token this browser kept was revoked (signed out everywhere elsewhere).
    forgetToken(name);
    return {
      text: `This browser is no longer signed in as “${name}”. Enter its password to sign in again, or pick another name.`,
      password: true,
    };
  }
  if (msg.code === "name_taken" || msg.code === "bad_token") {
    return {
      text: `The name “${name}” is already taken. If it is yours, sign in with its password; otherwise pick another name.`,
      password: true,
    };
  }
  return { text: msg.message || msg.code, password: false };
}

function retryable(msg) {
  // docs/protocol.md: nothing was done and it may work soon (the SDK's retryable()).
  return msg.code === "storage_unavailable"
    || (msg.code === "not_available" && /try again/.test(msg.message || ""));
}

function onError(msg, ctx) {
  const type = ctx ? ctx.type : null;
  const text = msg.message || msg.code;
  // (it names the refused request now, but it is about the page's pace, not that request)
  if (msg.code === "rate_limited") {
    banner("Slow down: too many messages.");
    return;
  }
  if (ctx && ctx.request && retryable(msg) && (ctx.tries || 0) < REQUEST_RETRIES) {
    // nothing was done, or it was and the answer is the first one's: the same request again
    setTimeout(() => resend(ctx), 1000 * ((ctx.tries || 0) + 1));
    return;
  }
  // a bot's name_taken / invalid_name is about the bot, not about this session's name
  if (type && type.startsWith("ladder_")) {
    ladderError(msg, ctx);
    return;
  }
  // bad_credentials and too_many_attempts also answer set_password: only hello's end the session.
  if (msg.code === "name_taken" || msg.code === "invalid_name" || msg.code === "bad_token"
      || msg.code === "not_hello" || type === "hello") {
    S.stopReconnect = true;
    S.manualClose = true;
    S.password = null;
    if (S.ws) S.ws.close();
    S.ws = null;
    setConn("offline");
    banner("");
    const why = helloProblem(msg, ctx);
    showLogin(why.text, { password: why.password });
    return;
  }
  if (type === "player" || type === "history") {
    if (S.player && ctx.name === S.player.name) {
      S.player.error = text;
      S.player.loading = false;
      renderPlayer();
    }
    return;
  }
  if (type && type.startsWith("tournament")) {
    tourneyError(ctx, msg.code === "unknown_tournament" && ctx.tournamentId
      ? `No tournament has the id “${ctx.tournamentId}”.` : text);
    return;
  }
  if (type === "analysis") {
    S.analyses[ctx.matchId] = { state: "error", error: text };
    renderAnalyses();
    return;
  }
  if (type === "match_record") {
    if (S.record && ctx.matchId === S.record.id) {
      S.record.live = msg.code === "not_finished";
      S.record.error = msg.code === "not_finished" ? ""
        : msg.code === "no_such_match" ? `No finished match has the id “${S.record.id}”.` : text;
      renderRecord();
    }
    return;
  }
  if (type === "set_password") {
    $("#password-error").textContent = msg.code === "bad_credentials"
      ? (S.secured ? "The current password is not right." : "Your current password is needed.")
      : msg.code === "too_many_attempts"
        ? `Too many tries. Wait ${Math.max(1, Math.ceil((msg.retry_after_ms || 0) / 1000))} s.`
        : text;
    return;
  }
  if (type === "sign_out_all") {
    $("#signout-error").textContent = text;
    return;
  }
  if (type === "room_cancel") {
    // no_room: it had already closed (joined, or closed by the server when a match started).
    S.room = null;
    renderLobby();
    return;
  }
  if (msg.code === "in_match") {
    // The server's rule: one live match for a person. Bring that match back on screen.
    S.queued = false;
    lobbyError("You are already in a match: finish or resign it first.");
    if (msg.match_id && (!S.m || S.m.id !== msg.match_id || S.m.watch)) {
      if (S.m && S.m.watch) send({ type: "unwatch", match_id: S.m.id });
      S.m = newMatch(msg.match_id, null, false);
      save(LS.match, { id: msg.match_id, watch: false });
      send({ type: "resume", match_id: msg.match_id, last_seq: 0 }, { matchId: msg.match_id });
    }
    render();
    return;
  }
  if (ctx && ctx.resync && !retryable(msg)) {
    return; // the quiet-match check's own resume (below): its refusal changes nothing here
  }
  if ((type === "resume" || type === "watch") && retryable(msg)) {
    // Not refused, only not possible yet: a cluster node died or is draining and another one
    // is taking its matches over (docs/cluster.md), or the database is briefly away. Ask again
    // in a moment, from the last event we have; the match stays on screen.
    if (S.m && ctx.matchId === S.m.id) {
      const m = S.m;
      S.moving = true;
      banner("The match is moving to another server — resuming…");
      setTimeout(() => {
        if (S.m !== m || m.phase === "finished") return;
        if (m.watch) send({ type: "watch", match_id: m.id, last_seq: m.lastSeq }, { matchId: m.id });
        else send({ type: "resume", match_id: m.id, last_seq: m.lastSeq }, { matchId: m.id });
      }, 1000);
    }
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
  if (type === "guess" && S.m && ctx.matchId === S.m.id && typeof ctx.n === "number") {
    const m = S.m;
    const expected = Number.isInteger(msg.expected) ? msg.expected : null;
    if ((msg.code === "guess_taken" || msg.code === "guess_ahead") && expected !== null) {
      // Our count was off (events we have not seen yet, or a guess of ours refused meanwhile):
      // the server's own number is the right one, and a resume brings any missed events.
      m.sentN = expected - 1;
      send({ type: "resume", match_id: m.id, last_seq: m.lastSeq }, { matchId: m.id, resync: true });
      const entry = $("#code-input");
      if (ctx.code && !entry.value) entry.value = ctx.code;
      showCodeError(msg.code === "guess_taken"
        ? `Not counted: guess ${ctx.n} was already played, with another code. This one would be guess ${expected}: press Enter to send it.`
        : `Not counted: it went as guess ${ctx.n}, but your next guess is number ${expected}. Press Enter to send it as guess ${expected}.`);
      renderPad();
      return;
    }
    // refused, so not played: its number is free again
    m.sentN = Math.min(m.sentN, ctx.n - 1);
  }
  if (type === "guess" || type === "secret") {
    const entry = $("#code-input");
    if (ctx.code && !entry.value) entry.value = ctx.code;
    // not_a_word: the secret is letters but no word of the server's dictionary
    showCodeError(msg.code === "not_a_word" ? `Not set: ${text} — choose another word`
      : `Not counted: ${text}`);
    renderPad();
    return;
  }
  if (type === "rematch") {
    if (!S.m || S.m.id !== ctx.matchId) {
      lobbyError(text); // accepted from a notice: the lobby says why it did not start
      return;
    }
    S.m.rematchAsked = false;
    $("#rematch-note").hidden = false;
    $("#rematch-note").textContent = text;
    renderMatch();
    return;
  }
  if (type === "resign") {
    // Already over: whatever waited for the end can go ahead.
    if (S.m && ctx.matchId === S.m.id) afterMatchEnded(S.m.id);
    return;
  }
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
    lobbyError(msg.code === "unknown_room" && ctx.code
      ? `No open room has the code ${ctx.code}: it was cancelled or already joined, or the code is mistyped.`
      : text);
    renderLobby();
    return;
  }
  if (type === "leaderboard" || type === "matches" || type === "ping" || type === "unwatch"
      || type === "unqueue" || type === "decline") return;
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
      if (m.config && m.config.tournament_id) m.tournamentId = m.config.tournament_id;
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
  if (ev.kind === "finished") {
    verifyFairness(m);
    afterMatchEnded(m.id);
  }
  // the entry or the Resign button that had the focus goes with the end of the match
  const refocus = ev.kind === "finished" && currentView() === "match" && focusIsIn("#view-match");
  renderMatchTab();
  renderMatch();
  if (refocus && S.m === m) {
    $("#result-panel").scrollIntoView({ block: "nearest" });
    focusFirst(...resultControls());
  }
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

/** The rules the lobby's Game picker names (welcome.variants, the server's default first). */
function chosenRules() {
  const spec = $("#variant-select").value;
  return S.variants.find((r) => rulesSpec(r) === spec) || S.variants[0] || DEFAULT_RULES;
}

/** Fill the Game pickers (lobby, leaderboard) from welcome.variants; keeps the choice. */
function setVariants(list) {
  S.variants = list;
  for (const sel of [$("#variant-select"), $("#board-variant"), $("#ladder-variant"), $("#sf-rules")]) {
    const keep = sel.value || load(LS.variant, "");
    sel.replaceChildren(...list.map((r) => el("option", { value: rulesSpec(r) }, rulesLabel(r))));
    if (list.some((r) => rulesSpec(r) === keep)) sel.value = keep;
  }
  renderBotOptions();
}

/** Hosted bots per rules, as bots/variants.py: classic every bot, Mastermind the trees and
 * random, other MOO rules random, the trees (or their entropy fallback) and the heuristics;
 * the server refuses others with bot_unsupported anyway. */
function renderBotOptions() {
  const rules = chosenRules();
  const able = isClassic(rules) ? null
    : isWords(rules) ? ["words"]
      : isMastermind(rules) ? ["minimum", "strongest", "random"]
        : ["random", "minimum", "strongest", ...VARIANT_HEURISTICS];
  const sel = $("#bot-select");
  // the word bot plays word MOO only; every other bot plays classic MOO
  for (const o of sel.options) {
    o.disabled = able === null ? o.value === "words" : !able.includes(o.value);
  }
  if (sel.selectedOptions[0] && sel.selectedOptions[0].disabled) {
    const first = [...sel.options].find((o) => !o.disabled);
    if (first) sel.value = first.value;
  }
  renderBotDesc();
}

/** The assistant switch: a practice match (unrated) with the assistant, or nothing. */
function practice() {
  return $("#assist-toggle").checked ? { rated: false, assist: true } : {};
}

/** "12 codes still possible · try 0123" for an assisted match (rules.js assist: the count, and
 * a suggestion only where it is provably best). */
function assistLine(m) {
  const mine = m.guesses[m.seat].filter((e) => e.guess && e.bulls !== null && e.bulls !== undefined);
  const key = `${m.id}:${mine.length}`;
  if (isWords(rulesOf(m))) {
    // the word list stays on the server: the page cannot count the words still possible
    return "Assistant: not available for word MOO on this page (moo play has ?left)";
  }
  if (!m.assistCache || m.assistCache.key !== key) {
    const a = assist(rulesOf(m), mine.map((e) => [e.guess, e.bulls, e.cows]));
    const count = a.first ? `at first ${a.left} possible codes` : `${a.left} codes still possible`;
    const text = !a.left ? "Assistant: no code is possible (the answers contradict each other)"
      : a.left === 1 ? `Assistant: one code is possible: ${a.suggestion}`
        : a.suggestion ? `Assistant: ${count} · try ${a.suggestion}`
          : `Assistant: ${count} (no sure best guess here: moo play --assist has one)`;
    m.assistCache = { key, text, suggestion: a.suggestion, left: a.left };
  }
  return m.assistCache.text;
}

// -- post-match analysis (the analysis request; docs/analysis.md) ------------------------------

/** The match an analysis box belongs to: the finished match on screen, or the match page's. */
function analysisMatch(box) {
  if (box === "result-analysis") return S.m && S.m.phase === "finished" ? S.m.id : null;
  return S.record && S.record.events ? S.record.id : null;
}

function requestAnalysis(box) {
  const id = analysisMatch(box);
  if (!id || (S.analyses[id] && S.analyses[id].state !== "error")) return;
  S.analyses[id] = { state: "loading" };
  send({ type: "analysis", match_id: id }, { matchId: id });
  renderAnalyses();
}

/** The analysis table's columns: [header, what it means, class]. The two expected-guess
 * columns ("expected") are left out where the table would not fit (a phone, a narrow card):
 * the loss is their difference, and every other column, the mark included, stays whole. */
const ANALYSIS_COLUMNS = [
  ["#", "Guess number", "num"],
  ["guess", "The guess played", null],
  ["answer", "Its answer", null],
  ["left", "Codes still possible before this guess", "num"],
  ["loss", "Expected guesses lost by this guess (played − best)", "num"],
  ["mark", "inaccuracy, mistake or blunder", null],
  ["best guess", "A guess the solver rates best here", null],
  ["best", "Expected guesses still needed after the best guess", "num expected"],
  ["played", "Expected guesses still needed after the guess played", "num expected"],
];

function renderAnalyses() {
  for (const box of ["result-analysis", "record-analysis"]) {
    const node = document.getElementById(box);
    const id = analysisMatch(box);
    const a = id ? S.analyses[id] : undefined;
    node.hidden = !a;
    if (!a) continue;
    node.dataset.state = a.state;
    if (a.state === "loading") {
      node.replaceChildren(el("p", { class: "hint", text: "The solver is analysing the guesses…" }));
      continue;
    }
    if (a.state === "error") {
      node.replaceChildren(el("p", { class: "error", text: a.error || "The analysis failed." }));
      continue;
    }
    node.replaceChildren(...a.players.map((p, seat) => {
      const lost = p.guesses.reduce((t, g) => t + g.loss, 0);
      const rows = p.guesses.map((g) => el("tr", { "data-mark": g.mark || "", "data-n": g.number },
        el("td", { class: "num", text: String(g.number) }),
        el("td", { class: "mono", text: g.guess }),
        el("td", { class: "mono", text: g.response }),
        el("td", { class: "num", text: String(g.candidates) }),
        el("td", { class: "num loss", text: g.loss.toFixed(3) }),
        el("td", { class: `mark ${g.mark || ""}`, text: g.mark || "" }),
        el("td", { class: "mono", text: g.best_guess }),
        el("td", { class: "num expected", text: g.best_expected.toFixed(3) }),
        el("td", { class: "num expected", text: g.played_expected.toFixed(3) })));
      return el("section", { class: "analysis-player", "data-seat": seat },
        el("h3", { text: `${p.name}: ${p.guesses.length} guesses, ${lost.toFixed(3)} expected guesses lost` }),
        el("div", { class: "table-wrap" }, el("table", { class: "board analysis-table" },
          el("thead", {}, el("tr", {}, ...ANALYSIS_COLUMNS.map(([h, title, cls]) =>
            el("th", { scope: "col", class: cls, title, text: h })))),
          el("tbody", {}, ...rows))),
        el("p", { class: "hint scroll-hint", hidden: true,
          text: "Swipe the table sideways for more columns →" }));
    }));
    // a table wider than its box says so (it scrolls sideways), as the leaderboard does
    requestAnimationFrame(() => {
      for (const wrap of node.querySelectorAll(".analysis-player .table-wrap")) {
        wrap.nextElementSibling.hidden = wrap.scrollWidth <= wrap.clientWidth + 1;
      }
    });
  }
}

function pacing() {
  const el = document.querySelector('input[name="pacing"]:checked');
  return el ? el.value : "lockstep";
}

function lobbyError(text) {
  $("#lobby-error").textContent = text || "";
}

/** The match this person sits in and has not finished, or null: at most one at a time. */
function liveMatch() {
  return S.m && !S.m.watch && S.m.phase !== "finished" ? S.m : null;
}

function opponentOf(m) {
  if (!m) return "your opponent";
  if (m.seat !== null && m.players[1 - m.seat] !== "…") return m.players[1 - m.seat];
  return m.opponent || "your opponent";
}

function requireFree() {
  // One live match for a person (the server refuses a second with in_match too).
  if (!liveMatch()) return true;
  lobbyError("You are already in a match: finish or resign it first.");
  $("#lobby-error").scrollIntoView({ block: "nearest" });
  return false;
}

function afterMatchEnded(matchId) {
  // What the player chose to do once their match is over: accept a challenge, sign out.
  const acc = S.acceptAfter;
  if (acc && acc.matchId === matchId) {
    S.acceptAfter = null;
    send({ type: "accept", challenge_id: acc.challengeId });
  }
  const after = S.afterFinish;
  if (after && after.matchId === matchId) {
    S.afterFinish = null;
    after.then();
  }
}

function requireOnline() {
  if (S.conn === "online" && S.welcomed) return true;
  lobbyError("Not connected yet — hold on, reconnecting…");
  return false;
}

function showCodeError(text, kind = "error") {
  const node = $("#code-error");
  node.textContent = text || "";
  node.dataset.kind = kind;
  $("#code-input").setAttribute("aria-invalid", text && kind === "error" ? "true" : "false");
}

function submitCode() {
  const m = S.m;
  if (!m || m.watch) return;
  const input = $("#code-input");
  const isSecret = m.phase === "secrets";
  let code;
  try {
    // Spaces around what was typed or pasted into the box are the box's, not the code's.
    code = checkCode(rulesOf(m), input.value.trim(), { secret: isSecret });
  } catch (err) {
    showCodeError(`${err.message} — not sent`);
    input.focus();
    return;
  }
  if (!canEnter(m)) return;
  const type = isSecret ? "secret" : "guess";
  // The guess's number is fixed now, before the first try: a resend carries the same one, so
  // the server can tell a retry from a second guess (docs/protocol.md, "Retrying safely").
  const n = isSecret ? null : nextGuessN(m);
  if (!sendCode(m, type, code, n)) {
    // Offline (or back but not yet resumed): the code stays in the box and goes as soon as the
    // match is resumed on the next connection; the entry says so.
    m.outbox = { type, code, phase: m.phase, count: m.counts[m.seat], n };
    input.value = code;
    showCodeError(`Offline: ${code} is kept and will be sent when the connection is back.`, "queued");
    renderPad();
  }
}

/** The number our next guess takes in its match: one more than our guesses the events show,
 * or than the last one sent whose answer has not come yet (free pacing lets a quick player send
 * the next guess before the event of the previous one is back). */
function nextGuessN(m) {
  return Math.max(m.counts[m.seat], m.sentN) + 1;
}

/** Send a secret or guess (numbered `n`) now if this connection has the match; false when it
 * cannot. */
function sendCode(m, type, code, n) {
  if (!S.welcomed || !m.synced) return false;
  const msg = type === "secret" ? { type, match_id: m.id, secret: code } : { type, match_id: m.id, guess: code, n };
  if (send(msg, { code, n, matchId: m.id }) === null) return false;
  if (type === "guess") m.sentN = Math.max(m.sentN, n);
  m.outbox = null;
  showCodeError("");
  $("#code-input").value = "";
  renderPad();
  return true;
}

/** A guess sent on a connection that closed before its answer came may or may not have been
 * played. It is kept like a guess typed offline, under the number it went with: on the next
 * connection the resumed match's events tell, and it is sent again only if they do not show it
 * (the server would play that number once in any case). Not when the box holds something else:
 * what the player is typing is theirs. */
function keepUnanswered(m) {
  if (m.watch || m.outbox || m.phase !== "playing") return;
  let first = null;
  for (const ctx of S.pending.values()) {
    if (ctx.type === "guess" && ctx.matchId === m.id && (first === null || ctx.n < first.n)) first = ctx;
  }
  const input = $("#code-input");
  if (!first || (input.value && input.value !== first.code)) return;
  m.outbox = { type: "guess", code: first.code, phase: m.phase, count: first.n - 1, n: first.n, unanswered: true };
  input.value = first.code;
  showCodeError(`Offline: ${first.code} is kept and will be sent when the connection is back.`, "queued");
}

/** The move typed while offline goes once the match is resumed and its missed events applied;
 * if the match moved on meanwhile (another phase, a guess of ours that was sent before the drop
 * and played after all, or the end) it is dropped: it would be played in the wrong place. */
function flushOutbox() {
  const m = S.m;
  if (!m || !m.outbox) return;
  const { type, code, phase, count, n, unanswered } = m.outbox;
  if (phase !== m.phase || count !== m.counts[m.seat] || !canEnter(m)) {
    m.outbox = null;
    showCodeError("");
    // an unanswered guess the events show was played after all: the box is done with it
    if (unanswered && $("#code-input").value === code) $("#code-input").value = "";
    renderPad();
    return;
  }
  sendCode(m, type, code, n);
}

/** Editing the box after Enter was pressed offline takes the kept move back. */
function dropOutboxIfEdited() {
  const m = S.m;
  if (m && m.outbox && $("#code-input").value !== m.outbox.code) {
    m.outbox = null;
    showCodeError("");
  }
}

function canEnter(m) {
  if (!m || m.watch || m.seat === null) return false;
  if (m.phase === "secrets") return !m.secretSet[m.seat];
  return owes(m, m.seat);
}

/** Is the keyboard focus lost (on the page itself, or on a control just hidden or disabled) or
 * inside `scope`? Only then does a transition move it: focus the person put elsewhere stays. */
function focusIsIn(scope) {
  const a = document.activeElement;
  if (!a || a === document.body || a === $("#main")) return true;
  if (a.closest("[hidden]") || a.disabled || a.getClientRects().length === 0) return true;
  return !!scope && !!a.closest(scope);
}

/** Focus the first of `selectors` that is on the page and usable; true if one was. */
function focusFirst(...selectors) {
  for (const sel of selectors) {
    const node = document.querySelector(sel);
    if (node && !node.disabled && !node.closest("[hidden]") && node.getClientRects().length > 0) {
      node.focus({ preventScroll: true });
      if (node.scrollIntoViewIfNeeded) node.scrollIntoViewIfNeeded(false);
      else node.scrollIntoView({ block: "nearest" });
      return true;
    }
  }
  return false;
}

/** After a transition to another screen (signing in, leaving a result), the focus goes to the
 * control a person most likely wants next there, instead of dropping to the page body. */
function focusView() {
  const view = currentView();
  const first = {
    play: ["#btn-queue", "#btn-back-to-match"],
    watch: ["#live-list [data-watch]", "#btn-refresh-matches"],
    tourneys: ["#btn-new-tourney"],
    tourney: ["#btn-tourney-match", "#btn-tourney-join", "#btn-tourney-start", "#btn-tourney-leave",
      "#tourney-games .btn"],
    match: resultControls(),
    record: ["#rp-next", "#btn-copy-link"],
    player: ["#history-list .btn"],
    account: ["#new-password"],
    ladder: ["#ladder-body a", "#btn-refresh-ladder"],
    bot: ["#bot-recent .btn", "#bot-facts a"],
  }[view] || [];
  if (view === "match" && S.m && S.m.phase !== "finished") {
    focusEntry();
    if (document.activeElement === $("#code-input")) return;
  }
  if (!focusFirst(...first)) $("#main").focus({ preventScroll: true });
}

/** A finished match's controls, the likeliest next step first. */
function resultControls() {
  return ["#btn-next-game", "#btn-to-tourney", "#btn-rematch", "#btn-leave"];
}

function focusEntry() {
  const input = $("#code-input");
  if (!$("#entry").hidden && !input.disabled && matchMedia("(pointer: fine)").matches) input.focus();
}

function leaveMatch() {
  const m = S.m;
  if (m && m.watch) send({ type: "unwatch", match_id: m.id });
  S.tab = m && m.watch ? "watch" : "play";
  if (m && m.watch && m.tournamentId && S.tourney && S.tourney.id === m.tournamentId) {
    // a game watched from its tournament's page leads back there
    S.tab = "tourney";
    history.pushState(null, "", `/tournament/${encodeURIComponent(m.tournamentId)}${location.search}`);
  }
  if (S.tab === "watch") refreshMatches();
  S.m = null;
  save(LS.match, null);
  syncEntryOwner(null);
  if (startNextGame(false)) return; // the tournament's next game goes on behind the page chosen
  if (S.extra) {
    // The second match that waited in a notice comes on screen now.
    const x = S.extra;
    S.extra = null;
    onMatch(x);
    send({ type: "resume", match_id: x.match_id, last_seq: 0 }, { matchId: x.match_id });
    return;
  }
  render();
}

function refreshMatches() { send({ type: "matches" }); }
function refreshBoard() {
  send({ type: "leaderboard", by: S.board.by, variant: $("#board-variant").value });
}

function setTab(tab) {
  if (tab !== "match" && S.m && S.m.phase === "finished") leaveMatch();
  if (pathRoute() && tab !== "player" && tab !== "record" && tab !== "tourney" && tab !== "bot") {
    history.pushState(null, "", `/${location.search}`);
  }
  S.tab = tab;
  if (tab === "watch") refreshMatches();
  if (tab === "board") refreshBoard();
  if (tab === "tourneys") refreshTourneys();
  if (tab === "ladder") refreshLadder();
  render();
  // The button pressed may belong to a view that is now hidden: keep focus in the content.
  if (!document.activeElement || document.activeElement.closest("[hidden]")) {
    $("#main").focus({ preventScroll: true });
  }
}

function showLogin(error, { note = "", password = false } = {}) {
  S.welcomed = false;
  S.needLogin = true;
  if (note) S.loginNote = note;
  render();
  $("#login-error").textContent = error || "";
  $("#name-input").value = S.name || "";
  if (password) showPasswordField();
  if (password && S.name) $("#password-input").focus();
  else $("#name-input").focus();
}

function showPasswordField() {
  $("#password-row").hidden = false;
  $("#btn-show-password").hidden = true;
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
  if (S.tab === "player" && !S.player) return "play";
  if (S.tab === "record" && !S.record) return "play";
  if (S.tab === "tourney" && !S.tourney) return "tourneys";
  if (S.tab === "bot" && !S.bot) return "ladder";
  return S.tab;
}

const VIEWS = ["login", "play", "watch", "board", "tourneys", "tourney", "ladder", "bot", "match", "account",
  "player", "record"];

function render() {
  const view = currentView();
  document.body.dataset.view = view;
  for (const v of VIEWS) {
    $(`#view-${v}`).hidden = v !== view;
  }
  const signedIn = view !== "login";
  $("#nav").hidden = !signedIn;
  $("#conn").hidden = !signedIn && S.conn === "offline";
  $("#btn-logout").hidden = !signedIn;
  $("#me-name").hidden = !signedIn;
  $("#me-name").textContent = signedIn ? S.name : "";
  renderMatchTab();
  for (const b of document.querySelectorAll("#nav .tab")) {
    // a tournament's page belongs to the Tournaments tab, a bot's page to the Ladder
    if (b.dataset.tab === (view === "tourney" ? "tourneys" : view === "bot" ? "ladder" : view)) b.setAttribute("aria-current", "page");
    else b.removeAttribute("aria-current");
  }
  if (view === "login") renderLogin();
  if (view === "play") renderLobby();
  if (view === "watch") renderWatch();
  if (view === "board") renderBoard();
  if (view === "match") renderMatch();
  if (view === "account") renderAccount();
  if (view === "player") renderPlayer();
  if (view === "record") renderRecord();
  if (view === "tourneys") renderTourneys();
  if (view === "tourney") renderTourney();
  if (view === "ladder") renderLadder();
  if (view === "bot") renderBot();
  renderToast();
}

function renderMatchTab() {
  // The pulsing dot means "a match is going on": it stops the moment the match ends.
  const matchTab = $("#tab-match");
  matchTab.hidden = !S.m;
  const live = !!S.m && S.m.phase !== "finished";
  matchTab.classList.toggle("live", live);
  if (S.m) matchTab.querySelector(".tab-text").textContent = S.m.watch ? "Watching" : "Match";
}

function renderLogin() {
  const r = pathRoute();
  let note = S.loginNote;
  if (!note && r && r.tab === "player") note = `Sign in to see ${r.name}'s page.`;
  if (!note && r && r.tab === "record") note = "Sign in to replay this match.";
  if (!note && r && r.tab === "tourney") note = "Sign in to see this tournament.";
  if (!note && r && r.tab === "bot") note = "Sign in to see this bot's page.";
  $("#login-note").hidden = !note;
  $("#login-note").textContent = note;
}

function renderLobby() {
  const live = liveMatch();
  // During a live match nothing here can start another one: the buttons say so by being off.
  for (const b of document.querySelectorAll(
    "#btn-queue, #btn-bot, #btn-room-create, #join-form button, #challenge-form button",
  )) {
    b.disabled = !!live;
  }
  $("#lobby-busy").hidden = !live;
  if (live) {
    setText($("#lobby-busy-text"),
      `You are playing ${opponentOf(live)}. One match at a time: finish or resign it before starting another.`);
  }
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
  renderBotDesc();
}

function renderWatch() {
  const list = $("#live-list");
  list.replaceChildren();
  const live = S.liveMatches.filter((x) => x.phase !== "finished");
  for (const x of live) {
    const counts = x.counts ? `${x.counts[0]} – ${x.counts[1]} guesses` : "";
    const btn = el("button", {
      type: "button", class: "btn small", "data-watch": x.match_id, disabled: !!liveMatch(),
      title: liveMatch() ? "Finish your match first" : null,
    }, "Watch");
    btn.addEventListener("click", () => watchMatch(x.match_id));
    list.append(el("li", { class: "live-item", "data-match": x.match_id },
      el("div", { class: "live-players" },
        el("strong", { text: x.players[0] }), el("span", { class: "vs-small", text: "vs" }),
        el("strong", { text: x.players[1] })),
      el("div", { class: "live-meta" },
        el("span", { class: "chip", text: x.pacing }),
        x.rules && !isClassic(x.rules) ? el("span", { class: "chip", text: rulesLabel(x.rules) }) : null,
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

// Ratings as players know them: the server's `rating` is already on the 1500 scale
// (server/ratings.py: 1500 + 48 (mu - 3 sigma), never the raw OpenSkill ordinal, which is
// negative after a single loss), so the page, `moo watch` and the SDK show one figure; the page
// adds "?" while it is provisional, as lichess does.
// A server that does not say `provisional` itself: provisional while sigma is this high.
const PROVISIONAL_SIGMA = 6.0;

function ratingView(p) {
  const value = typeof p.rating === "number" ? p.rating : null;
  const provisional = typeof p.provisional === "boolean" ? p.provisional
    : typeof p.sigma === "number" && p.sigma > PROVISIONAL_SIGMA;
  if (value === null) return { text: "—", provisional };
  return { text: `${Math.round(value)}${provisional ? "?" : ""}`, provisional };
}

function pct(x, digits = 1) {
  return `${(100 * x).toFixed(digits)} %`;
}

function vsMinimumText(v) {
  if (!v) return "—";
  return `${pct(v.score, 0)}`;
}

function playerLink(name, attrs = {}) {
  return el("a", {
    href: `/player/${encodeURIComponent(name)}${location.search}`, "data-route": "", class: "link-a",
    ...attrs,
  }, name);
}

function renderBoard() {
  for (const r of document.querySelectorAll('input[name="board-by"]')) {
    r.checked = r.value === S.board.by;
  }
  const body = $("#board-body");
  body.replaceChildren();
  S.board.players.forEach((p, i) => {
    const me = p.name.toLowerCase() === (S.name || "").toLowerCase();
    const rating = ratingView(p);
    const v = p.vs_minimum;
    body.append(el("tr", { class: me ? "me" : null, "data-player": p.name },
      el("td", { class: "rank", text: String(i + 1) }),
      el("th", { scope: "row", class: "player" }, playerLink(p.name)),
      el("td", {
        class: `num strong rating${rating.provisional ? " provisional" : ""}`,
        title: rating.provisional ? "Provisional: not enough games yet" : null, text: rating.text,
      }),
      el("td", { class: "num hide-sm", text: String(p.games ?? 0) }),
      el("td", { class: "num", text: `${p.wins ?? 0}–${p.draws ?? 0}–${p.losses ?? 0}` }),
      el("td", { class: "num", text: fmt(p.avg_guesses, 2) }),
      el("td", {
        class: "num hide-sm vsmin",
        title: v ? `${pct(v.score)} (95 % interval ${pct(v.low)}–${pct(v.high)}, ${v.n} matches)` : null,
        text: vsMinimumText(v),
      }),
      el("td", { class: "num hide-sm", text: p.avg_time_s == null ? "—" : `${fmt(p.avg_time_s, 1)} s` })));
  });
  $("#board-empty").hidden = S.board.players.length > 0;
  updateScrollHint();
}

function updateScrollHint() {
  // A table wider than the screen says so (it scrolls sideways) instead of hiding columns.
  const wrap = $("#board-table").parentElement;
  $("#board-scroll-hint").hidden = currentView() !== "board" || wrap.scrollWidth <= wrap.clientWidth + 1;
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

/**
 * Bring a list up to date without rebuilding it: rows already there stay the same nodes (so
 * their pop-in animation does not replay and nothing flickers), changed rows are patched in
 * place, new rows are appended, rows beyond the items (a replay stepping back) are removed.
 */
function syncList(list, key, items, keyOf, render) {
  if (list.dataset.key !== key) {
    list.replaceChildren();
    list.dataset.key = key;
  }
  const have = new Map([...list.children].map((li) => [li.dataset.k, li]));
  const keep = new Set();
  let added = false;
  for (const item of items) {
    const k = String(keyOf(item));
    keep.add(k);
    const fresh = render(item);
    fresh.dataset.k = k;
    const old = have.get(k);
    if (!old) {
      list.append(fresh);
      added = true;
    } else if (old.outerHTML !== fresh.outerHTML) {
      for (const a of [...old.attributes]) if (!fresh.hasAttribute(a.name)) old.removeAttribute(a.name);
      for (const a of [...fresh.attributes]) old.setAttribute(a.name, a.value);
      old.replaceChildren(...fresh.childNodes);
    }
  }
  for (const [k, li] of have) if (!keep.has(k)) li.remove();
  return added;
}

function historyRow(m, seat, e) {
  const rules = rulesOf(m);
  const length = rules.length;
  const pegs = isMastermind(rules);
  const known = e.bulls !== null && e.bulls !== undefined;
  const guessText = e.guess === null || e.guess === undefined ? "•".repeat(length) : e.guess;
  const badge = known
    ? el("span", {
      class: `badge${e.bulls === length ? " win" : ""}`,
      "aria-label": answerWords(rules, e.bulls, e.cows),
      title: answerWords(rules, e.bulls, e.cows),
      text: formatAnswer(rules, e.bulls, e.cows),
    })
    : el("span", { class: "badge pending", "aria-label": "waiting for the round", text: "…" });
  const pips = el("span", { class: "pips", "aria-hidden": "true" });
  if (known) {
    // hits and misses: the letters neither hit nor missed are in the word elsewhere (a cow)
    const elsewhere = isHitsMisses(rules) ? length - e.bulls - e.cows : e.cows;
    for (let k = 0; k < length; k++) {
      const kind = k < e.bulls ? (pegs ? "bull black" : "bull")
        : k < e.bulls + elsewhere ? (pegs ? "cow white" : "cow") : "miss";
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
  pegs && e.guess ? codePegs(rules, e.guess)
    : el("span", { class: "g", text: guessText, "aria-label": e.guess ? `guess ${e.guess}` : "hidden guess" }),
  pips, badge);
}

/** A Mastermind code as colour pegs, each with its symbol (readable without colour too). */
function codePegs(rules, code) {
  const out = el("span", { class: "g pegs", "aria-label": `guess ${code}` });
  for (const ch of code) {
    out.append(el("i", { class: `cpeg peg-${pegColour(rules, ch)}`, "aria-hidden": "true" }, ch));
  }
  return out;
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
    if (!m.secretSet[m.seat]) {
      const r = rulesOf(m);
      if (isWords(r)) {
        return `Choose your secret: an English word of ${r.length} letters. ${opp} will try to guess it.`;
      }
      const what = isMastermind(r) ? `${symbolsText(r)}, repeats allowed`
        : `distinct ${symbolsText(r).split(" ")[0]}`;
      return `Choose your secret: ${r.length} ${what}. ${opp} will try to crack it.`;
    }
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

function seatOrder(m) {
  // "You" first, as on the scoreboard; seat order for spectators.
  return m.watch || m.seat === null ? [0, 1] : [m.seat, 1 - m.seat];
}

function renderFairness(m, list = $("#fairness")) {
  list.replaceChildren();
  const r = m.result;
  const seen = m.commitments || r.commitments || [];
  for (const i of seatOrder(m)) {
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
        el("span", { class: "fair-name", text: !m.watch && i === m.seat ? "Your secret " : `${m.players[i]}'s secret ` }),
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
  const distinct = m && !isMastermind(rules) && !isWords(rules)
    && (m.phase === "secrets" || !rules.repeats_in_guess);
  // Typing goes on while offline: the move is kept and sent on reconnection (flushOutbox).
  const enabled = m && canEnter(m);
  if (pad.dataset.alphabet !== rules.alphabet) {
    pad.replaceChildren();
    const pegs = isMastermind(rules);
    for (const ch of rules.alphabet) {
      // Mastermind: colour pegs (the symbol stays on the key for keyboards and screen readers)
      const colour = pegs ? pegColour(rules, ch) : "";
      const b = el("button", {
        type: "button", class: pegs ? `key peg peg-${colour}` : "key", "data-key": ch,
        "aria-label": pegs ? `${ch} ${colour}` : `${ch}`,
      }, ch);
      b.addEventListener("click", () => typeKey(ch));
      pad.append(b);
    }
    const back = el("button", { type: "button", class: "key wide", "data-key": "Backspace", "aria-label": "Delete last digit" }, "⌫");
    back.addEventListener("click", () => typeKey("Backspace"));
    pad.append(back);
    pad.dataset.alphabet = rules.alphabet;
    pad.dataset.game = pegs ? "mastermind" : isWords(rules) ? "words" : "moo";
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

/** What a word-MOO entry takes and how it is answered (docs/variants.md, "Word MOO"). */
function wordHint(rules, isSecret) {
  const n = rules.length;
  if (isSecret) return `an English word of ${n} letters from the dictionary (letters may repeat)`;
  return isHitsMisses(rules)
    ? `any ${n} letters · H = hit (right place), M = miss (letter not in the word at all)`
    : `any ${n} letters · B = bull (right place), C = cow (in the word elsewhere)`;
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
  const before = input.value;
  if (key === "Backspace") input.value = [...input.value].slice(0, -1).join("");
  else if ([...input.value].length < rules.length) input.value += key;
  if (input.value !== before) {
    dropOutboxIfEdited();
    showCodeError("");
  }
  renderPad();
}

/** The code box belongs to one match and one phase of it: whatever was typed there for an
 * earlier match (a half-typed guess, a resigned match's digits) or for the secret never carries
 * over into the next one, where it would prefix the new code. */
function syncEntryOwner(m) {
  const input = $("#code-input");
  const owner = m ? `${m.id}:${m.seat}:${m.phase}` : "";
  if (input.dataset.owner === owner) return;
  input.dataset.owner = owner;
  input.value = "";
  showCodeError("");
}

function renderMatch() {
  const m = S.m;
  syncEntryOwner(m);
  if (!m || currentView() !== "match") return;
  const view = $("#view-match");
  view.dataset.phase = m.phase;
  view.dataset.mode = m.watch ? "watch" : "play";
  // Sides: you first when playing, seat order when spectating.
  seatOrder(m).forEach((seat, pos) => {
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
    // a phone's half-width column shows the name alone (style.css hides the rest), so the
    // title keeps one line for any name that fits one
    const titleKey = !m.watch && seat === m.seat ? "" : m.players[seat];
    if (title.dataset.who !== titleKey || !title.firstChild) {
      title.dataset.who = titleKey;
      title.replaceChildren(...(titleKey === "" ? [document.createTextNode("Your guesses")]
        : [el("span", { class: "hist-who", text: titleKey }), el("span", { class: "hist-whose", text: "'s guesses" })]));
    }
    const list = $(`#hist-${pos}`);
    list.dataset.seat = seat;
    const added = syncList(list, `${m.id}:${seat}`, m.guesses[seat], (e) => e.n,
      (e) => historyRow(m, seat, e));
    list.nextElementSibling.hidden = m.guesses[seat].length > 0;
    if (added) list.scrollTop = list.scrollHeight; // newest guess in view, page left alone
  });
  setText($("#match-status"), statusText(m));
  const variant = $("#match-variant");
  const helped = !!(m.config && m.config.assist);
  if (m.tournamentId && !S.tourneyNames[m.tournamentId] && !m.askedTourney && S.welcomed) {
    // a page opened mid-game (a reload) knows the tournament's id only: ask for its name
    m.askedTourney = true;
    watchTourney(m.tournamentId);
  }
  const cup = m.tournamentId ? `Tournament: ${S.tourneyNames[m.tournamentId] || m.tournamentId}` : null;
  variant.hidden = isClassic(rulesOf(m)) && !helped && !cup;
  setText(variant, [cup, isClassic(rulesOf(m)) ? null : rulesLabel(rulesOf(m)),
    helped ? "Practice with the assistant (unrated)" : null].filter(Boolean).join(" · "));
  view.dataset.game = isMastermind(rulesOf(m)) ? "mastermind" : isWords(rulesOf(m)) ? "words" : "moo";

  // Entry: secret first, then guesses; hidden for spectators and at the end.
  const entry = $("#entry");
  const showEntry = !m.watch && m.phase !== "finished" && m.config !== null;
  entry.hidden = !showEntry;
  if (showEntry) {
    const rules = rulesOf(m);
    const isSecret = m.phase === "secrets";
    entry.dataset.mode = isSecret ? "secret" : "guess";
    const words = isWords(rules);
    $("#code-label").textContent = isSecret ? (words ? "Your secret word" : "Your secret code")
      : "Your guess";
    $("#code-submit").textContent = isSecret ? "Set secret" : "Guess";
    // a random word needs the dictionary, which only the server has
    $("#btn-random").hidden = !isSecret || m.secretSet[m.seat] || words;
    const input = $("#code-input");
    input.maxLength = rules.length;
    input.inputMode = /^[0-9]+$/.test(rules.alphabet) ? "numeric" : "text";
    input.placeholder = "·".repeat(rules.length);
    // Touch screens have no Enter key on the pad: the hint names the button instead.
    const how = matchMedia("(pointer: coarse)").matches
      ? `tap the ${symbolsText(rules).split(" ")[0]}, then ${isSecret ? "Set secret" : "Guess"}`
      : "type or tap, then Enter";
    const line = $("#assist-line");
    const helped = !!(m.config && m.config.assist) && !isSecret && !m.solved[m.seat];
    line.hidden = !helped;
    if (helped) setText(line, assistLine(m));
    const distinctly = !isMastermind(rules) && !words && (isSecret || !rules.repeats_in_guess);
    const repeats = isMastermind(rules) ? " (repeats allowed; black = right place, white = elsewhere)" : "";
    $("#code-hint").textContent = words ? `${wordHint(rules, isSecret)} · ${how}`
      : `${rules.length} ${distinctly ? "distinct " : ""}${symbolsText(rules)}${repeats} · ${how}`;
    renderPad();
  }
  const mySecret = $("#my-secret");
  mySecret.hidden = m.watch || !m.mySecret || m.phase === "finished";
  mySecret.textContent = m.mySecret ? `Your secret: ${m.mySecret}` : "";
  const resign = $("#btn-resign");
  resign.hidden = m.watch || m.phase === "finished";
  if (resign.hidden && resign.dataset.armed === "true") {
    // an armed Resign goes with its match: the next match's first tap only arms it again
    resign.dataset.armed = "false";
    resign.textContent = "Resign";
  }
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
    $("#result-link").href = `/match/${encodeURIComponent(m.id)}${location.search}`;
    renderFairness(m);
    renderAnalyses();
    renderNext();
    const rematch = $("#btn-rematch");
    // a tournament's game leads back to its tournament (the pairings are the tournament's)
    const cupGame = !!m.tournamentId;
    rematch.hidden = m.watch || cupGame;
    $("#btn-to-tourney").hidden = !cupGame;
    $("#btn-leave").classList.toggle("ghost", cupGame);
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
  // A challenge (or a second match) is a notice with a clear choice; it never takes the focus,
  // so Enter meant for a guess cannot answer it.
  const t = $("#toast");
  const yes = $("#toast-yes");
  const no = $("#toast-no");
  const live = liveMatch();
  // a rematch offer for the finished match on screen is in its result panel already
  const rematch = S.rematch && !(currentView() === "match" && S.m && S.m.id === S.rematch.match_id)
    ? S.rematch : null;
  t.hidden = (!S.offer && !S.extra && !rematch) || currentView() === "login";
  if (S.offer) {
    t.dataset.kind = "challenge";
    const game = S.offer.rules && !isClassic(S.offer.rules) ? `${rulesLabel(S.offer.rules)}, ` : "";
    const pace = S.offer.pacing ? ` (${game}${S.offer.pacing})` : "";
    setText($("#toast-text"), live
      ? `${S.offer.from} challenges you to a match${pace}. You are playing ${opponentOf(live)}: decline, or resign that match and accept.`
      : `${S.offer.from} challenges you to a match${pace}.`);
    yes.textContent = live ? "Resign and accept" : "Accept";
    yes.className = live ? "btn danger small" : "btn primary small";
    no.textContent = "Decline";
  } else if (rematch) {
    t.dataset.kind = "rematch";
    setText($("#toast-text"), live
      ? `${rematch.from} wants a rematch of your last match. You are playing ${opponentOf(live)}: resign that match and accept, or dismiss.`
      : `${rematch.from} wants a rematch of your last match.`);
    yes.textContent = live ? "Resign and accept" : "Accept rematch";
    yes.className = live ? "btn danger small" : "btn primary small";
    no.textContent = "Dismiss";
  } else if (S.extra) {
    t.dataset.kind = "extra";
    setText($("#toast-text"),
      `A second match against ${S.extra.opponent} has started while you play ${opponentOf(live)}.`);
    yes.textContent = "Resign it";
    yes.className = "btn danger small";
    no.textContent = "Later";
  }
  noticeRoom();
}

/** The room a notice takes under the top bar (0 when none), for the desktop match screen's
 * history lists to give up (style.css, --notice-h). */
function noticeRoom() {
  const t = $("#toast");
  const h = t.hidden ? 0 : t.getBoundingClientRect().height + 8;
  document.documentElement.style.setProperty("--notice-h", `${Math.ceil(h)}px`);
}

// ---------------------------------------------------------------------------------------------
// Pages with their own address: /player/NAME and /match/ID (links that can be shared)

function pathRoute() {
  const path = location.pathname;
  let hit = /^\/player\/([^/]+)\/?$/.exec(path);
  if (hit) return { tab: "player", name: decodeURIComponent(hit[1]) };
  hit = /^\/match\/([^/]+)\/?$/.exec(path);
  if (hit) return { tab: "record", id: decodeURIComponent(hit[1]) };
  hit = /^\/tournament\/([^/]+)\/?$/.exec(path);
  if (hit) return { tab: "tourney", id: decodeURIComponent(hit[1]) };
  hit = /^\/bot\/([^/]+)\/?$/.exec(path);
  if (hit) return { tab: "bot", id: decodeURIComponent(hit[1]) };
  return null;
}

function navigate(path) {
  if (location.pathname !== path) history.pushState(null, "", `${path}${location.search}`);
  applyRoute();
}

function applyRoute() {
  const r = pathRoute();
  if (!r) {
    if (S.tab === "player" || S.tab === "record") S.tab = liveMatch() ? "match" : "play";
    if (S.tab === "tourney") S.tab = "tourneys";
    if (S.tab === "bot") S.tab = "ladder";
  } else if (r.tab === "bot") {
    S.tab = "bot";
    openBot(r.id);
  } else if (r.tab === "tourney") {
    S.tab = "tourney";
    openTourney(r.id);
  } else if (r.tab === "player") {
    S.tab = "player";
    if (!S.player || S.player.name !== r.name) {
      S.player = newPlayer(r.name);
      if (S.welcomed) requestPlayer(r.name, true);
    }
  } else {
    S.tab = "record";
    if (!S.record || S.record.id !== r.id) {
      S.record = newRecord(r.id);
      if (S.welcomed) requestRecord(r.id);
    }
  }
  render();
  window.scrollTo(0, 0);
}

// -- a player's page ---------------------------------------------------------------------------

function newPlayer(name) {
  return { name, data: null, rows: [], next: null, error: "", loading: true, more: false };
}

function requestPlayer(name, fresh) {
  if (!S.player || S.player.name !== name) return;
  if (fresh) {
    S.player.rows = [];
    S.player.next = null;
    S.player.error = "";
  }
  S.player.loading = true;
  send({ type: "player", name }, { name });
  send({ type: "history", player: name, limit: 20 }, { name });
  if (sameName(name, S.name)) requestMine(); // your own page: your ladder bots, the upload form
}

function sameName(a, b) {
  return (a || "").toLowerCase() === (b || "").toLowerCase();
}

function onPlayer(msg) {
  if (!S.player || !sameName(S.player.name, msg.name)) return;
  S.player.data = msg;
  S.player.loading = false;
  renderPlayer();
}

function onHistory(msg) {
  if (!S.player || !sameName(S.player.name, msg.player)) return;
  const seen = new Set(S.player.rows.map((r) => r.match_id));
  for (const row of msg.matches || []) if (!seen.has(row.match_id)) S.player.rows.push(row);
  S.player.next = msg.next ?? null;
  S.player.more = false;
  S.player.loaded = true;
  renderPlayer();
}

const REASONS = {
  solved: "cracked", resign: "resigned", timeout: "time", disconnect: "left", guess_cap: "guess cap",
};

function historyItem(row) {
  const seat = row.seat;
  const counts = row.counts || [0, 0];
  const mine = seat === 0 || seat === 1 ? counts[seat] : counts[0];
  const theirs = seat === 0 || seat === 1 ? counts[1 - seat] : counts[1];
  const letter = row.result === "win" ? "W" : row.result === "loss" ? "L" : "D";
  const when = row.ended_at ? new Date(row.ended_at) : null;
  const pacing = row.config && row.config.pacing ? row.config.pacing : "";
  const rules = row.config && row.config.rules ? row.config.rules : DEFAULT_RULES;
  return el("li", { class: `hrow ${row.result || ""}`, "data-match": row.match_id, "data-game": rulesSpec(rules) },
    el("span", { class: `res ${row.result || ""}`, title: row.result || "", text: letter }),
    el("span", { class: "hrow-main" },
      el("span", { class: "hrow-vs" }, "vs ", row.opponent ? playerLink(row.opponent) : "?"),
      el("span", { class: "hrow-meta" },
        el("span", { text: `${mine}–${theirs} guesses` }),
        el("span", { class: "chip game", text: rulesLabel(rules) }),
        el("span", { class: "chip", text: REASONS[row.reason] || row.reason || "" }),
        pacing ? el("span", { class: "chip", text: pacing }) : null,
        row.rated === false ? el("span", { class: "chip", text: "unrated" }) : null,
        when ? el("time", { datetime: when.toISOString(), text: when.toLocaleString() }) : null)),
    el("a", {
      class: "btn small", href: `/match/${encodeURIComponent(row.match_id)}${location.search}`,
      "data-route": "", "aria-label": `Replay the match against ${row.opponent}`,
    }, "Replay"));
}

function renderPlayer() {
  const P = S.player;
  if (!P || currentView() !== "player") return;
  setText($("#player-title"), P.name);
  setText($("#player-error"), P.error || "");
  const d = P.data;
  $("#player-body").hidden = !d;
  if (d) {
    const rating = ratingView(d);
    setText($("#player-rating"), rating.text);
    $("#player-rating").classList.toggle("provisional", rating.provisional);
    $("#player-rating").title = rating.provisional ? "Provisional: not enough games yet" : "Rating";
    setText($("#player-games"), String(d.games ?? 0));
    setText($("#player-wins"), String(d.wins ?? 0));
    setText($("#player-draws"), String(d.draws ?? 0));
    setText($("#player-losses"), String(d.losses ?? 0));
    setText($("#player-rating-note"), rating.provisional
      ? `MOO 4 of 10 rating ${rating.text}: provisional, it settles as more rated games are played.`
      : `MOO 4 of 10 rating ${rating.text}.`);
    // `player` reports classic MOO 4 of 10 only: say so, above all beside other games' matches
    const others = P.rows.filter((r) => !isClassic(r.config && r.config.rules ? r.config.rules : DEFAULT_RULES));
    setText($("#player-record-scope"), !d.games && others.length
      ? "No rated MOO 4 of 10 match yet. The matches below are of other games (each game has its own rating: the leaderboard's Game menu) or unrated."
      : "MOO 4 of 10 only; each other game has its own rating (the leaderboard's Game menu).");
    const v = d.vs_minimum;
    setText($("#vsmin-text"), v ? pct(v.score) : "Not enough solved matches yet.");
    $("#vsmin-text").classList.toggle("none", !v);
    const matches = v ? `${v.n} solved match${v.n === 1 ? "" : "es"}` : "";
    setText($("#vsmin-range"), !v ? ""
      : v.high - v.low < 0.0005
        ? `from ${matches}: too few to say how sure (no interval yet)`
        : `95 % interval ${(100 * v.low).toFixed(1)}–${pct(v.high)}, from ${matches}`);
    const bar = $("#vsmin-bar");
    bar.hidden = !v;
    if (v) {
      bar.style.setProperty("--low", `${100 * v.low}%`);
      bar.style.setProperty("--high", `${100 * v.high}%`);
      bar.style.setProperty("--score", `${100 * v.score}%`);
    }
    const dist = d.distribution || {};
    const keys = Object.keys(dist).map(Number).filter((k) => Number.isFinite(k)).sort((a, b) => a - b);
    const top = Math.max(1, ...keys.map((k) => dist[k]));
    $("#distribution").replaceChildren(...keys.map((k) => {
      const n = dist[k];
      return el("li", { class: "dist-row", "data-guesses": k, "data-count": n },
        el("span", { class: "dist-k", text: `${k}` }),
        el("span", { class: "dist-bar" },
          el("span", { class: "dist-fill", "data-w": Math.round((100 * n) / top) })),
        el("span", { class: "dist-n", text: String(n) }));
    }));
    for (const fill of $("#distribution").querySelectorAll(".dist-fill")) {
      fill.style.width = `${fill.dataset.w}%`;
    }
    $("#dist-empty").hidden = keys.length > 0;
  } else {
    setText($("#player-rating"), "");
  }
  syncList($("#history-list"), `player:${P.name.toLowerCase()}`, P.rows, (r) => r.match_id, historyItem);
  $("#history-empty").hidden = P.rows.length > 0 || !P.loaded;
  const more = $("#btn-history-more");
  more.hidden = !P.next;
  more.disabled = P.more;
  renderMine();
}

// -- a finished match, replayed -----------------------------------------------------------------

function newRecord(id) {
  return { id, events: null, step: 0, steps: [], error: "", live: false, m: null, full: null };
}

function requestRecord(id) {
  send({ type: "match_record", match_id: id }, { matchId: id });
}

function onRecord(msg) {
  const R = S.record;
  if (!R || R.id !== msg.match_id) return;
  R.events = (msg.events || []).slice().sort((a, b) => a.seq - b.seq);
  R.players = msg.players;
  R.config = msg.config;
  const free = msg.config && msg.config.pacing === "free";
  // One step per guess (free pacing) or per revealed round (lockstep).
  R.steps = [];
  R.events.forEach((ev, i) => {
    if ((free && ev.kind === "guess") || (!free && ev.kind === "round")) R.steps.push(i);
  });
  R.step = 0;
  // The whole match once, for the result and the commitments.
  R.full = replayUpTo(R, R.events.length);
  verifyFairness(R.full).then(() => renderRecord());
  renderRecord();
}

function replayUpTo(R, count) {
  const mySeat = (R.players || []).findIndex((p) => sameName(p, S.name));
  const m = newMatch(R.id, mySeat >= 0 ? mySeat : null, mySeat < 0);
  m.players = (R.players || m.players).slice();
  m.config = R.config || null;
  for (const ev of R.events.slice(0, count)) applyEvent(m, ev);
  return m;
}

function recordCut(R) {
  // Events shown at this step: up to the step's own event; the last step shows the end too.
  if (R.step >= R.steps.length) return R.events.length;
  if (R.step > 0) return R.steps[R.step - 1] + 1;
  const first = R.events.findIndex((ev) => ev.kind === "guess" || ev.kind === "round");
  return first < 0 ? R.events.length : first;
}

function renderRecord() {
  const R = S.record;
  if (!R || currentView() !== "record") return;
  setText($("#record-error"), R.error || "");
  $("#record-live").hidden = !R.live;
  // Watching would take the screen from your own live match: only that match itself opens.
  const live = liveMatch();
  $("#btn-record-watch").disabled = !!live && live.id !== R.id;
  $("#btn-record-watch").textContent = live && live.id === R.id ? "Back to your match" : "Watch it live";
  $("#record-body").hidden = !R.events;
  if (!R.events) return;
  renderAnalyses();
  const last = R.steps.length;
  const m = replayUpTo(R, recordCut(R));
  const full = R.full;
  setText($("#record-title"), `${full.players[0]} vs ${full.players[1]}`);
  // the game is named on every replay, classic included (a link may be opened by anyone)
  const cfg = full.config || {};
  setText($("#record-game"), [rulesLabel(rulesOf(full)), cfg.pacing || null,
    cfg.rated === false ? "unrated" : cfg.rated === true ? "rated" : null,
    cfg.assist ? "with the assistant" : null].filter(Boolean).join(" · "));
  const summary = full.result ? resultTexts(full) : null;
  setText($("#record-summary"), summary ? `${summary.title}. ${summary.detail}` : "");
  seatOrder(m).forEach((seat, pos) => {
    const side = $(`#rside-${pos}`);
    side.querySelector(".pname").textContent = !m.watch && seat === m.seat ? `${m.players[seat]} (you)` : m.players[seat];
    side.querySelector(".count").textContent = `${m.counts[seat]} guess${m.counts[seat] === 1 ? "" : "es"}${m.solved[seat] ? " · solved" : ""}`;
    side.classList.toggle("winner", R.step === last && !!full.result && full.result.winner === seat);
    setText($(`#rhist-title-${pos}`), `${m.players[seat]}'s guesses`);
    const list = $(`#rhist-${pos}`);
    syncList(list, `record:${R.id}:${seat}`, m.guesses[seat], (e) => e.n, (e) => historyRow(m, seat, e));
    list.scrollTop = list.scrollHeight;
  });
  const stepText = R.step === 0 ? "Before the first guess"
    : R.step < last ? `${full.config && full.config.pacing === "free" ? "Guess" : "Round"} ${R.step} of ${last}`
      : `End: ${summary ? summary.title : "finished"}`;
  setText($("#rp-step"), stepText);
  $("#rp-first").disabled = R.step === 0;
  $("#rp-prev").disabled = R.step === 0;
  $("#rp-next").disabled = R.step >= last;
  $("#rp-last").disabled = R.step >= last;
  if (full.result) renderFairness(full, $("#record-fairness"));
}

function stepRecord(to) {
  const R = S.record;
  if (!R || !R.events) return;
  R.step = Math.max(0, Math.min(R.steps.length, to));
  renderRecord();
}

function wireRecord() {
  $("#rp-first").addEventListener("click", () => stepRecord(0));
  $("#rp-prev").addEventListener("click", () => stepRecord(S.record.step - 1));
  $("#rp-next").addEventListener("click", () => stepRecord(S.record.step + 1));
  $("#rp-last").addEventListener("click", () => stepRecord(Infinity));
  document.addEventListener("keydown", (e) => {
    if (currentView() !== "record" || e.ctrlKey || e.metaKey || e.altKey) return;
    const tag = document.activeElement ? document.activeElement.tagName : "";
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    if (e.key === "ArrowRight") stepRecord(S.record.step + 1);
    else if (e.key === "ArrowLeft") stepRecord(S.record.step - 1);
    else if (e.key === "Home") stepRecord(0);
    else if (e.key === "End") stepRecord(Infinity);
    else return;
    e.preventDefault();
  });
  $("#btn-copy-link").addEventListener("click", async () => {
    const btn = $("#btn-copy-link");
    try {
      await navigator.clipboard.writeText(location.href);
      btn.textContent = "Link copied";
    } catch {
      btn.textContent = location.href; // no clipboard here (plain http): the link, to copy by hand
    }
  });
  $("#btn-record-watch").addEventListener("click", () => {
    const id = S.record.id;
    const live = liveMatch();
    if (live && live.id === id) {
      setTab("match");
      return;
    }
    history.pushState(null, "", `/${location.search}`);
    watchMatch(id);
  });
  $("#btn-history-more").addEventListener("click", () => {
    const P = S.player;
    if (!P || !P.next) return;
    P.more = true;
    send({ type: "history", player: P.name, cursor: P.next, limit: 20 }, { name: P.name });
    renderPlayer();
  });
}

// -- tournaments: the list, the create form, a tournament's page (docs/protocol.md, "Tournaments")

const FORMAT_NAMES = { "round-robin": "Round robin", swiss: "Swiss", arena: "Arena" };
const FORMAT_DESCRIPTIONS = {
  "round-robin": "Everyone meets everyone, Rounds times; each meeting is two games, seats swapped.",
  swiss: "Rounds rounds; each pairs players of equal or nearest score who have not met yet.",
  arena: "For the length given, players are paired as soon as they are free; two games each time.",
};
const POOL_NAMES = { any: "anyone", humans: "people only", bots: "programs only" };
const STATUS_NAMES = { upcoming: "upcoming", running: "running", finished: "finished" };

function newTourney(id) {
  return { id, data: null, error: "", busy: false };
}

function refreshTourneys() { send({ type: "tournaments" }); }

function watchTourney(id) {
  send({ type: "tournament_watch", tournament_id: id }, { tournamentId: id });
}

/** The tournament page for `id`: watch it (its updates keep the page live), stop watching the
 * one shown before. */
function openTourney(id) {
  if (S.tourney && S.tourney.id === id && (S.tourney.data || !S.welcomed)) return;
  if (S.tourney && S.tourney.id !== id) send({ type: "tournament_unwatch", tournament_id: S.tourney.id });
  S.tourney = newTourney(id);
  if (S.welcomed) watchTourney(id);
}

function onTourney(msg, ctx) {
  const t = msg.tournament;
  if (!t || !t.tournament_id) return;
  S.tourneyNames[t.tournament_id] = t.name;
  // the list shows summaries: keep its row up to date too
  const i = S.tourneys.list.findIndex((x) => x.tournament_id === t.tournament_id);
  if (i >= 0) S.tourneys.list[i] = { ...S.tourneys.list[i], ...t, player_count: (t.players || []).length };
  if (ctx && ctx.type === "tournament_create") {
    // the one just created: its page, from which the creator can join it
    $("#tourney-form").hidden = true;
    $("#btn-new-tourney").setAttribute("aria-expanded", "false");
    $("#tf-submit").disabled = false;
    S.tourney = newTourney(t.tournament_id);
    S.tourney.data = t;
    watchTourney(t.tournament_id);
    navigate(`/tournament/${encodeURIComponent(t.tournament_id)}`);
    return;
  }
  if (S.tourney && S.tourney.id === t.tournament_id) {
    S.tourney.data = t;
    S.tourney.error = "";
    if (ctx && ctx.type === "tournament_start") S.tourney.busy = false;
    renderTourney();
  }
  if (currentView() === "tourneys") renderTourneys();
  if (S.m && S.m.tournamentId === t.tournament_id && currentView() === "match") renderMatch();
}

function tourneyError(ctx, text) {
  if (ctx.type === "tournament_create") {
    $("#tf-submit").disabled = false;
    $("#tf-error").textContent = text;
    return;
  }
  if (ctx.type === "tournaments") {
    $("#tourneys-error").textContent = text;
    return;
  }
  if (S.tourney && ctx.tournamentId === S.tourney.id) {
    S.tourney.busy = false;
    S.tourney.error = text;
    renderTourney();
  }
}

function isMe(name) { return sameName(name, S.name); }

function tourneyFacts(t) {
  const size = t.format === "arena"
    ? `${Math.round((t.duration_s || 0) / 60)} min`
    : t.format === "swiss" ? `${t.rounds} rounds`
      : t.rounds > 1 ? `${t.rounds} times each` : "once each";
  return [FORMAT_NAMES[t.format] || t.format, size, rulesLabel(t.rules || DEFAULT_RULES),
    POOL_NAMES[t.pool] || t.pool, t.secrets === "server" ? "secrets by the server" : "secrets by the players",
    t.pacing, t.rated ? "rated" : "unrated"];
}

function clockIn(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function tourneyWhen(t) {
  const now = Date.now();
  if (t.status === "upcoming") return `Starts in ${clockIn(t.starts_at - now)}`;
  if (t.status === "running") {
    if (t.format === "arena" && t.ends_at) return `Running · ends in ${clockIn(t.ends_at - now)} · ${t.round} pairings so far`;
    return `Running · round ${t.round}${t.format === "swiss" && t.rounds ? ` of ${t.rounds}` : ""}`;
  }
  return t.ends_at ? `Finished ${new Date(t.ends_at).toLocaleString()}` : "Finished";
}

function renderTourneys() {
  if (currentView() !== "tourneys") return;
  const groups = $("#tourney-groups");
  const list = S.tourneys.list;
  const sections = [];
  for (const status of ["upcoming", "running", "finished"]) {
    const items = list.filter((t) => t.status === status);
    if (!items.length) continue;
    sections.push(el("section", { class: "card flush tourney-group", "data-status": status },
      el("h2", { class: "history-title", text: status === "upcoming" ? "Upcoming" : status === "running" ? "Running" : "Finished" }),
      el("ul", { class: "live-list" }, ...items.map((t) => el("li", { class: "live-item tourney-item", "data-tournament": t.tournament_id },
        el("div", { class: "tourney-item-main" },
          el("a", {
            class: "link-a tourney-name", href: `/tournament/${encodeURIComponent(t.tournament_id)}${location.search}`,
            "data-route": "", text: t.name,
          }),
          el("span", { class: "live-meta" },
            el("span", { class: "chip", text: FORMAT_NAMES[t.format] || t.format }),
            el("span", { class: "chip", text: rulesLabel(t.rules || DEFAULT_RULES) }),
            el("span", { class: "chip", text: POOL_NAMES[t.pool] || t.pool }),
            el("span", { class: "muted", text: `${t.player_count ?? 0} player${t.player_count === 1 ? "" : "s"}` }),
            el("span", { class: "muted tourney-when", "data-when": t.tournament_id, text: tourneyWhen(t) }))),
        el("a", {
          class: "btn small", href: `/tournament/${encodeURIComponent(t.tournament_id)}${location.search}`,
          "data-route": "", "aria-label": `Open ${t.name}`,
        }, "Open"))))));
  }
  groups.replaceChildren(...sections);
  $("#tourneys-empty").hidden = !S.tourneys.loaded || list.length > 0;
}

function tickTourneys() {
  // the countdowns move without a rebuild
  if (currentView() === "tourneys") {
    for (const node of document.querySelectorAll("#tourney-groups [data-when]")) {
      const t = S.tourneys.list.find((x) => x.tournament_id === node.dataset.when);
      if (t) setText(node, tourneyWhen(t));
    }
  }
  if (currentView() === "tourney" && S.tourney && S.tourney.data) {
    setText($("#tourney-when"), tourneyWhen(S.tourney.data));
  }
}

function resultText(g) {
  if (g.result === null || g.result === undefined) return "playing";
  if (g.result === "1/2-1/2") return "draw";
  return `${g.result === "1-0" ? g.players[0] : g.players[1]} won`;
}

function renderTourney() {
  const T = S.tourney;
  if (!T || currentView() !== "tourney") return;
  const t = T.data;
  setText($("#tourney-error"), T.error || "");
  $("#tourney-body").hidden = !t;
  if (!t) {
    setText($("#tourney-title"), "Tournament");
    $("#tourney-status").hidden = true;
    return;
  }
  setText($("#tourney-title"), t.name);
  const status = $("#tourney-status");
  status.hidden = false;
  status.dataset.status = t.status;
  setText(status, STATUS_NAMES[t.status] || t.status);
  setText($("#tourney-facts"), tourneyFacts(t).join(" · "));
  setText($("#tourney-when"), tourneyWhen(t));
  const players = t.players || [];
  const joined = players.some(isMe);
  const open = t.status === "upcoming" || (t.status === "running" && t.format === "arena");
  const mine = liveMatch() && liveMatch().tournamentId === t.tournament_id ? liveMatch() : null;
  const poolShut = t.pool === "bots";
  const join = $("#btn-tourney-join");
  const leave = $("#btn-tourney-leave");
  join.hidden = joined || !open || poolShut;
  leave.hidden = !joined || !open;
  join.disabled = T.busy;
  leave.disabled = T.busy;
  // its creator may start it before its time, once everyone is there
  const start = $("#btn-tourney-start");
  start.hidden = t.status !== "upcoming" || !isMe(t.creator);
  start.disabled = T.busy;
  $("#btn-tourney-match").hidden = !mine;
  let me = "";
  if (poolShut && open) me = "Programs only: people cannot join this one (a program joins with moo bot --tournament).";
  else if (joined && t.status === "upcoming") me = "You are in. Your games start here when the tournament does: stay on this page or anywhere in the arena.";
  else if (joined && t.status === "running") me = mine ? "Your game is on." : "You are playing in this tournament: your next game starts by itself.";
  else if (t.status === "finished" && (t.standings || []).some((r) => isMe(r.name))) {
    const row = t.standings.find((r) => isMe(r.name));
    const shared = t.standings.filter((r) => r.rank === row.rank).length > 1 ? "shared " : "";
    me = `You finished ${shared}${ordinal(row.rank)} with ${row.score} point${row.score === 1 ? "" : "s"}.`;
  }
  setText($("#tourney-me"), me);
  $("#tourney-me").hidden = !me;
  setText($("#tourney-players"), players.length
    ? `${players.length} player${players.length === 1 ? "" : "s"}: ${players.join(", ")}`
    : "No player has joined yet.");
  // standings; once finished, the final table
  setText($("#standings-title"), t.status === "finished" ? "Final standings" : "Standings");
  $("#standings").dataset.final = t.status === "finished" ? "true" : "false";
  $("#standings-tiebreak").title = t.tiebreak === "buchholz" ? "Tie-break: Buchholz" : "Tie-break: Sonneborn-Berger";
  const rows = t.standings || [];
  $("#standings-body").replaceChildren(...rows.map((r) => el("tr", { class: isMe(r.name) ? "me" : null, "data-player": r.name },
    el("td", { class: "rank", text: String(r.rank) }),
    el("th", { scope: "row", class: "player" }, playerLink(r.name)),
    el("td", { class: "num hide-sm", text: String(r.games) }),
    el("td", { class: "num", text: `${r.wins}–${r.draws}–${r.losses}` }),
    el("td", { class: "num strong score", text: String(r.score) }),
    el("td", {
      class: "num", text: r.elo === null || r.elo === undefined ? "—" : `${r.elo > 0 ? "+" : ""}${r.elo}`,
      title: r.elo_low !== null && r.elo_low !== undefined && r.elo_high !== null && r.elo_high !== undefined
        ? `95 % interval ${r.elo_low} to ${r.elo_high}` : null,
    }),
    el("td", { class: "num hide-sm", text: fmtTiebreak(r.tiebreak) }))));
  $("#standings-empty").hidden = rows.some((r) => r.games > 0);
  // the games, newest first: watch one being played, replay a finished one
  const games = (t.games || []).slice().reverse();
  $("#tourney-games").replaceChildren(...games.map((g) => {
    const playing = g.result === null || g.result === undefined;
    const inIt = g.players.some(isMe);
    let action;
    if (playing && inIt) {
      action = el("button", { type: "button", class: "btn small primary", "data-game-open": g.match_id }, "Your game");
      action.addEventListener("click", () => setTab("match"));
      action.disabled = !(S.m && S.m.id === g.match_id);
    } else if (playing) {
      action = el("button", {
        type: "button", class: "btn small", "data-watch": g.match_id, disabled: !!liveMatch(),
        title: liveMatch() ? "Finish your match first" : null,
      }, "Watch");
      action.addEventListener("click", () => {
        if (liveMatch()) return;
        history.pushState(null, "", `/${location.search}`); // "Stop watching" comes back here
        watchMatch(g.match_id);
      });
    } else {
      action = el("a", {
        class: "btn small", href: `/match/${encodeURIComponent(g.match_id)}${location.search}`,
        "data-route": "", "aria-label": `Replay ${g.players[0]} vs ${g.players[1]}`,
      }, "Replay");
    }
    return el("li", { class: `hrow tgame${playing ? " live" : ""}`, "data-match": g.match_id, "data-result": g.result || "" },
      el("span", { class: "res", title: `round ${g.round}`, text: String(g.round) }),
      el("span", { class: "hrow-main" },
        el("span", { class: "hrow-vs" }, playerLink(g.players[0]), " vs ", playerLink(g.players[1])),
        el("span", { class: "hrow-meta" },
          el("span", { class: `chip${playing ? " live-chip" : ""}`, text: resultText(g) }),
          g.result ? el("span", { class: "muted", text: g.result }) : null)),
      action);
  }));
  $("#tgames-empty").hidden = games.length > 0;
  // a long arena's object lists only its most recent games
  setText($("#tgames-title"), typeof t.game_count === "number" && t.game_count > games.length
    ? `Games (the last ${games.length} of ${t.game_count})` : "Games");
}

function fmtTiebreak(x) {
  if (x === null || x === undefined) return "—";
  return Number.isInteger(x) ? String(x) : Number(x).toFixed(2).replace(/0$/, "");
}

function ordinal(n) {
  const s = ["th", "st", "nd", "rd"];
  const v = n % 100;
  return `${n}${s[(v - 20) % 10] || s[v] || s[0]}`;
}

function renderTourneyForm() {
  const fmt = $("#tf-format").value;
  const arena = fmt === "arena";
  $("#tf-rounds").hidden = arena;
  $("#tf-rounds-label").hidden = arena;
  $("#tf-duration").hidden = !arena;
  $("#tf-duration-label").hidden = !arena;
  setText($("#tf-format-desc"), FORMAT_DESCRIPTIONS[fmt] || "");
}

function intField(sel, lo, hi, what) {
  const raw = $(sel).value.trim();
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < lo || n > hi) throw new Error(`${what} must be a whole number from ${lo} to ${hi}.`);
  return n;
}

function submitTourney() {
  const error = $("#tf-error");
  const name = $("#tf-name").value.trim();
  const msg = { type: "tournament_create", name, format: $("#tf-format").value };
  try {
    if (!name) throw new Error("Give the tournament a name.");
    if ([...name].length > 64) throw new Error("A name has at most 64 characters.");
    if (msg.format === "arena") msg.duration_s = 60 * intField("#tf-duration", 1, 1440, "The length in minutes");
    else msg.rounds = intField("#tf-rounds", 1, 50, "Rounds");
    msg.start_in_s = intField("#tf-start", 0, 86400, "Starts in (seconds)");
  } catch (err) {
    error.textContent = err.message;
    return;
  }
  const spec = $("#tf-game").value;
  msg.rules = S.variants.find((r) => rulesSpec(r) === spec) || DEFAULT_RULES;
  msg.pool = $("#tf-pool").value;
  msg.secrets = $("#tf-secrets").value;
  msg.pacing = $("#tf-pacing").value;
  msg.rated = $("#tf-rated").checked;
  if (!requireOnline()) {
    error.textContent = "Not connected; try again in a moment.";
    return;
  }
  error.textContent = "";
  $("#tf-submit").disabled = true;
  send(msg);
}

function wireTourneys() {
  $("#btn-refresh-tourneys").addEventListener("click", refreshTourneys);
  $("#btn-new-tourney").addEventListener("click", () => {
    const form = $("#tourney-form");
    form.hidden = !form.hidden;
    $("#btn-new-tourney").setAttribute("aria-expanded", String(!form.hidden));
    if (!form.hidden) {
      // the Game menu offers what this server offers, as the lobby's does
      const game = $("#tf-game");
      const keep = game.value;
      game.replaceChildren(...S.variants.map((r) => el("option", { value: rulesSpec(r) }, rulesLabel(r))));
      if (S.variants.some((r) => rulesSpec(r) === keep)) game.value = keep;
      renderTourneyForm();
      $("#tf-name").focus();
    }
  });
  $("#tf-cancel").addEventListener("click", () => {
    $("#tourney-form").hidden = true;
    $("#btn-new-tourney").setAttribute("aria-expanded", "false");
  });
  $("#tf-format").addEventListener("change", renderTourneyForm);
  // programs play with secrets set by the server unless asked otherwise (the server's default)
  $("#tf-pool").addEventListener("change", () => {
    $("#tf-secrets").value = $("#tf-pool").value === "bots" ? "server" : "players";
  });
  $("#tourney-form").addEventListener("submit", (e) => {
    e.preventDefault();
    submitTourney();
  });
  // Join, Start now, Leave: one request each about the open tournament, the buttons held
  // until its answer
  for (const [button, type] of [["#btn-tourney-join", "tournament_join"],
    ["#btn-tourney-start", "tournament_start"], ["#btn-tourney-leave", "tournament_leave"]]) {
    $(button).addEventListener("click", () => {
      const T = S.tourney;
      if (!T || !requireOnline()) return;
      T.busy = true;
      T.error = "";
      send({ type, tournament_id: T.id }, { tournamentId: T.id });
      renderTourney();
    });
  }
  $("#btn-tourney-match").addEventListener("click", () => setTab("match"));
  $("#btn-to-tourney").addEventListener("click", () => {
    const id = S.m && S.m.tournamentId;
    if (!id) return;
    leaveMatch();
    openTourney(id);
    navigate(`/tournament/${encodeURIComponent(id)}`);
    focusView();
  });
}

// -- the ladder: hosted bots, their standings and pages (docs/protocol.md, "Ladder") -----------

/** A program is sent in chunks (a client message is at most 4096 bytes): 2304 bytes are 3072
 * base64 characters, the most a `ladder_upload` takes. */
const CHUNK_BYTES = 2304;
const MAX_PROGRAM_BYTES = 1 << 20;
/** The server lets a connection send 20 messages a second after a burst of 40: past the first
 * chunks an upload goes at about 16 a second, leaving room for the page's other messages. */
const UPLOAD_BURST = 24;
const UPLOAD_GAP_MS = 60;
const BOT_STATUS = {
  checking: "checking", refused: "refused", active: "active", paused: "paused", withdrawn: "withdrawn",
  offline: "offline",
};

function newBotPage(id) {
  return { id, data: null, error: "" };
}

function refreshLadder() {
  send({ type: "ladder_show", rules: ladderRules() }, { rules: $("#ladder-variant").value });
}

function ladderRules() {
  const spec = $("#ladder-variant").value;
  return S.variants.find((r) => rulesSpec(r) === spec) || S.variants[0] || DEFAULT_RULES;
}

function requestBot(id) {
  send({ type: "ladder_page", bot_id: id }, { botId: id });
}

function requestMine() {
  send({ type: "ladder_mine" });
}

function myPage() {
  return !!S.player && sameName(S.player.name, S.name);
}

function botHref(id) {
  return `/bot/${encodeURIComponent(id)}${location.search}`;
}

function botLink(name, id, attrs = {}) {
  return el("a", { href: botHref(id), "data-route": "", class: "link-a", ...attrs }, name);
}

/** Rebuild `container`'s content without dropping the keyboard focus: the control carrying the
 * same `data-focus` key in the new content gets it back (the ladder and a bot's page are
 * rebuilt every 10 s, your bots at each answer). */
function keepFocus(container, rebuild) {
  const active = document.activeElement;
  const key = active && active !== container && container.contains(active) ? active.dataset.focus : null;
  rebuild();
  if (!key) return;
  const again = container.querySelector(`[data-focus="${CSS.escape(key)}"]`);
  if (again) again.focus({ preventScroll: true });
}

/** A "p/q" fraction as a percentage (the exact evaluator's scores are fractions as text). */
function fractionPct(text) {
  const hit = /^(-?\d+)\/(\d+)$/.exec(String(text || ""));
  if (!hit || Number(hit[2]) === 0) return null;
  return Number(hit[1]) / Number(hit[2]);
}

function exactText(exact, long = false) {
  const e = exact || {};
  if (e.status === "computed") {
    const min = fractionPct(e.vs_minimum);
    const str = fractionPct(e.vs_strongest);
    if (min === null || str === null) return "—";
    return long ? `Exact score ${pct(min)} against minimum, ${pct(str)} against strongest (${fmt(fractionPct(e.average), 3)} guesses on average).`
      : `${pct(min)} / ${pct(str)}`;
  }
  if (e.status === "pending") return long ? "Exact score: being computed." : "computing…";
  if (e.status === "not_deterministic") return long ? "No exact score: the program plays differently from run to run." : "not deterministic";
  return long ? "" : "—";
}

function intervalText(low, high) {
  if (low === null && high === null) return "";
  return `${low ?? "…"}–${high ?? "…"}`;
}

function onLadderStandings(msg, ctx) {
  if (ctx && ctx.rules && ctx.rules !== $("#ladder-variant").value) return; // an older choice
  S.ladder = { rows: msg.standings || [], loaded: true, at: Date.now(), error: "" };
  renderLadder();
}

function renderLadder() {
  if (currentView() !== "ladder") return;
  setText($("#ladder-error"), S.ladder.error || "");
  const rows = S.ladder.rows;
  keepFocus($("#ladder-body"), () => $("#ladder-body").replaceChildren(...rows.map((r, i) => {
    const mine = isMe(r.owner);
    const interval = intervalText(r.low, r.high);
    return el("tr", { class: mine ? "me" : null, "data-bot": r.bot_id, "data-status": r.status },
      el("td", { class: "rank", text: r.rating === null ? "–" : String(i + 1) }),
      el("th", { scope: "row", class: "player" },
        botLink(r.bot, r.bot_id, { "data-focus": `bot:${r.bot_id}` }),
        r.status === "paused" || r.status === "offline" ? el("span", { class: "chip", text: r.status }) : null,
        r.kind === "connected" ? el("span", { class: "chip", "data-kind": "connected", title: "A connected bot: it plays from its own machine while connected (docs/ladder.md)", text: "connected" }) : null,
        el("span", { class: "owner-sm", text: `by ${r.owner}` })),
      el("td", { class: "hide-sm" }, playerLink(r.owner, { "data-focus": `owner:${r.bot_id}` })),
      el("td", {
        class: "num strong rating", title: interval ? `95 % interval ${interval}` : "No finished game yet",
      }, r.rating === null ? "—" : String(r.rating),
      interval ? el("span", { class: "interval", text: interval }) : null),
      el("td", { class: "num hide-sm", text: String(r.games) }),
      el("td", { class: "num", text: `${r.wins}–${r.draws}–${r.losses}` }),
      el("td", { class: "num hide-sm", text: String(r.forfeits) }),
      el("td", { class: "num hide-sm exact", "data-exact": (r.exact || {}).status || "", text: exactText(r.exact) }));
  })));
  $("#ladder-empty").hidden = !S.ladder.loaded || rows.length > 0;
  setText($("#ladder-updated"), S.ladder.at
    ? `Updated ${new Date(S.ladder.at).toLocaleTimeString()}; it refreshes itself every 10 s while on screen. Rating: a Bradley-Terry fit over every game of the ladder, 95 % interval under it.`
    : "");
  const link = $("#ladder-submit-link");
  link.href = `/player/${encodeURIComponent(S.name || "")}${location.search}`;
}

// -- a bot's page ------------------------------------------------------------------------------

function openBot(id) {
  if (!S.bot || S.bot.id !== id) {
    S.bot = newBotPage(id);
    if (S.welcomed) requestBot(id);
  }
}

function onBotPage(msg) {
  if (!S.bot || !msg.bot || msg.bot.bot_id !== S.bot.id) return;
  S.bot.data = msg;
  S.bot.error = "";
  renderBot();
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== null && v !== undefined) node.setAttribute(k, String(v));
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** The rating history as an inline SVG: the rating after each pairing as a line over its 95 %
 * interval as a band (an open end of the interval reaches the chart's edge). */
function ratingChart(history, width) {
  // drawn at the box's own width (one unit a CSS pixel), so its labels keep their size on a phone
  const W = Math.max(260, Math.round(width || 600)), H = W < 500 ? 200 : 240, L = 48, R = 12, T = 12, B = 30;
  const xs = history.map((p) => p.games);
  const finite = history.flatMap((p) => [p.rating, p.low, p.high]).filter((v) => v !== null);
  let lo = Math.min(...finite), hi = Math.max(...finite);
  lo = Math.floor((lo - 10) / 50) * 50;
  hi = Math.ceil((hi + 10) / 50) * 50;
  let x0 = Math.min(...xs), x1 = Math.max(...xs);
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  const px = (g) => L + ((g - x0) / (x1 - x0)) * (W - L - R);
  const py = (v) => T + ((hi - v) / (hi - lo)) * (H - T - B);
  const edge = (v, fallback) => py(v === null ? fallback : v);
  const first = history[0], last = history[history.length - 1];
  const chart = svg("svg", {
    viewBox: `0 0 ${W} ${H}`, class: "rating-chart", role: "img", "data-points": history.length,
    "aria-label": `Rating history: ${first.rating} after ${first.games} games, ${last.rating} after ${last.games} games (95 % interval ${intervalText(last.low, last.high)})`,
  });
  const step = Math.max(50, Math.ceil((hi - lo) / 4 / 50) * 50);
  for (let v = lo; v <= hi; v += step) {
    chart.append(svg("line", { class: "chart-grid", x1: L, x2: W - R, y1: py(v), y2: py(v) }),
      svg("text", { class: "chart-label", x: L - 6, y: py(v) + 4, "text-anchor": "end" }, String(v)));
  }
  chart.append(svg("text", { class: "chart-label", x: L, y: H - 8 }, `${first.games} games`),
    svg("text", { class: "chart-label", x: W - R, y: H - 8, "text-anchor": "end" }, `${last.games} games`));
  let band;
  if (history.length === 1) {
    const x = px(first.games);
    band = [[x - 8, edge(first.high, hi)], [x + 8, edge(first.high, hi)], [x + 8, edge(first.low, lo)], [x - 8, edge(first.low, lo)]];
  } else {
    band = [...history.map((p) => [px(p.games), edge(p.high, hi)]),
      ...history.slice().reverse().map((p) => [px(p.games), edge(p.low, lo)])];
  }
  chart.append(svg("polygon", { class: "chart-band", points: band.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ") }));
  chart.append(svg("polyline", {
    class: "chart-line", points: history.map((p) => `${px(p.games).toFixed(1)},${py(p.rating).toFixed(1)}`).join(" "),
  }));
  for (const p of history) {
    chart.append(svg("circle", { class: "chart-dot", cx: px(p.games).toFixed(1), cy: py(p.rating).toFixed(1), r: 3.5 },
      svg("title", {}, `${p.rating} (${intervalText(p.low, p.high)}) after ${p.games} games, ${new Date(p.at).toLocaleString()}`)));
  }
  return chart;
}

const RESULT_LETTERS = { win: "W", loss: "L", draw: "D" };

function renderBot() {
  if (!S.bot || currentView() !== "bot") return;
  keepFocus($("#view-bot"), renderBotPage);
}

function renderBotPage() {
  const B = S.bot;
  const d = B.data;
  setText($("#bot-error"), B.error || "");
  $("#bot-body").hidden = !d;
  if (!d) {
    setText($("#bot-title"), "Bot");
    $("#bot-status").hidden = true;
    return;
  }
  const bot = d.bot;
  setText($("#bot-title"), bot.name);
  const status = $("#bot-status");
  status.hidden = false;
  status.dataset.status = bot.status;
  setText(status, BOT_STATUS[bot.status] || bot.status);
  setText($("#bot-rating"), d.rating === null ? "—" : String(d.rating));
  setText($("#bot-interval"), d.rating === null ? "no finished game yet"
    : `95 % interval ${intervalText(d.low, d.high)}`);
  $("#bot-facts").replaceChildren("by ", playerLink(bot.owner, { "data-focus": "owner" }), ` · ${rulesLabel(bot.rules || DEFAULT_RULES)}`,
    bot.kind === "connected" ? " · a connected bot: it plays from its own machine while connected"
      : bot.version ? ` · version ${bot.version} plays` : " · no version accepted yet",
    ` · ${bot.kind === "connected" ? "joined" : "submitted"} ${new Date(bot.created_at).toLocaleDateString()}`);
  setText($("#bot-games"), String(d.games));
  setText($("#bot-wins"), String(d.wins));
  setText($("#bot-draws"), String(d.draws));
  setText($("#bot-losses"), String(d.losses));
  setText($("#bot-forfeits"), d.forfeits
    ? `${d.forfeits} of the losses by forfeit (its program failed: crash, timeout, garbage, a limit).`
    : "No forfeit.");
  const exact = exactText(bot.exact, true);
  setText($("#bot-exact"), exact);
  $("#bot-exact").hidden = !exact;
  const history = (d.history || []).filter((p) => p.rating !== null);
  const box = $("#bot-chart");
  box.replaceChildren(...(history.length ? [ratingChart(history, box.clientWidth)] : []));
  $("#bot-chart-empty").hidden = history.length > 0;
  const opponents = d.opponents || [];
  $("#bot-opponents").replaceChildren(...opponents.map((o) => el("tr", { "data-bot": o.bot_id },
    el("th", { scope: "row", class: "player" }, botLink(o.bot, o.bot_id, { "data-focus": `opp:${o.bot_id}` })),
    el("td", { class: "num", text: String(o.games) }),
    el("td", { class: "num", text: `${o.wins}–${o.draws}–${o.losses}` }))));
  $("#bot-opp-empty").hidden = opponents.length > 0;
  const recent = d.recent || [];
  $("#bot-recent").replaceChildren(...recent.map((g) => {
    const when = g.ended_at ? new Date(g.ended_at) : null;
    return el("li", { class: `hrow ${g.result}`, "data-match": g.match_id },
      el("span", { class: `res ${g.result}`, title: g.result, text: RESULT_LETTERS[g.result] || "?" }),
      el("span", { class: "hrow-main" },
        el("span", { class: "hrow-vs" }, "vs ", botLink(g.opponent, g.opponent_id, { "data-focus": `vs:${g.match_id}` })),
        el("span", { class: "hrow-meta" },
          el("span", { class: "chip", text: g.seat === 0 ? "first seat" : "second seat" }),
          el("span", { class: "chip", text: REASONS[g.reason] || g.reason || "" }),
          el("span", { class: "chip", text: `v${g.version}` }),
          when ? el("time", { datetime: when.toISOString(), text: when.toLocaleString() }) : null)),
      el("a", {
        class: "btn small", href: `/match/${encodeURIComponent(g.match_id)}${location.search}`,
        "data-route": "", "aria-label": `Replay the game against ${g.opponent}`, "data-focus": `replay:${g.match_id}`,
      }, "Replay"));
  }));
  $("#bot-recent-empty").hidden = recent.length > 0;
  $("#bot-versions").replaceChildren(...(d.versions || []).map((v) => el("li", { class: "hrow version-row", "data-version": v.version, "data-check": v.check },
    el("span", { class: "res", text: String(v.version) }),
    el("span", { class: "hrow-main" },
      el("span", { text: `Version ${v.version}${v.version === bot.version ? " (plays now)" : ""}` }),
      el("span", { class: "hrow-meta" },
        el("span", { class: `chip check-${v.check}`, text: v.check }),
        el("span", { text: `${v.size} bytes` }),
        el("code", { class: "sha", title: v.sha256, text: `sha256 ${v.sha256.slice(0, 12)}…` }),
        el("time", { datetime: new Date(v.submitted_at).toISOString(), text: new Date(v.submitted_at).toLocaleString() }))))));
}

// -- your bots, on your own player page: submit, replace, pause, resume, withdraw, error log ---

function b64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

async function sha256Bytes(bytes) {
  const hex = (buf) => [...buf].map((b) => b.toString(16).padStart(2, "0")).join("");
  if (globalThis.crypto && crypto.subtle) return hex(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)));
  return hex(sha256Fallback(bytes));
}

/** What the page says about one of your bots (the verdict of its check, a refusal...). */
function mineNote(botId, text, kind = "note") {
  S.mine.notes[botId] = { text, kind };
}

function programProblem(file) {
  if (!file) return "Choose the program's file first.";
  if (file.size === 0) return "That file is empty.";
  if (file.size > MAX_PROGRAM_BYTES) return `That file has ${file.size} bytes; a program has at most 1 MiB (${MAX_PROGRAM_BYTES} bytes).`;
  return null;
}

/** Start a submission: a new bot (from the form) or a new version of `botId`. */
async function startSubmission(file, { name = null, rules = null, botId = null } = {}) {
  const J = S.mine.job;
  if (J && (J.state === "uploading" || J.state === "submitting")) return "Wait for the upload under way to finish.";
  const problem = programProblem(file);
  if (problem) return problem;
  if (!S.welcomed || !S.ws) return "Not connected; try again in a moment.";
  const job = {
    name, rules, botId, bytes: null, sha256: null, offset: 0, upload: null, sent: 0,
    state: "uploading", version: null, reused: false,
  };
  S.mine.job = job; // at once: a second tap meanwhile is "wait for the upload under way"
  renderMine();
  job.bytes = new Uint8Array(await file.arrayBuffer());
  job.sha256 = await sha256Bytes(job.bytes);
  if (S.mine.job !== job || job.state !== "uploading") return null; // e.g. the connection dropped
  // the same program uploaded before and refused at submit (a taken name...): its upload is
  // still open on this connection (the server keeps it), and uploads open at once are few
  const spare = S.mine.spare[job.sha256];
  if (spare) {
    job.upload = spare;
    job.offset = job.bytes.length;
    job.reused = true;
    submitUpload(job);
  } else {
    sendChunk(job);
  }
  return null;
}

function sendChunk(job) {
  if (S.mine.job !== job || job.state !== "uploading") return;
  const end = Math.min(job.bytes.length, job.offset + CHUNK_BYTES);
  const msg = { type: "ladder_upload", offset: job.offset, data: b64(job.bytes.subarray(job.offset, end)) };
  if (job.upload) msg.upload = job.upload;
  job.sent += 1;
  if (send(msg, { job }) === null) return submissionFailed(job, "Not connected; submit again once the page is back online.");
  renderMine();
}

function onUploaded(msg, ctx) {
  const job = ctx && ctx.job;
  if (!job || S.mine.job !== job) return;
  job.upload = msg.upload;
  job.offset = msg.size;
  if (job.offset < job.bytes.length) {
    setTimeout(() => sendChunk(job), job.sent < UPLOAD_BURST ? 0 : UPLOAD_GAP_MS);
    renderMine();
    return;
  }
  submitUpload(job);
}

function submitUpload(job) {
  job.state = "submitting";
  const submit = { type: "ladder_submit", upload: job.upload, sha256: job.sha256 };
  if (job.botId) submit.bot_id = job.botId;
  else {
    submit.name = job.name;
    submit.rules = job.rules;
  }
  if (send(submit, { job }) === null) submissionFailed(job, "The connection dropped while submitting: your bots below show whether it was stored.");
  renderMine();
}

function onSubmitted(msg, ctx) {
  const bot = msg.bot;
  upsertMine(bot);
  const job = ctx && ctx.job;
  if (job) delete S.mine.spare[job.sha256]; // used up
  if (job && S.mine.job === job) {
    job.state = "checking";
    job.botId = bot.bot_id;
    job.version = bot.checking;
    job.name = bot.name;
    if (job.rules) {
      // a new bot from the form: the form is ready for the next one
      $("#submit-form").reset();
      $("#sf-rules").value = rulesSpec(job.rules);
    }
    mineNote(bot.bot_id, `Checking version ${bot.checking}: it must answer moo 1 and play 3 legal games against random in the sandbox…`, "checking");
    // a verdict that came first (a quick check) is applied now
    const early = S.mine.verdicts[`${bot.bot_id}:${bot.checking}`];
    if (early) onChecked(early);
  }
  requestMine();
  renderMine();
}

function onChecked(msg) {
  S.mine.verdicts[`${msg.bot_id}:${msg.version}`] = msg;
  if (msg.bot) upsertMine(msg.bot);
  const name = msg.bot ? msg.bot.name : msg.bot_id;
  const job = S.mine.job;
  const ours = job && job.botId === msg.bot_id && job.version === msg.version;
  if (ours) job.state = msg.accepted ? "accepted" : "refused";
  if (msg.accepted) {
    mineNote(msg.bot_id, `Accepted: version ${msg.version} of “${name}” plays on the ladder from its next pairing.`, "ok");
  } else {
    const stays = msg.bot && msg.bot.version
      ? `It keeps playing version ${msg.bot.version}.` : "It is not on the ladder: fix the program and submit a new version.";
    mineNote(msg.bot_id, `Refused: version ${msg.version} of “${name}” failed the check: ${msg.reason}. ${stays}`, "error");
  }
  if (myPage()) requestMine();
  if (S.bot && S.bot.id === msg.bot_id) requestBot(msg.bot_id);
  renderMine();
}

function submissionFailed(job, text) {
  if (S.mine.job !== job) return;
  job.state = "failed";
  job.error = text;
  renderMine();
}

function upsertMine(bot) {
  const list = S.mine.bots;
  const i = list.findIndex((b) => b.bot_id === bot.bot_id);
  if (i >= 0) list[i] = { ...list[i], ...bot };
  else list.unshift({ versions: [], errors: [], stderr: "", ...bot });
}

/** The connection closed: an upload belongs to the connection that opened it. */
function ladderConnectionLost() {
  S.mine.spare = {};
  const job = S.mine.job;
  if (job && job.state === "uploading") submissionFailed(job, "The connection dropped during the upload; submit again once the page is back online.");
  if (job && job.state === "submitting") submissionFailed(job, "The connection dropped while submitting: your bots below show whether it was stored.");
}

const LADDER_CODES = {
  name_taken: (ctx) => `The name “${ctx.job ? ctx.job.name : ""}” is taken: every bot plays under a player name of its own. Pick another.`,
  invalid_name: () => "A bot's name is 1–24 letters, digits, _ - or .",
  not_your_bot: () => "That bot belongs to another player.",
  unknown_bot: () => "That bot is not on this server.",
  unknown_upload: () => "The upload was lost (the connection dropped, or it waited too long); submit again.",
};

function ladderError(msg, ctx) {
  const text = (LADDER_CODES[msg.code] || (() => msg.message || msg.code))(ctx || {});
  const type = ctx.type;
  if (type === "ladder_show") {
    S.ladder.error = text;
    renderLadder();
  } else if (type === "ladder_page") {
    if (S.bot && ctx.botId === S.bot.id) {
      S.bot.error = msg.code === "unknown_bot" ? `No bot has the id “${ctx.botId}”.` : text;
      renderBot();
    }
  } else if (type === "ladder_upload" || type === "ladder_submit") {
    const job = ctx.job;
    if (!job) return;
    if (type === "ladder_submit" && (job.reused || ctx.tries) && msg.code === "unknown_upload") {
      // the kept upload expired (10 minutes), or a submission sent again after a reconnect
      // did not land the first time and its upload went with the old connection: send the
      // program again
      delete S.mine.spare[job.sha256];
      Object.assign(job, { upload: null, offset: 0, reused: false, state: "uploading" });
      sendChunk(job);
      return;
    }
    // a refused submission leaves its upload open: kept for the next try of the same program
    if (type === "ladder_submit" && msg.code !== "unknown_upload") S.mine.spare[job.sha256] = job.upload;
    submissionFailed(job, text);
  } else if (type === "ladder_mine") {
    // e.g. a cluster node, which runs no ladder yet: the server's own sentence, under the form
    S.mine.formError = text;
    renderMine();
  } else if (ctx.botId) {
    S.mine.busy = null;
    mineNote(ctx.botId, text, "error");
    renderMine();
  }
}

function botAction(type, botId) {
  if (S.mine.busy === botId) return; // its last request is not answered yet
  if (!requireOnline()) {
    mineNote(botId, "Not connected; try again in a moment.", "error");
    renderMine();
    return;
  }
  S.mine.busy = botId;
  send({ type, bot_id: botId }, { botId });
  renderMine();
}

function onBotStatus(msg, ctx) {
  upsertMine(msg.bot);
  S.mine.busy = null;
  // the Ladder tab shows the change at once, not at its next refresh: a withdrawn bot leaves
  // the standings, a paused or resumed one changes its chip
  const rows = S.ladder.rows || [];
  const at = rows.findIndex((r) => r.bot_id === msg.bot.bot_id);
  if (at >= 0) {
    if (msg.bot.status === "withdrawn") rows.splice(at, 1);
    else rows[at] = { ...rows[at], status: msg.bot.status };
    renderLadder();
  }
  const said = { paused: "Paused: it is paired no more (games under way are played out).",
    active: "Active: it is paired again.", withdrawn: "Withdrawn for good: out of the standings; its games and versions stay." };
  if (ctx && ctx.botId) mineNote(msg.bot.bot_id, said[msg.bot.status] || msg.bot.status, "note");
  renderMine();
}

function mineItem(bot) {
  const note = S.mine.notes[bot.bot_id];
  const busy = S.mine.busy === bot.bot_id;
  const job = S.mine.job;
  const sending = job && job.botId === bot.bot_id && (job.state === "uploading" || job.state === "submitting");
  const latest = (bot.versions || [])[0];
  const withdrawn = bot.status === "withdrawn";
  const actions = el("div", { class: "row mine-actions" },
    el("a", {
      class: "btn small", href: botHref(bot.bot_id), "data-route": "", "aria-label": `${bot.name}'s page`,
      "data-focus": `${bot.bot_id}:page`,
    }, "Bot page"));
  // a connected bot (docs/ladder.md) has no program: it joins and leaves from its own client
  if (!withdrawn && bot.kind !== "connected") {
    // aria-disabled, not disabled: a button that is tapped keeps the focus while it waits
    const held = sending || (bot.checking !== null && bot.checking !== undefined);
    const replace = el("button", {
      type: "button", class: "btn small", "data-action": "version", "data-focus": `${bot.bot_id}:version`,
      "aria-disabled": held ? "true" : null,
      title: held ? "Wait for the version being checked" : null,
    }, "New version");
    replace.addEventListener("click", () => {
      if (held) return;
      S.mine.versionFor = bot.bot_id;
      $("#nv-file").value = "";
      $("#nv-file").click();
    });
    actions.append(replace);
    if (bot.status === "active" || bot.status === "paused") {
      const toggle = el("button", {
        type: "button", class: "btn small", "data-action": bot.status === "active" ? "pause" : "resume",
        "data-focus": `${bot.bot_id}:toggle`, "aria-disabled": busy ? "true" : null,
      },
        bot.status === "active" ? "Pause" : "Resume");
      toggle.addEventListener("click", () => botAction(bot.status === "active" ? "ladder_pause" : "ladder_resume", bot.bot_id));
      actions.append(toggle);
    }
    const armed = S.mine.armed === bot.bot_id;
    const withdraw = el("button", {
      type: "button", class: "btn small danger ghost", "data-action": "withdraw",
      "data-focus": `${bot.bot_id}:withdraw`, "aria-disabled": busy ? "true" : null,
    },
      armed ? "Really withdraw? Tap again" : "Withdraw");
    withdraw.addEventListener("click", () => {
      if (S.mine.busy === bot.bot_id) return;
      if (S.mine.armed !== bot.bot_id) {
        S.mine.armed = bot.bot_id; // two taps: withdrawing is for good
        renderMine();
        setTimeout(() => {
          if (S.mine.armed === bot.bot_id) {
            S.mine.armed = null;
            renderMine();
          }
        }, 4000);
        return;
      }
      S.mine.armed = null;
      botAction("ladder_withdraw", bot.bot_id);
    });
    actions.append(withdraw);
  }
  const errors = bot.errors || [];
  const log = el("details", { class: "error-log" },
    el("summary", { "data-focus": `${bot.bot_id}:log` }, `Error log (${errors.length} lost game${errors.length === 1 ? "" : "s"})`),
    errors.length ? el("ol", { class: "error-list" }, ...errors.map((e) => el("li", { "data-match": e.match_id },
      el("span", { class: "failure", text: e.failure }),
      el("span", { class: "hrow-meta" },
        el("span", { class: "chip", text: `v${e.version}` }),
        e.ended_at ? el("time", { text: new Date(e.ended_at).toLocaleString() }) : null,
        el("a", {
          class: "link-a", href: `/match/${encodeURIComponent(e.match_id)}${location.search}`, "data-route": "",
          "data-focus": `${bot.bot_id}:replay:${e.match_id}`,
        }, "Replay")))))
      : el("p", { class: "hint", text: "No game lost by a failure of the program." }),
    el("h3", { class: "hint", text: "Standard error, the end of its last game" }),
    el("pre", { class: "stderr", text: bot.stderr || "(nothing)" }));
  if (S.mine.open[bot.bot_id]) log.open = true;
  log.addEventListener("toggle", () => { S.mine.open[bot.bot_id] = log.open; });
  const state = bot.kind === "connected" ? "a connected bot"
    : bot.checking !== null && bot.checking !== undefined ? `version ${bot.checking} being checked`
    : bot.version ? `version ${bot.version} plays` : "no version accepted";
  return el("li", { class: "mine-bot", "data-bot": bot.bot_id, "data-status": bot.status },
    el("div", { class: "mine-head" },
      botLink(bot.name, bot.bot_id, { class: "link-a mine-name", "data-focus": `${bot.bot_id}:name` }),
      el("span", { class: "chip status-chip", "data-status": bot.status, text: BOT_STATUS[bot.status] || bot.status }),
      el("span", { class: "hint", text: `${rulesLabel(bot.rules || DEFAULT_RULES)} · ${state}` })),
    note ? el("p", { class: `mine-note ${note.kind}`, "data-kind": note.kind, role: "status", text: note.text }) : null,
    !note && latest && latest.check === "refused"
      ? el("p", { class: "mine-note error", "data-kind": "error", text: `Version ${latest.version} was refused: ${latest.reason}` }) : null,
    sending ? el("p", { class: "mine-note checking", text: uploadText(job) }) : null,
    actions, withdrawn ? null : log);
}

function uploadText(job) {
  if (job.state === "uploading" && !job.bytes) return "Reading the file…";
  if (job.state === "uploading") return `Uploading… ${Math.round((100 * job.offset) / job.bytes.length)} %`;
  if (job.state === "submitting") return "Submitting…";
  return "";
}

function renderMine() {
  const box = $("#ladder-mine");
  const show = myPage() && currentView() === "player";
  box.hidden = !show;
  if (!show) return;
  const rules = $("#sf-rules");
  if (rules.options.length !== S.variants.length) {
    const keep = rules.value;
    rules.replaceChildren(...S.variants.map((r) => el("option", { value: rulesSpec(r) }, rulesLabel(r))));
    if (S.variants.some((r) => rulesSpec(r) === keep)) rules.value = keep;
  }
  const job = S.mine.job;
  const fromForm = job && job.rules ? job : null; // a new bot (a new version says so on its bot)
  const busy = job && (job.state === "uploading" || job.state === "submitting");
  $("#sf-submit").disabled = !!busy;
  let status = "", error = "";
  if (fromForm) {
    if (busy) status = uploadText(fromForm);
    else if (fromForm.state === "failed") error = fromForm.error;
    else if (fromForm.botId) {
      const note = S.mine.notes[fromForm.botId];
      if (note && note.kind === "error") error = note.text;
      else if (note) status = note.text;
    }
  } else if (job && job.state === "failed") error = job.error;
  setText($("#sf-status"), status);
  $("#sf-status").dataset.state = fromForm ? fromForm.state : "";
  if (S.mine.formError) error = S.mine.formError;
  setText($("#sf-error"), error);
  keepFocus($("#mine-list"), () => $("#mine-list").replaceChildren(...S.mine.bots.map(mineItem)));
  if (S.mine.focus) {
    S.mine.focus = false;
    $("#sf-file").focus({ preventScroll: true });
    box.scrollIntoView({ block: "start" });
  }
}

async function submitNewBot() {
  S.mine.formError = "";
  const name = $("#sf-name").value.trim();
  const file = $("#sf-file").files[0];
  let problem = programProblem(file);
  if (!problem && !/^[A-Za-z0-9_.-]{1,24}$/.test(name)) problem = "Give the bot a name: 1–24 letters, digits, _ - or .";
  if (problem) {
    S.mine.formError = problem;
    renderMine();
    return;
  }
  const spec = $("#sf-rules").value;
  const rules = S.variants.find((r) => rulesSpec(r) === spec) || DEFAULT_RULES;
  S.mine.formError = (await startSubmission(file, { name, rules })) || "";
  renderMine();
}

function wireLadder() {
  $("#btn-refresh-ladder").addEventListener("click", refreshLadder);
  // "Submit a bot" leads to the form on your own page (the link's route does the navigation)
  $("#ladder-submit-link").addEventListener("click", () => { S.mine.focus = true; });
  $("#ladder-variant").addEventListener("change", () => {
    S.ladder = { rows: [], loaded: false, at: 0, error: "" };
    refreshLadder();
    renderLadder();
  });
  $("#submit-form").addEventListener("submit", (e) => {
    e.preventDefault();
    submitNewBot();
  });
  $("#nv-file").addEventListener("change", async () => {
    const botId = S.mine.versionFor;
    const file = $("#nv-file").files[0];
    if (!botId || !file) return;
    const problem = await startSubmission(file, { botId });
    if (problem) mineNote(botId, problem, "error");
    renderMine();
  });
}

// -- account: password, signing out ------------------------------------------------------------

function renderAccount() {
  setText($("#account-status"), S.secured
    ? `“${S.name}” is secured with a password: sign in with it on any device.`
    : `“${S.name}” is kept only by this browser. Set a password to sign in on other devices, and to keep the name if this browser's data is cleared.`);
  $("#old-password-row").hidden = !S.secured;
  $("#password-username").value = S.name;
  $("#btn-set-password").textContent = S.secured ? "Change password" : "Save password";
  $("#signout-note").hidden = S.secured;
  $("#btn-forget").hidden = !S.secured;
  $("#account-page-link").href = `/player/${encodeURIComponent(S.name)}${location.search}`;
}

function onPasswordSet() {
  S.secured = true;
  for (const id of ["#old-password", "#new-password", "#new-password-2"]) $(id).value = "";
  $("#password-error").textContent = "";
  $("#password-done").hidden = false;
  $("#password-done").textContent = "Password saved. Use it to sign in as this name on any device.";
  renderAccount();
}

function onSignedOut(msg) {
  if (msg.token) storeToken(S.name, msg.token);
  $("#signout-error").textContent = "";
  $("#signout-done").hidden = false;
  $("#signout-done").textContent = "Done: every other browser and program signed in as this name is signed out.";
}

function wireAccount() {
  $("#password-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const fresh = $("#new-password").value;
    const again = $("#new-password-2").value;
    const error = $("#password-error");
    $("#password-done").hidden = true;
    if ([...fresh].length < 8 || [...fresh].length > 128) {
      error.textContent = "A password has 8 to 128 characters.";
      $("#new-password").focus();
      return;
    }
    if (fresh !== again) {
      error.textContent = "The two new passwords are not the same.";
      $("#new-password-2").focus();
      return;
    }
    if (!requireOnline()) {
      error.textContent = "Not connected; try again in a moment.";
      return;
    }
    error.textContent = "";
    const msg = { type: "set_password", password: fresh };
    if (S.secured) msg.old_password = $("#old-password").value;
    send(msg);
  });
  // Two taps, like resigning: the first arms the button for 4 seconds.
  let disarm = null;
  $("#btn-sign-out-all").addEventListener("click", () => {
    const btn = $("#btn-sign-out-all");
    clearTimeout(disarm);
    $("#signout-done").hidden = true;
    if (btn.dataset.armed !== "true") {
      btn.dataset.armed = "true";
      btn.textContent = "Sign out all other devices? Tap again";
      disarm = setTimeout(() => {
        btn.dataset.armed = "false";
        btn.textContent = "Sign out everywhere else";
      }, 4000);
      return;
    }
    btn.dataset.armed = "false";
    btn.textContent = "Sign out everywhere else";
    if (!requireOnline()) {
      $("#signout-error").textContent = "Not connected; try again in a moment.";
      return;
    }
    send({ type: "sign_out_all" });
  });
}

function askChangeName() {
  // Leaving a live match silently would forfeit it a minute later: ask first.
  const live = liveMatch();
  if (!live) {
    signOutHere();
    return;
  }
  $("#ask-text").textContent = `You are playing ${opponentOf(live)}. Changing your name leaves this match: resign it, or keep playing.`;
  $("#ask").showModal();
}

function signOutHere() {
  // The token stays in this browser (the name can come back here) unless the caller forgets it.
  S.manualClose = true;
  S.stopReconnect = true;
  clearTimeout(S.retryTimer);
  S.retryTimer = null;
  if (S.ws) S.ws.close(1000);
  S.ws = null;
  S.m = null;
  S.queued = false;
  S.room = null;
  S.offer = null;
  S.rematch = null;
  S.extra = null;
  S.next = null;
  S.secured = false;
  save(LS.match, null);
  save(LS.name, null);
  setConn("offline");
  banner("");
  if (pathRoute()) history.pushState(null, "", `/${location.search}`);
  S.tab = "play";
  showLogin("");
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
    const password = $("#password-row").hidden ? "" : $("#password-input").value;
    S.password = password || null;
    if (name.toLowerCase() !== (S.name || "").toLowerCase()) {
      S.m = null;
      save(LS.match, null);
    }
    S.loginNote = "";
    S.name = name;
    S.needLogin = false;
    save(LS.name, name);
    const r = pathRoute();
    S.tab = r ? r.tab : "play";
    S.focusAfterWelcome = true; // the form goes away: the focus follows to the next screen
    connect();
    render();
  });
  $("#btn-show-password").addEventListener("click", () => {
    showPasswordField();
    $("#password-input").focus();
  });
  $("#btn-logout").addEventListener("click", askChangeName);
  $("#btn-change-name").addEventListener("click", askChangeName);
  $("#btn-forget").addEventListener("click", () => {
    const name = S.name;
    signOutHere();
    forgetToken(name);
  });
  $("#ask-keep").addEventListener("click", () => $("#ask").close());
  $("#ask-resign").addEventListener("click", () => {
    $("#ask").close();
    const live = liveMatch();
    if (!live) {
      signOutHere();
      return;
    }
    S.afterFinish = { matchId: live.id, then: signOutHere };
    if (send({ type: "resign", match_id: live.id }, { matchId: live.id }) === null) {
      S.afterFinish = null;
      signOutHere();
    }
  });
  $("#me-name").addEventListener("click", () => setTab("account"));
  $("#btn-room-cancel").addEventListener("click", () => {
    if (!requireOnline()) return;
    send({ type: "room_cancel" });
  });
  $("#bot-select").addEventListener("change", renderBotDesc);
  $("#btn-back-to-match").addEventListener("click", () => setTab("match"));
  wireAccount();
  wireRecord();
  wireTourneys();
  wireLadder();
  // Links inside the page (player pages, match replays) change the view without a reload.
  document.addEventListener("click", (e) => {
    const a = e.target.closest ? e.target.closest("a[data-route], a#result-link, a#account-page-link") : null;
    if (!a || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(new URL(a.href).pathname);
  });
  window.addEventListener("popstate", applyRoute);
  window.addEventListener("resize", () => {
    updateScrollHint();
    if (currentView() === "bot") renderBot(); // the chart is drawn at its box's width
    noticeRoom();
  });
  $("#btn-retry").addEventListener("click", () => {
    S.retries = 0;
    S.stopReconnect = false;
    connect();
  });
  for (const b of document.querySelectorAll("#nav .tab")) {
    b.addEventListener("click", () => setTab(b.dataset.tab));
  }
  for (const b of document.querySelectorAll(".btn-analyse")) {
    b.addEventListener("click", () => requestAnalysis(b.dataset.analysis));
  }
  $("#variant-select").addEventListener("change", () => {
    save(LS.variant, $("#variant-select").value);
    renderBotOptions();
  });
  $("#board-variant").addEventListener("change", refreshBoard);
  $("#btn-queue").addEventListener("click", () => {
    if (!requireOnline() || !requireFree()) return;
    lobbyError("");
    send({ type: "queue", pacing: pacing(), rules: chosenRules(), ...practice() });
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
    send({ type: "play_bot", strategy: $("#bot-select").value, pacing: pacing(),
      rules: chosenRules(), ...practice() });
  });
  $("#btn-room-create").addEventListener("click", () => {
    if (!requireOnline() || !requireFree()) return;
    lobbyError("");
    send({ type: "room_create", pacing: pacing(), rules: chosenRules(), ...practice() });
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
    send({ type: "room_join", code }, { code });
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
    send({ type: "challenge", opponent, pacing: pacing(), rules: chosenRules(), ...practice() });
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
      dropOutboxIfEdited();
      showCodeError("");
      renderPad();
    }
  });
  $("#code-input").addEventListener("input", () => {
    dropOutboxIfEdited();
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
  for (const b of ["#btn-stop-watch", "#btn-leave"]) {
    $(b).addEventListener("click", () => {
      leaveMatch();
      focusView();
    });
  }
  $("#btn-next-game").addEventListener("click", () => {
    if (startNextGame(true)) focusView();
  });
  $("#btn-rematch").addEventListener("click", () => {
    const m = S.m;
    if (!m || m.watch || !requireOnline()) return;
    m.rematchAsked = true;
    $("#rematch-note").textContent = "";
    send({ type: "rematch", match_id: m.id }, { matchId: m.id });
    renderMatch();
  });
  $("#toast-yes").addEventListener("click", () => {
    if (S.offer) {
      const offer = S.offer;
      S.offer = null;
      const live = liveMatch();
      if (live) {
        // Resign first (a person plays one match at a time), accept once it has ended.
        S.acceptAfter = { challengeId: offer.challenge_id, matchId: live.id };
        send({ type: "resign", match_id: live.id }, { matchId: live.id });
      } else {
        send({ type: "accept", challenge_id: offer.challenge_id });
      }
    } else if (S.rematch && $("#toast").dataset.kind === "rematch") {
      const wanted = S.rematch.match_id;
      S.rematch = null;
      const ask = () => send({ type: "rematch", match_id: wanted }, { matchId: wanted });
      const live = liveMatch();
      if (live) {
        // one match at a time: resign this one, ask for the rematch once it has ended
        S.afterFinish = { matchId: live.id, then: ask };
        send({ type: "resign", match_id: live.id }, { matchId: live.id });
      } else {
        lobbyError("");
        ask();
      }
    } else if (S.extra) {
      send({ type: "resign", match_id: S.extra.match_id });
      S.extra = null;
    }
    renderToast();
  });
  $("#toast-no").addEventListener("click", () => {
    if (S.offer) {
      send({ type: "decline", challenge_id: S.offer.challenge_id });
      S.offer = null;
    } else if (S.rematch && $("#toast").dataset.kind === "rematch") {
      S.rematch = null;
    } else if (S.extra) {
      $("#toast").hidden = true; // "Later": it comes on screen when this match is left
      noticeRoom();
      return;
    }
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
    // letters of an upper-case alphabet (hex, word MOO) may be typed in either case
    const key = e.key.length === 1 && rules.alphabet.includes(e.key.toUpperCase())
      && rules.alphabet === rules.alphabet.toUpperCase() ? e.key.toUpperCase() : e.key;
    if (key.length === 1 && rules.alphabet.includes(key)) {
      e.preventDefault();
      input.focus();
      typeKey(key);
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
    if (ticks % 4 === 0) tickTourneys();
    if (S.next) tickNext();
    // the list refreshes itself while on screen (a tournament's own page is kept live by watching)
    if (ticks % 40 === 0 && currentView() === "tourneys" && S.welcomed && !document.hidden) {
      refreshTourneys();
    }
    // the ladder's standings and a bot's page too (the protocol has no updates for them)
    if (ticks % 40 === 0 && S.welcomed && !document.hidden) {
      if (currentView() === "ladder") refreshLadder();
      if (currentView() === "bot" && S.bot) requestBot(S.bot.id);
    }
  }, 250);
}

wire();
{
  const r = pathRoute();
  if (r) {
    S.tab = r.tab;
    if (r.tab === "player") S.player = newPlayer(r.name);
    else if (r.tab === "tourney") S.tourney = newTourney(r.id);
    else if (r.tab === "bot") S.bot = newBotPage(r.id);
    else S.record = newRecord(r.id);
  }
}
if (S.name) {
  connect();
  render();
} else {
  showLogin("");
}

// A read-only handle for debugging from the console.
window.moo = { state: S };

// A match we play that stays quiet resumes itself from its last event (docs/web.md): behind a
// cluster, the events meant for this page can be lost while its connection stays up (a node
// died and its matches moved); the server's answer is a no-op when nothing was missed.
const RESYNC_MS = 15000;
setInterval(() => {
  const m = S.m;
  if (!m || m.watch || m.phase === "finished" || !S.welcomed || !S.ws) return;
  if (!m.heardAt) m.heardAt = Date.now();
  if (Date.now() - m.heardAt < RESYNC_MS) return;
  m.heardAt = Date.now();
  send({ type: "resume", match_id: m.id, last_seq: m.lastSeq }, { matchId: m.id, resync: true });
}, 5000);
