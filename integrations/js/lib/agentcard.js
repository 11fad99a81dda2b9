// An AgentCard verifier written from A2A 1.0 section 8.4 alone, and the
// RFCs it builds on (RFC 7515, RFC 7797, RFC 8785, RFC 7638), with node's
// crypto only: independent of the Go package agentcard, and held to every
// vector of testdata/agentcard (test/agentcard.test.js). sdkVerify runs
// @a2a-js/sdk's own verifier with the keys a trust file binds to an agent.
import { createHash, createPublicKey, verify as cryptoVerify } from 'node:crypto';
import { verifyAgentCardSignature } from '@a2a-js/sdk';

const defaultMaxSize = 256 << 10;

class Refusal extends Error {
  constructor(cls, msg) {
    super(`${cls}: ${msg}`);
    this.cls = cls;
  }
}
const malformed = (msg) => new Refusal('malformed', msg);

// ---- Strict JSON: RFC 8259 text in UTF-8, read as I-JSON (RFC 7493):
// unique member names once unescaped, no lone surrogate, numbers within
// the IEEE 754 double range. RFC 8785 section 3.1 canonicalizes I-JSON
// only. JSON.parse keeps the last of two members and reads "\ud800", so
// the text is checked first by this scanner.

function strictParse(bytes) {
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw malformed('not UTF-8');
  }
  let i = 0;
  const ws = () => { while (i < text.length && ' \t\n\r'.includes(text[i])) i++; };
  const fail = (what) => { throw malformed(`JSON: ${what} at ${i}`); };
  const str = () => {
    if (text[i] !== '"') fail('string expected');
    const start = i++;
    for (;;) {
      if (i >= text.length) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) break;
      if (c < 0x20) fail('control character in string');
      if (c === 0x5c) {
        i++;
        if ('"\\/bfnrt'.includes(text[i])) { i++; continue; }
        if (text[i] !== 'u' || !/^[0-9a-fA-F]{4}$/.test(text.slice(i + 1, i + 5))) fail('bad escape');
        i += 5;
        continue;
      }
      i++;
    }
    i++;
    const s = JSON.parse(text.slice(start, i));
    if (!s.isWellFormed()) fail('lone surrogate');
    return s;
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const names = new Set();
      ws();
      if (text[i] === '}') { i++; return; }
      for (;;) {
        ws();
        const name = str();
        if (names.has(name)) fail(`duplicate member name ${JSON.stringify(name)}`);
        names.add(name);
        ws();
        if (text[i++] !== ':') fail('":" expected');
        value();
        ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === '}') { i++; return; }
        fail('"," or "}" expected');
      }
    }
    if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') { i++; return; }
      for (;;) {
        value();
        ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === ']') { i++; return; }
        fail('"," or "]" expected');
      }
    }
    if (c === '"') { str(); return; }
    const m = /^(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?|true|false|null)/.exec(text.slice(i));
    if (!m) fail('value expected');
    if (/^[-0-9]/.test(m[0]) && !Number.isFinite(Number(m[0]))) fail(`number ${m[0]} beyond the double range`);
    i += m[0].length;
  };
  value();
  ws();
  if (i !== text.length) fail('trailing text');
  return JSON.parse(text);
}

