// Signed AgentCards (A2A 1.0, section 8.4) checked across implementations:
//   - an independent verifier (lib/agentcard.js), written from section
//     8.4 and the RFCs it builds on (RFC 7515, RFC 7797, RFC 8785, RFC
//     7638) with node's crypto only, reaches the outcome of every vector of
//     testdata/agentcard, which the Go package agentcard is held to too;
//   - @a2a-js/sdk's verifyAgentCardSignature answers what each vector says
//     it answers (sdk_verifies), where the SDK's reading of section 8.4.1
//     and this project's differ or agree;
//   - cards the SDK signs verify with `handoff card verify`, and cards
//     `handoff card sign` signs verify with the SDK.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { generateAgentCardSignature } from '@a2a-js/sdk';

import { sdkVerify, thumbprint, verifyCard } from '../lib/agentcard.js';

const vectorDir = new URL('../../../testdata/agentcard/', import.meta.url);
const vectors = readdirSync(vectorDir).filter((f) => f.endsWith('.json')).sort()
  .map((f) => ({ file: f, v: JSON.parse(readFileSync(new URL(f, vectorDir), 'utf8')) }));

test('the vectors are there', () => {
  assert.ok(vectors.length >= 50, `${vectors.length} vectors`);
});

for (const { file, v } of vectors) {
  test(`independent verifier: ${file}`, () => {
    const bytes = Buffer.from(v.card_b64, 'base64url');
    if (v.card_text !== undefined) assert.equal(bytes.toString('utf8'), v.card_text);
    const got = verifyCard(bytes, v.trust, v.agent, v.options);
    const want = v.expected;
    assert.equal(got.error, want.error, v.description);
    assert.equal(got.verified, want.verified);
    if (want.payload !== undefined) assert.equal(got.payload, want.payload);
    assert.deepEqual(got.signatures, want.signatures.map((s) => ({ ...s })));
  });
}

for (const { file, v } of vectors.filter(({ v }) => v.sdk_verifies !== undefined)) {
  test(`@a2a-js/sdk verifyAgentCardSignature: ${file} ${v.sdk_verifies ? 'verifies' : 'does not verify'}`, async () => {
    const run = sdkVerify(v.trust, v.agent, JSON.parse(v.card_text));
    if (v.sdk_verifies) await run;
    else await assert.rejects(run);
  });
}

// ---- Cards across implementations, through the handoff CLI.

function bin() {
  const b = process.env.HANDOFF_BIN;
  if (!b) throw new Error('HANDOFF_BIN is not set: run the tests with .ci/js.sh');
  return b;
}

const work = mkdtempSync(join(tmpdir(), 'handoff-card-'));
const agent = 'spiffe://j.example/agent/js-card';

