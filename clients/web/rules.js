// The rules of MOO as the browser needs them: the same checks and messages as moo/rules.py,
// so an invalid code is explained before it is ever sent, and the fairness hash.

export const DEFAULT_RULES = { game: "moo", length: 4, alphabet: "0123456789", repeats_in_guess: false };

const HEX = "0123456789ABCDEF";

/** Mastermind (docs/protocol.md, "Variants"): repeats everywhere, black/white pegs. */
export function isMastermind(rules) { return !!rules && rules.game === "mastermind"; }

/** Word MOO: an English word of 4-9 letters; bulls and cows, or the POTM's hits and misses.
 * The dictionary stays on the server: a secret that is no word comes back as not_a_word. */
export function isWords(rules) { return !!rules && rules.game === "words"; }

export function isHitsMisses(rules) { return isWords(rules) && rules.scoring === "hits_misses"; }

/** Peg colours for a Mastermind alphabet, by symbol position (red, green, blue, yellow, ...). */
export const PEG_COLOURS = [
  "red", "green", "blue", "yellow", "orange", "purple", "cyan", "white", "black", "pink",
];

export function pegColour(rules, ch) {
  const i = rules.alphabet.indexOf(ch);
  return i >= 0 ? PEG_COLOURS[i % PEG_COLOURS.length] : "";
}

/** The canonical spec of moo/variants.py: "moo:4:0123456789", "mastermind:4:123456". */
export function rulesSpec(rules) {
  const r = rules || DEFAULT_RULES;
  if (isWords(r)) return `words:${r.length}:${r.scoring || "bulls_cows"}`;
  if (isMastermind(r)) return `mastermind:${r.length}:${r.alphabet}`;
  return `moo:${r.length}:${r.alphabet}${r.repeats_in_guess ? ":repeats" : ""}`;
}

/** "MOO 4 of 10", "MOO 4 of hex", "Mastermind 4 of 6", as moo.variants.rules_label. */
export function rulesLabel(rules) {
  const r = rules || DEFAULT_RULES;
  if (isWords(r)) return `Word MOO ${r.length} letters${isHitsMisses(r) ? " (hits and misses)" : ""}`;
  const game = isMastermind(r) ? "Mastermind" : "MOO";
  const size = r.alphabet === HEX ? "hex" : String([...r.alphabet].length);
  const extra = !isMastermind(r) && r.repeats_in_guess ? " (repeats in guesses)" : "";
  return `${game} ${r.length} of ${size}${extra}`;
}

export function isClassic(rules) { return rulesSpec(rules) === rulesSpec(DEFAULT_RULES); }

// Characters Python's str.isprintable() rejects (a plain space is printable).
const NON_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;

function pyRepr(ch) {
  // Python's repr of a one-character string, as moo/rules.py prints it: '\t', '\xa0', '\u2003'.
  if (ch === "'") return "\"'\"";
  if (ch === "\\") return "'\\\\'";
  const escapes = { "\t": "\\t", "\n": "\\n", "\r": "\\r" };
  if (escapes[ch]) return `'${escapes[ch]}'`;
  if (ch !== " " && NON_PRINTABLE.test(ch)) {
    const cp = ch.codePointAt(0);
    const hex = cp.toString(16);
    if (cp < 0x100) return `'\\x${hex.padStart(2, "0")}'`;
    if (cp < 0x10000) return `'\\u${hex.padStart(4, "0")}'`;
    return `'\\U${hex.padStart(8, "0")}'`;
  }
  return `'${ch}'`;
}

function isDigit(ch) { return ch >= "0" && ch <= "9"; }
function isAlpha(ch) { return ch.toLowerCase() !== ch.toUpperCase(); }

export function symbolsText(rules) {
  if (isWords(rules)) return "letters A-Z";
  if (rules.alphabet === HEX && !isMastermind(rules)) return "hex digits 0-F";
  const a = [...rules.alphabet];
  let contiguous = true;
  for (let i = 1; i < a.length; i++) {
    if (a[i].codePointAt(0) - a[i - 1].codePointAt(0) !== 1) contiguous = false;
  }
  const kind = isMastermind(rules) ? (rules.alphabet === "123456" ? "colours" : "symbols")
    : a.every(isDigit) ? "digits" : a.every(isAlpha) ? "letters" : "symbols";
  return contiguous ? `${kind} ${a[0]}-${a[a.length - 1]}` : `symbols ${a.join(", ")}`;
}

function unit(rules) { return symbolsText(rules).split(" ")[0]; }

/**
 * Canonical code or throws {code, message} exactly like moo.rules.Rules._check. Nothing is
 * stripped: a space, tab or no-break space is a symbol outside the alphabet, refused by name.
 */
