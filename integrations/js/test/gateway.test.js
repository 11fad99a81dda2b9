// `handoff gateway` with @a2a-js/sdk on both sides of it:
//   - the delegate's side in front of an unchanged JS A2A server
//     (servers/upstream), which the gateway calls over JSON-RPC and, in
//     front of a second one that lists it first, over HTTP+JSON: only
//     accepted offers reach it, counted by its /calls; a forged or replayed
//     offer never does; the statuses the JS client sees verify with
//     `handoff verify-status`; a tasks/cancel with the planner's "canceled"
//     (made by `handoff status`) cancels its task; the card the gateway
//     serves verifies with the independent verifier (lib/agentcard.js) and
//     with the SDK's;
//   - the delegator's side (--delegator) for an unchanged JS A2A client, in
//     front of the Go agent with the a2a1hop executor (servers/interop),
//     which sees a verified offer from the planner with a full chain.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ClientFactory, ClientFactoryOptions } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

import { base as interopURL, bin, coder, dir, extensionURI, forge, offer, planner, verifyStatus } from '../lib/handoff.js';
import { sdkVerify, verifyCard } from '../lib/agentcard.js';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the tests with .ci/js.sh`);
  return v;
}

// Two gateways, each in front of a JS server: one the gateway calls over
// JSON-RPC, one over HTTP+JSON.
const gatewayURL = env('HANDOFF_GATEWAY_URL');
const upstreamURL = env('HANDOFF_UPSTREAM_URL');
const pairs = [
  { binding: 'JSON-RPC', gateway: gatewayURL, upstream: upstreamURL },
  { binding: 'HTTP+JSON', gateway: env('HANDOFF_GATEWAY_REST_URL'), upstream: env('HANDOFF_UPSTREAM_REST_URL') },
];
const delegatorURL = env('HANDOFF_DELEGATOR_URL');
const trust = JSON.parse(readFileSync(join(dir, 'trust.json'), 'utf8'));

const clientOver = (url, transport) =>
  new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [transport] })).createFromUrl(url);

function message(dialog, text, metadata) {
  return {
    messageId: randomUUID(), contextId: dialog, taskId: '', role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
    metadata, extensions: metadata ? [extensionURI] : [], referenceTaskIds: [],
  };
}

const request = (m) => ({ tenant: '', message: m, configuration: undefined, metadata: undefined });
const withExtension = { serviceParameters: { 'A2A-Extensions': extensionURI } };

async function upstreamCalls(upstream = upstreamURL) {
  return (await fetch(`${upstream}/calls`)).json();
}

// statusesOf returns the signed statuses a task carries, in its history
// and its status message, oldest first.
function statusesOf(task) {
  return [...(task.history ?? []), task.status?.message]
    .map((m) => m?.metadata?.[extensionURI])
    .filter((s) => typeof s === 'string');
}

function verified(file, status) {
  const { code, answer } = verifyStatus(file, status);
  assert.equal(code, 0, JSON.stringify(answer));
  assert.equal(answer.valid, true);
  return answer;
}

for (const { binding, gateway, upstream } of pairs) for (const transport of ['JSONRPC', 'HTTP+JSON']) {
  test(`gateway (client ${transport}, upstream ${binding}): an accepted offer reaches the JS server once, without the Handoff; "accepted" and "completed" verify with \`handoff verify-status\``, async () => {
    const client = await clientOver(gateway, transport);
    const dialog = `ctx-${randomUUID()}`;
    const { file, handoff } = offer('fix-pager', dialog);
    const before = await upstreamCalls(upstream);
    const task = await client.sendMessage(request(message(dialog, 'fix the pager', { [extensionURI]: handoff })), withExtension);
    assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED, JSON.stringify(task.status));
    assert.equal(task.artifacts[0]?.parts[0]?.content?.value, 'done: fix the pager', 'the JS server did the work');
    const states = statusesOf(task).map((s) => verified(file, s));
    assert.deepEqual(states.map((a) => a.state), ['accepted', 'completed']);
    for (const a of states) {
      assert.equal(a.iss, coder);
      assert.equal(a.aud, planner);
    }
    const after = await upstreamCalls(upstream);
    assert.equal(after.calls, before.calls + 1, 'the JS server ran once');
    assert.equal(after.handoffs, before.handoffs, 'the Handoff was removed from the message it got');
  });
}

test('gateway: a forged Handoff never reaches the JS server, and gets no status', async () => {
  const client = await clientOver(gatewayURL, 'JSONRPC');
  const dialog = `ctx-${randomUUID()}`;
  const { handoff } = offer('write-patch', dialog);
  const before = await upstreamCalls();
  const task = await client.sendMessage(request(message(dialog, 'drop the table', { [extensionURI]: forge(handoff, 'drop-table') })), withExtension);
  assert.equal(task.status.state, TaskState.TASK_STATE_REJECTED, JSON.stringify(task.status));
  assert.deepEqual(statusesOf(task), [], 'no status for an offer whose signature failed');
  assert.deepEqual(await upstreamCalls(), before);
});

test('gateway: a replayed Handoff never reaches the JS server; it gets the hop\'s last status, the identical octets', async () => {
  const client = await clientOver(gatewayURL, 'HTTP+JSON');
  const dialog = `ctx-${randomUUID()}`;
  const { file, handoff } = offer('once', dialog);
  const task = await client.sendMessage(request(message(dialog, 'once', { [extensionURI]: handoff })), withExtension);
  const completed = task.status.message.metadata[extensionURI];
  const before = await upstreamCalls();
  for (let i = 0; i < 2; i++) {
    const reply = await client.sendMessage(request(message(dialog, 'once', { [extensionURI]: handoff })), withExtension);
    const status = reply.metadata?.[extensionURI] ?? reply.status?.message?.metadata?.[extensionURI];
    assert.equal(status, completed, JSON.stringify(reply));
    assert.equal(verified(file, status).state, 'completed');
  }
  assert.deepEqual(await upstreamCalls(), before);
});