// ---- RFC 8785: members sorted by UTF-16 code units (what the default
// sort of JavaScript strings compares), strings and numbers as ECMAScript
// serializes them, no whitespace.
function jcs(v) {
  if (Array.isArray(v)) return `[${v.map(jcs).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${jcs(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

// The reading of @a2a-js/sdk (and of the vectors' allow_dropped_empty):
// null, "", [] and {} dropped, innermost first.
function dropEmpty(v) {
  if (v === null || v === '') return undefined;
  if (Array.isArray(v)) {
    const out = v.map(dropEmpty).filter((e) => e !== undefined);
    return out.length ? out : undefined;
  }
  if (typeof v === 'object') {
    const out = {};
    for (const [k, e] of Object.entries(v)) {
      const d = dropEmpty(e);
      if (d !== undefined) out[k] = d;
    }
    return Object.keys(out).length ? out : undefined;
  }
  return v;
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// Canonical base64url without padding (RFC 7515 section 2).
function b64u(s, what) {
  if (typeof s !== 'string' || !/^[A-Za-z0-9_-]+$/.test(s) || Buffer.from(s, 'base64url').toString('base64url') !== s) {
    throw malformed(`${what} is not canonical base64url`);
  }
  return Buffer.from(s, 'base64url');
}

// ---- Trust: each AgentID -> JWK Set; each key pinned to its alg (a P-256
// key without alg is ES256), named by its kid or its RFC 7638 thumbprint.
export function thumbprint(jwk) {
  const members = jwk.kty === 'EC' ? { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y } : { crv: jwk.crv, kty: jwk.kty, x: jwk.x };
  return createHash('sha256').update(jcs(members)).digest('base64url');
}

function trustedKeys(trust, agent) {
  return (trust[agent]?.keys ?? []).map((jwk) => ({
    alg: jwk.alg ?? 'ES256',
    kid: jwk.kid ?? thumbprint(jwk),
    thumb: thumbprint(jwk),
    key: createPublicKey({ key: jwk, format: 'jwk' }),
  }));
}

function verifies(alg, key, input, sig) {
  try {
    if (alg === 'EdDSA') return cryptoVerify(null, input, key, sig);
    const hash = { ES256: 'sha256', ES384: 'sha384' }[alg];
    return cryptoVerify(hash, input, { key, dsaEncoding: 'ieee-p1363' }, sig);
  } catch {
    return false;
  }
}

// ---- Section 8.4: a signature is a JWS JSON object with "protected",
// "signature" and an optional "header", over the detached payload, the
// JCS form of the card without "signatures". The protected header holds
// alg, kid and typ. Only keys the trust configuration binds to the agent
// the caller names are used; the kid only says which to try first.
function checkSignature(el, payloads, keys, agent) {
  const out = { alg: '', kid: '' };
  if (!isObject(el)) throw malformed('not a JWS object');
  if (el.protected === undefined || el.signature === undefined) throw malformed('protected and signature are required');
  const hb = b64u(el.protected, 'protected');
  const sig = b64u(el.signature, 'signature');
  const prot = strictParse(hb);
  if (!isObject(prot)) throw malformed('protected header is not an object');
  for (const m of ['alg', 'kid', 'typ']) {
    if (typeof prot[m] !== 'string') throw malformed(`protected header: ${m} missing or not a string`);
  }
  out.alg = prot.alg;
  out.kid = prot.kid;
  if ('header' in el) {
    if (!isObject(el.header)) throw malformed('header is not an object');
    for (const name of Object.keys(el.header)) {
      if (name in prot) throw malformed(`${name} in both headers`);
      if (name === 'crit' || name === 'b64') throw malformed(`${name} must be protected`);
    }
  }
  if ('crit' in prot) {
    const crit = prot.crit;
    if (!Array.isArray(crit) || crit.length === 0 || crit.some((n) => typeof n !== 'string')) throw malformed('crit');
    for (const n of crit) {
      if (n !== 'b64') throw malformed(`crit names ${n}, not understood`);
      if (!(n in prot)) throw malformed(`crit names ${n}, absent`);
    }
  }
  let b64 = true;
  if ('b64' in prot) {
    if (typeof prot.b64 !== 'boolean') throw malformed('b64 is not a boolean');
    if (!(prot.crit ?? []).includes('b64')) throw malformed('b64 without crit');
    b64 = prot.b64;
  }
  if (keys.length === 0) throw new Refusal('untrusted-key', `no key bound to ${agent}`);
  const names = (k) => prot.kid !== '' && (prot.kid === k.kid || prot.kid === k.thumb);
  const named = keys.some(names);
  const pinned = [...keys.filter((k) => k.alg === prot.alg && names(k)), ...keys.filter((k) => k.alg === prot.alg && !names(k))];
  if (pinned.length === 0) throw new Refusal('untrusted-key', `no key of ${agent} pinned to ${prot.alg}`);
  for (const [i, payload] of payloads.entries()) {
    const input = Buffer.concat([Buffer.from(`${el.protected}.`), b64 ? Buffer.from(payload.toString('base64url')) : payload]);
    const k = pinned.find((k) => verifies(prot.alg, k.key, input, sig));
    if (k) return { ...out, key: k.kid, dropped_empty: i === 1 };
  }
  throw new Refusal(prot.kid !== '' && !named ? 'untrusted-key' : 'bad-signature', 'no trusted key verifies the signature');
}

export function verifyCard(bytes, trust, agent, opts) {
  if (bytes.length > (opts.max_size || defaultMaxSize)) return { verified: false, error: 'too-large', signatures: [] };
  let card;
  try {
    card = strictParse(bytes);
    if (!isObject(card)) throw malformed('not an object');
    if (card.signatures !== undefined && card.signatures !== null && !Array.isArray(card.signatures)) throw malformed('signatures');
  } catch (e) {
    if (e instanceof Refusal) return { verified: false, error: e.cls, signatures: [] };
    throw e;
  }
  const sigs = card.signatures ?? [];
  if (sigs.length === 0) return { verified: false, error: 'unsigned', signatures: [] };
  const rest = { ...card };
  delete rest.signatures;
  const payload = jcs(rest);
  const payloads = [Buffer.from(payload)];
  if (opts.allow_dropped_empty) payloads.push(Buffer.from(jcs(dropEmpty(rest) ?? {})));
  const keys = trustedKeys(trust, agent);
  const results = sigs.map((el, index) => {
    try {
      const r = checkSignature(el, payloads, keys, agent);
      return { index, verified: true, key: r.key, ...(r.dropped_empty ? { dropped_empty: true } : {}) };
    } catch (e) {
      if (!(e instanceof Refusal)) throw e;
      return { index, verified: false, error: e.cls };
    }
  });
  const verified = results.some((r) => r.verified);
  return { verified, error: verified ? '' : 'unverified', payload, signatures: results };
}

// sdkVerify runs the SDK's verifier on card, given the key the trust
// configuration binds to the agent under the kid a signature names (its
// retrievePublicKey(kid)). The SDK logs each failed signature with
// console.debug, which is kept quiet meanwhile.
export async function sdkVerify(trust, agent, card) {
  const keys = trust[agent]?.keys ?? [];
  const verifier = verifyAgentCardSignature(async (kid) => {
    const jwk = keys.find((k) => k.kid === kid || thumbprint(k) === kid);
    if (!jwk) throw new Error(`no key named ${kid}`);
    return createPublicKey({ key: jwk, format: 'jwk' });
  });
  const debug = console.debug;
  console.debug = () => {};
  try {
    await verifier(card);
  } finally {
    console.debug = debug;
  }
}