export function checkCode(rules, text, { secret = false } = {}) {
  if (isMastermind(rules)) return checkMastermind(rules, text);
  if (isWords(rules)) return checkWord(rules, text);
  const distinct = secret || !rules.repeats_in_guess;
  let code = String(text);
  const alpha = rules.alphabet;
  if (alpha === alpha.toUpperCase() && alpha !== alpha.toLowerCase()) code = code.toUpperCase();
  else if (alpha === alpha.toLowerCase() && alpha !== alpha.toUpperCase()) code = code.toLowerCase();
  const chars = [...code];
  const bad = [...new Set(chars.filter((ch) => !alpha.includes(ch)))].sort();
  if (bad.length) {
    const shown = bad.slice(0, 5).map(pyRepr).join(", ");
    throw { code: "unknown_symbol", message: `only ${symbolsText(rules)} (not ${shown})` };
  }
  if (chars.length !== rules.length) {
    throw {
      code: "wrong_length",
      message: `expected ${rules.length} ${unit(rules)}, got ${chars.length}`,
    };
  }
  if (distinct && new Set(chars).size !== chars.length) {
    const repeated = [...new Set(chars.filter((ch) => chars.indexOf(ch) !== chars.lastIndexOf(ch)))].sort();
    throw {
      code: "repeated_symbol",
      message: `${unit(rules)} must be distinct (${repeated.join(", ")} repeated)`,
    };
  }
  return code;
}

/** moo.mastermind.MastermindRules.check_code: repeats allowed, the same messages. */
function checkMastermind(rules, text) {
  let code = String(text);
  const alpha = rules.alphabet;
  if (alpha === alpha.toUpperCase() && alpha !== alpha.toLowerCase()) code = code.toUpperCase();
  const chars = [...code];
  const bad = [...new Set(chars.filter((ch) => !alpha.includes(ch)))].sort();
  if (bad.length) {
    const shown = bad.slice(0, 5).map(pyRepr).join(", ");
    throw { code: "unknown_symbol", message: `only symbols ${alpha} (not ${shown})` };
  }
  if (chars.length !== rules.length) {
    throw { code: "wrong_length", message: `expected ${rules.length} symbols, got ${chars.length}` };
  }
  return code;
}

/** moo.words.WordRules.check_guess: N letters A-Z in either case, the same messages. Whether
 * a secret is a dictionary word only the server knows (not_a_word). */
function checkWord(rules, text) {
  const code = String(text).toUpperCase();
  const chars = [...code];
  const bad = [...new Set(chars.filter((ch) => ch < "A" || ch > "Z" || ch.length !== 1))].sort();
  if (bad.length) {
    const shown = bad.slice(0, 5).map(pyRepr).join(", ");
    throw { code: "unknown_symbol", message: `only letters A-Z (not ${shown})` };
  }
  if (chars.length !== rules.length) {
    throw { code: "wrong_length", message: `expected ${rules.length} letters, got ${chars.length}` };
  }
  return code;
}

/** The answer as its game names it: Tanaka's 2B1C for bulls and cows (MOO, word MOO), 2H3M
 * for hits and misses (the POTM). */
export function formatAnswer(rules, bulls, cows) {
  if (isHitsMisses(rules)) return `${bulls}H${cows}M`;
  return formatResponse(bulls, cows);
}

/** "2 hits, 3 misses", "1 bull, 2 cows", "1 black, 0 white": for screen readers and titles. */
export function answerWords(rules, bulls, cows) {
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  if (isMastermind(rules)) return `${bulls} black, ${cows} white`;
  if (isHitsMisses(rules)) return `${plural(bulls, "hit", "hits")}, ${plural(cows, "miss", "misses")}`;
  return `${plural(bulls, "bull", "bulls")}, ${plural(cows, "cow", "cows")}`;
}

/** Tanaka's notation, as moo.rules.format_response: 4B, 2B1C, 3C, 0C. */
export function formatResponse(bulls, cows) {
  if (bulls && cows) return `${bulls}B${cows}C`;
  if (bulls) return `${bulls}B`;
  return `${cows}C`;
}

export function randomSecret(rules) {
  const pool = [...rules.alphabet];
  const out = [];
  const rnd = new Uint32Array(rules.length);
  crypto.getRandomValues(rnd);
  for (let i = 0; i < rules.length; i++) {
    // Mastermind secrets may repeat a colour: draw with replacement
    if (isMastermind(rules)) out.push(pool[rnd[i] % pool.length]);
    else out.push(pool.splice(rnd[i] % pool.length, 1)[0]);
  }
  return out.join("");
}

// -- SHA-256 -------------------------------------------------------------------------------
// crypto.subtle exists only in secure contexts (https, localhost); a server reached over plain
// http elsewhere still gets a verified fairness check from this small implementation.

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