const card = {
  name: 'JS agent', description: 'Answers questions.', version: '2.1.0',
  supportedInterfaces: [{ url: 'https://j.example/a2a', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
  capabilities: { streaming: true, extensions: [{ uri: 'https://quantumlearningmachines.com/a2a/ext/agent-handoff/v1', required: true }] },
  defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
  skills: [{ id: 'ask', name: 'Ask', description: 'Answers a question.', tags: ['qa'] }],
};

function keyFor(type, options) {
  const { privateKey, publicKey } = generateKeyPairSync(type, options);
  const jwk = publicKey.export({ format: 'jwk' });
  const alg = type === 'ed25519' ? 'EdDSA' : 'ES256';
  return { privateKey, publicKey, alg, jwk: { ...jwk, alg, kid: thumbprint(jwk) } };
}

function writeTrust(jwk) {
  const file = join(work, `trust-${jwk.kid}.json`);
  writeFileSync(file, JSON.stringify({ [agent]: { keys: [jwk] } }));
  return file;
}

function cardVerify(trustFile, signed, ...flags) {
  const file = join(work, `card-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, signed);
  const r = spawnSync(bin(), ['card', 'verify', '--trust', trustFile, '--agent', agent, ...flags, file], { encoding: 'utf8' });
  if (r.status === 2) throw new Error(`handoff card verify: ${r.stderr}`);
  return { code: r.status, answer: JSON.parse(r.stdout) };
}

for (const [type, options] of [['ec', { namedCurve: 'P-256' }], ['ed25519', undefined]]) {
  test(`a card @a2a-js/sdk signs with an ${type} key verifies with \`handoff card verify\``, async () => {
    const k = keyFor(type, options);
    const signed = await generateAgentCardSignature(k.privateKey, { alg: k.alg, kid: 'js-key-1', typ: 'JOSE' })(card);
    const { code, answer } = cardVerify(writeTrust(k.jwk), JSON.stringify(signed));
    assert.equal(code, 0, JSON.stringify(answer));
    assert.equal(answer.verified, true);
    assert.equal(answer.signatures[0].key, k.jwk.kid);
    // and with the independent verifier
    const mine = verifyCard(Buffer.from(JSON.stringify(signed)), { [agent]: { keys: [k.jwk] } }, agent, {});
    assert.equal(mine.verified, true);
  });
}

test('a card @a2a-js/sdk signs with an empty member verifies with `handoff card verify` only under --allow-dropped-empty', async () => {
  const k = keyFor('ec', { namedCurve: 'P-256' });
  const withEmpty = { ...card, iconUrl: '', securitySchemes: {} };
  const signed = JSON.stringify(await generateAgentCardSignature(k.privateKey, { alg: 'ES256', kid: k.jwk.kid, typ: 'JOSE' })(withEmpty));
  const trust = writeTrust(k.jwk);
  const strict = cardVerify(trust, signed);
  assert.equal(strict.code, 1, JSON.stringify(strict.answer));
  assert.equal(strict.answer.signatures[0].error, 'bad-signature');
  const loose = cardVerify(trust, signed, '--allow-dropped-empty');
  assert.equal(loose.code, 0, JSON.stringify(loose.answer));
  assert.equal(loose.answer.signatures[0].dropped_empty, true);
});

test('a card signed by another key than the agent\'s does not verify with `handoff card verify`', async () => {
  const k = keyFor('ec', { namedCurve: 'P-256' });
  const other = keyFor('ec', { namedCurve: 'P-256' });
  const signed = await generateAgentCardSignature(other.privateKey, { alg: 'ES256', kid: other.jwk.kid, typ: 'JOSE' })(card);
  const { code, answer } = cardVerify(writeTrust(k.jwk), JSON.stringify(signed));
  assert.equal(code, 1);
  assert.equal(answer.verified, false);
  assert.equal(answer.signatures[0].error, 'untrusted-key');
});

test('a card `handoff card sign` signs verifies with @a2a-js/sdk and with the independent verifier', async () => {
  const keyFile = join(work, 'agent.jwk');
  const gen = spawnSync(bin(), ['keygen', '--out', keyFile, '--force'], { encoding: 'utf8' });
  assert.equal(gen.status, 0, gen.stderr);
  const jwk = JSON.parse(gen.stdout);
  const cardFile = join(work, 'card.json');
  writeFileSync(cardFile, JSON.stringify(card, null, 2));
  const r = spawnSync(bin(), ['card', 'sign', '--key', keyFile, cardFile], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const signed = JSON.parse(r.stdout);
  await sdkVerify({ [agent]: { keys: [jwk] } }, agent, signed);
  const mine = verifyCard(Buffer.from(r.stdout), { [agent]: { keys: [jwk] } }, agent, {});
  assert.equal(mine.verified, true, JSON.stringify(mine));
  assert.equal(mine.signatures[0].key, jwk.kid);
  // altered after signing: neither verifies
  const altered = { ...signed, description: 'Deletes files.' };
  await assert.rejects(sdkVerify({ [agent]: { keys: [jwk] } }, agent, altered));
  assert.equal(verifyCard(Buffer.from(JSON.stringify(altered)), { [agent]: { keys: [jwk] } }, agent, {}).verified, false);
});
