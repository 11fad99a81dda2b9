// @modelcontextprotocol/sdk against the Go MCP server with the mcphop
// receiving middleware, over streamable HTTP.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { base, calls, coder, forge, metaKey, offer, planner, verifyStatus } from '../lib/handoff.js';

const client = new Client({ name: 'js-planner', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`)));
after(() => client.close());

test('a tool call with the Handoff in _meta runs; the result _meta carries the signed "completed"', async () => {
  const { file, handoff } = offer('fix-pager', `ctx-${randomUUID()}`);
  const before = await calls();
  const res = await client.callTool({ name: 'work', arguments: { change: 'x' }, _meta: { [metaKey]: handoff } });
  assert.equal(res.isError ?? false, false, JSON.stringify(res));
  assert.deepEqual(res.content, [{ type: 'text', text: 'done: x' }]);
  const status = res._meta?.[metaKey];
  assert.equal(typeof status, 'string', 'no signed status in the result _meta');
  const { code, answer } = verifyStatus(file, status);
  assert.equal(code, 0, JSON.stringify(answer));
  assert.equal(answer.state, 'completed');
  assert.equal(answer.iss, coder);
  assert.equal(answer.aud, planner);
  assert.equal((await calls()).mcp, before.mcp + 1, 'the tool ran once');
});

test('the same Handoff again is a retransmission: the identical status, the tool does not run again', async () => {
  const { handoff } = offer('once', `ctx-${randomUUID()}`);
  const first = await client.callTool({ name: 'work', arguments: { change: 'y' }, _meta: { [metaKey]: handoff } });
  const before = await calls();
  const again = await client.callTool({ name: 'work', arguments: { change: 'y' }, _meta: { [metaKey]: handoff } });
  assert.equal(again._meta[metaKey], first._meta[metaKey]);
  assert.deepEqual(await calls(), before);
});

test('a forged Handoff, and a call without one, are refused and never reach the tool', async () => {
  const { handoff } = offer('write-patch', `ctx-${randomUUID()}`);
  const before = await calls();
  const forged = await client.callTool({ name: 'work', arguments: { change: 'z' }, _meta: { [metaKey]: forge(handoff, 'drop-table') } });
  assert.equal(forged.isError, true);
  assert.equal(forged._meta?.[metaKey], undefined, 'a status for an offer whose signature failed');
  const bare = await client.callTool({ name: 'work', arguments: { change: 'z' } });
  assert.equal(bare.isError, true);
  assert.deepEqual(await calls(), before);
});

test('a traceparent in _meta changes no verdict', async () => {
  const { file, handoff } = offer('traced', `ctx-${randomUUID()}`);
  const res = await client.callTool({ name: 'work', arguments: { change: 't' },
    _meta: { [metaKey]: handoff, traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'x=1' } });
  assert.equal(res.isError ?? false, false);
  assert.equal(verifyStatus(file, res._meta[metaKey]).answer.state, 'completed');
  const { handoff: other } = offer('traced-forged', `ctx-${randomUUID()}`);
  const forged = await client.callTool({ name: 'work', arguments: { change: 't' },
    _meta: { [metaKey]: forge(other, 'drop-table'), traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' } });
  assert.equal(forged.isError, true);
});