export function sha256Fallback(bytes) {
  const bitLen = bytes.length * 8;
  const padded = new Uint8Array(((bytes.length + 9 + 63) >> 6) << 6);
  padded.set(bytes);
  padded[bytes.length] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 8, Math.floor(bitLen / 2 ** 32));
  view.setUint32(padded.length - 4, bitLen >>> 0);
  const h = new Uint32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  const w = new Uint32Array(64);
  const rotr = (x, n) => (x >>> n) | (x << (32 - n));
  for (let off = 0; off < padded.length; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(off + i * 4);
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
      const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) >>> 0;
    }
    let [a, b, c, d, e, f, g, hh] = h;
    for (let i = 0; i < 64; i++) {
      const S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      const ch = (e & f) ^ (~e & g);
      const t1 = (hh + S1 + ch + K[i] + w[i]) >>> 0;
      const S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      const maj = (a & b) ^ (a & c) ^ (b & c);
      const t2 = (S0 + maj) >>> 0;
      hh = g; g = f; f = e; e = (d + t1) >>> 0;
      d = c; c = b; b = a; a = (t1 + t2) >>> 0;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
  const out = new Uint8Array(32);
  const ov = new DataView(out.buffer);
  h.forEach((x, i) => ov.setUint32(i * 4, x));
  return out;
}

function toHex(bytes) {
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Hex SHA-256 of a UTF-8 string: crypto.subtle when available, else the fallback above. */
export async function sha256Hex(text) {
  const data = new TextEncoder().encode(text);
  if (globalThis.crypto && crypto.subtle) {
    return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", data)));
  }
  return toHex(sha256Fallback(data));
}

/** The commitment formula of moo/commitment.py: hex(SHA-256(salt + secret)). */
export function commitment(secret, salt) {
  return sha256Hex(salt + secret);
}

// -- the practice assistant (bots/judge/assistant.py's count; a suggestion only when provably best)

/** Bulls and cows (MOO's per-position 1971 rule) or black and white pegs (Mastermind). */
export function scoreCode(rules, secret, guess) {
  const s = [...secret];
  const g = [...guess];
  let bulls = 0;
  for (let i = 0; i < g.length; i++) if (s[i] === g[i]) bulls++;
  if (!isMastermind(rules)) {
    let cows = 0;
    for (let i = 0; i < g.length; i++) if (s[i] !== g[i] && s.includes(g[i])) cows++;
    return [bulls, cows];
  }
  const counts = new Map();
  for (const ch of s) counts.set(ch, (counts.get(ch) || 0) + 1);
  let common = 0;
  for (const ch of g) {
    const left = counts.get(ch) || 0;
    if (left) { counts.set(ch, left - 1); common++; }
  }
  return [bulls, common - bulls];
}

/** Every secret in the order of moo/rules.py (permutations) or moo/mastermind.py (product). */
export function allCodes(rules) {
  const a = [...rules.alphabet];
  const out = [];
  const walk = (prefix, used) => {
    if (prefix.length === rules.length) { out.push(prefix.join("")); return; }
    for (const ch of a) {
      if (!isMastermind(rules) && used.has(ch)) continue;
      prefix.push(ch); used.add(ch);
      walk(prefix, used);
      prefix.pop();
      if (!prefix.includes(ch)) used.delete(ch);
    }
  };
  walk([], new Set());
  return out;
}

/** Whether `guess` sends every code of `left` to an answer of its own. */
function splitsAll(rules, left, guess) {
  const seen = new Set();
  for (const code of left) {
    const key = scoreCode(rules, code, guess).join(",");
    if (seen.has(key)) return false;
    seen.add(key);
  }
  return true;
}

/** Codes x guesses scored at most when looking for a non-member that splits everything. */
export const SCAN_LIMIT = 200000;

/**
 * {left, suggestion, first} after turns [[guess, bulls, cows], ...]: the codes still possible
 * and a guess only when it is provably optimal, so that the post-match analysis rates it best
 * (loss 0; docs/variants.md, "The practice assistant"): any first guess of distinct-symbol MOO
 * (all are the same up to relabelling), one of at most two codes, a possible code that gives
 * every other possible code an answer of its own (2n - 1 guesses in all, the least there is),
 * or, failing one, any code that does that (2n, the least without one). Otherwise
 * suggestion is null: moo play --assist, which has the exact values, suggests one everywhere.
 */
export function assist(rules, turns) {
  const all = allCodes(rules);
  let left = all;
  for (const [guess, b, c] of turns) {
    left = left.filter((code) => {
      const [bb, cc] = scoreCode(rules, code, guess);
      return bb === b && cc === c;
    });
  }
  const first = turns.length === 0;
  if (!left.length) return { left: 0, suggestion: null, first };
  if (left.length <= 2) return { left: left.length, suggestion: left[0], first };
  if (first && !isMastermind(rules) && !rules.repeats_in_guess) {
    return { left: left.length, suggestion: left[0], first };
  }
  if (left.length <= 60) {
    const member = left.find((g) => splitsAll(rules, left, g));
    if (member) return { left: left.length, suggestion: member, first };
    if (all.length * left.length <= SCAN_LIMIT) {
      const other = all.find((g) => splitsAll(rules, left, g));
      if (other) return { left: left.length, suggestion: other, first };
    }
  }
  return { left: left.length, suggestion: null, first };
}
