// @a2a-js/sdk (A2A 1.0) against the Go A2A server with the a2a1hop executor.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

import { base, calls, coder, extensionURI, forge, offer, planner, verifyStatus } from '../lib/handoff.js';

const client = await new ClientFactory().createFromUrl(base);

function message(dialog, metadata) {
  return {
    messageId: randomUUID(), contextId: dialog, taskId: '', role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: 'fix the pager' }, metadata: undefined, filename: '', mediaType: '' }],
    metadata, extensions: metadata ? [extensionURI] : [], referenceTaskIds: [],
  };
}

async function send(dialog, metadata) {
  return client.sendMessage({ tenant: '', message: message(dialog, metadata), configuration: undefined, metadata: undefined },
    { serviceParameters: { 'A2A-Extensions': extensionURI } });
}

test('the client speaks A2A 1.0, the version of a2a1hop', () => {
  assert.equal(client.protocolVersion, '1.0');
});

test('a Handoff made by `handoff offer` is accepted; the signed "completed" verifies with `handoff verify-status`', async () => {
  const dialog = `ctx-${randomUUID()}`;
  const { file, handoff } = offer('fix-pager', dialog);
  const before = await calls();
  const task = await send(dialog, { [extensionURI]: handoff });
  assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED, JSON.stringify(task.status));
  const status = task.status.message.metadata[extensionURI];
  assert.equal(typeof status, 'string', 'no signed status in the task status message');
  const { code, answer } = verifyStatus(file, status);
  assert.equal(code, 0, JSON.stringify(answer));
  assert.equal(answer.valid, true);
  assert.equal(answer.state, 'completed');
  assert.equal(answer.iss, coder);
  assert.equal(answer.aud, planner);
  assert.equal((await calls()).a2a, before.a2a + 1, 'the executor ran once');
});

test('a forged Handoff is refused with no status and never reaches the executor', async () => {
  const dialog = `ctx-${randomUUID()}`;
  const { handoff } = offer('write-patch', dialog);
  const before = await calls();
  const task = await send(dialog, { [extensionURI]: forge(handoff, 'drop-table') });
  assert.equal(task.status.state, TaskState.TASK_STATE_REJECTED, JSON.stringify(task.status));
  assert.equal(task.status.message?.metadata?.[extensionURI], undefined, 'a status for an offer whose signature failed');
  assert.deepEqual(await calls(), before);
});

test('a status does not verify against another offer', async () => {
  const dialog = `ctx-${randomUUID()}`;
  const one = offer('one', dialog);
  const other = offer('other', dialog);
  const task = await send(dialog, { [extensionURI]: one.handoff });
  const { code, answer } = verifyStatus(other.file, task.status.message.metadata[extensionURI]);
  assert.equal(code, 1);
  assert.equal(answer.valid, false);
});

test('a message without a Handoff is refused: the extension is required', async () => {
  const before = await calls();
  await assert.rejects(send(`ctx-${randomUUID()}`, undefined));
  assert.deepEqual(await calls(), before);
});