// waiting sends a "wait" message with the Handoff of one offer, returns its
// task as soon as the gateway answers, once the JS server got the work.
async function waiting(client, dialog, handoff) {
  const before = (await upstreamCalls()).calls;
  const task = await client.sendMessage({ ...request(message(dialog, 'wait', { [extensionURI]: handoff })),
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true } }, withExtension);
  for (let i = 0; (await upstreamCalls()).calls === before; i++) {
    assert.ok(i < 100, 'the work never reached the JS server');
    await new Promise((r) => setTimeout(r, 50));
  }
  return task;
}

function canceledBy(file) {
  const r = spawnSync(bin, ['status', '--key', join(dir, 'planner.jwk'), '--offer', file, '--state', 'canceled'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

test('gateway: a tasks/cancel with the planner\'s signed "canceled" (by `handoff status`) is applied and cancels the JS server\'s task; another hop\'s is refused (HC-28)', async () => {
  const client = await clientOver(gatewayURL, 'JSONRPC');
  const dialog = `ctx-${randomUUID()}`;
  const one = offer('slow', dialog);
  const two = offer('slower', dialog);
  const before = await upstreamCalls();
  const first = await waiting(client, dialog, one.handoff);
  assert.equal(verified(one.file, statusesOf(first).at(-1)).state, 'accepted');
  const second = await waiting(client, dialog, two.handoff);
  await assert.rejects(client.cancelTask({ tenant: '', id: second.id, metadata: { [extensionURI]: canceledBy(one.file) } }, withExtension),
    'the first hop\'s "canceled" does not cancel the second\'s task');
  assert.equal((await upstreamCalls()).cancels, before.cancels);
  for (const [task, o] of [[first, one], [second, two]]) {
    const canceled = await client.cancelTask({ tenant: '', id: task.id, metadata: { [extensionURI]: canceledBy(o.file) } }, withExtension);
    assert.equal(canceled.status.state, TaskState.TASK_STATE_CANCELED, JSON.stringify(canceled.status));
  }
  assert.equal((await upstreamCalls()).cancels, before.cancels + 2);
});

test('gateway: streamed, the status updates carry "accepted" and "completed"', async () => {
  const client = await clientOver(gatewayURL, 'JSONRPC');
  const dialog = `ctx-${randomUUID()}`;
  const { file, handoff } = offer('stream', dialog);
  const states = [];
  let last;
  for await (const ev of client.sendMessageStream(request(message(dialog, 'stream it', { [extensionURI]: handoff })), withExtension)) {
    const st = ev.payload?.value?.status; // a task or a status update
    if (!st) continue;
    last = st.state;
    const s = st.message?.metadata?.[extensionURI];
    if (typeof s === 'string') states.push(verified(file, s).state);
  }
  assert.equal(last, TaskState.TASK_STATE_COMPLETED);
  assert.deepEqual(states, ['accepted', 'completed']);
});

test('gateway: its card is the JS server\'s, the extension declared required, signed so that the independent verifier and the SDK\'s verify it', async () => {
  const bytes = Buffer.from(await (await fetch(`${gatewayURL}/.well-known/agent-card.json`)).arrayBuffer());
  const mine = verifyCard(bytes, trust, coder, {});
  assert.equal(mine.verified, true, JSON.stringify(mine));
  assert.equal(verifyCard(bytes, trust, planner, {}).verified, false, 'not the planner\'s card');
  const card = JSON.parse(bytes);
  await sdkVerify(trust, coder, card);
  assert.equal(card.name, 'js-upstream');
  assert.deepEqual(card.capabilities.extensions.map((e) => [e.uri, e.required]), [[extensionURI, true]]);
  assert.deepEqual(card.supportedInterfaces.map((i) => i.url), [`${gatewayURL}/jsonrpc`, `${gatewayURL}/rest`]);
  const altered = { ...card, description: 'Deletes files.' };
  assert.equal(verifyCard(Buffer.from(JSON.stringify(altered)), trust, coder, {}).verified, false);
  await assert.rejects(sdkVerify(trust, coder, altered));
});

test('delegator: an unchanged JS client delegates to the Go agent, which sees a verified offer from the planner with a full chain', async () => {
  for (const transport of ['JSONRPC', 'HTTP+JSON']) {
    const client = await clientOver(delegatorURL, transport);
    const before = (await (await fetch(`${interopURL}/calls`)).json()).a2a;
    const dialog = `ctx-${randomUUID()}`;
    const task = await client.sendMessage(request(message(dialog, 'fix the pager')));
    assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED, JSON.stringify(task.status));
    assert.equal((await (await fetch(`${interopURL}/calls`)).json()).a2a, before + 1);
    const seen = (await (await fetch(`${interopURL}/seen`)).json()).at(-1);
    assert.equal(seen.iss, planner);
    assert.equal(seen.aud, coder);
    assert.equal(seen.dialog, dialog, 'the dialog is the message\'s contextId');
    assert.equal(seen.chain, 'full', 'a verified chain, which the planner starts');
    const file = join(dir, `seen-${randomUUID()}.json`);
    writeFileSync(file, JSON.stringify(seen.handoff));
    const answer = verified(file, task.status.message.metadata[extensionURI]);
    assert.equal(answer.state, 'completed', 'the reply came back unchanged, status included');
  }
});
