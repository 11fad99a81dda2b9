// An A2A 1.0 agent written with @a2a-js/sdk that knows nothing of
// handoffs: the agent `handoff gateway` stands in front of in
// test/gateway.test.js. On one loopback listener:
//
//   /.well-known/agent-card.json  its card (JSON-RPC and HTTP+JSON)
//   /a2a/jsonrpc, /a2a/rest       A2A 1.0 over JSON-RPC and HTTP+JSON
//   /calls                        {"calls": n, "handoffs": m, "cancels": c}:
//                                 how often its work ran, how many of the
//                                 messages carried a Handoff, how often a
//                                 task was canceled
//
// Its work: a message whose text is "wait" works until canceled; any other
// completes with an artifact. Once listening it writes its base URL to the
// file given as its first argument. Its card lists JSON-RPC first, or
// HTTP+JSON first when the second argument is "rest-first".
import express from 'express';
import { writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const extensionURI = 'https://quantumlearningmachines.com/a2a/ext/agent-handoff/v1';
const ready = process.argv[2];
const restFirst = process.argv[3] === 'rest-first';

let calls = 0;
let handoffs = 0;
let cancels = 0;
const waiting = new Map(); // taskId -> resolve, for "wait"

const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: '' });
const now = () => new Date().toISOString();
const agentMessage = (ctx, value) => ({
  messageId: randomUUID(), contextId: ctx.contextId, taskId: ctx.taskId, role: Role.ROLE_AGENT,
  parts: [text(value)], metadata: undefined, extensions: [], referenceTaskIds: [],
});
const status = (ctx, state, message) => AgentEvent.statusUpdate({
  taskId: ctx.taskId, contextId: ctx.contextId, status: { state, message, timestamp: now() }, metadata: undefined,
});

const work = {
  async execute(ctx, bus) {
    calls++;
    const m = ctx.userMessage;
    if (m.metadata?.[extensionURI] !== undefined || (m.extensions ?? []).includes(extensionURI)) handoffs++;
    bus.publish(AgentEvent.task({
      id: ctx.taskId, contextId: ctx.contextId, artifacts: [], history: [m], metadata: undefined,
      status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: now() },
    }));
    const said = m.parts[0]?.content?.value ?? '';
    if (said === 'wait') {
      await new Promise((resolve) => waiting.set(ctx.taskId, resolve));
      bus.publish(status(ctx, TaskState.TASK_STATE_CANCELED, agentMessage(ctx, 'canceled')));
      bus.finished();
      return;
    }
    bus.publish(AgentEvent.artifactUpdate({
      taskId: ctx.taskId, contextId: ctx.contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: randomUUID(), name: 'result', description: '', parts: [text(`done: ${said}`)], metadata: undefined, extensions: [] },
    }));
    bus.publish(status(ctx, TaskState.TASK_STATE_COMPLETED, agentMessage(ctx, 'done')));
    bus.finished();
  },
  async cancelTask(taskId) {
    cancels++;
    waiting.get(taskId)?.();
    waiting.delete(taskId);
  },
};

const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const card = {
    name: 'js-upstream', description: 'An A2A agent written with @a2a-js/sdk that knows nothing of handoffs', version: '1.0.0',
    supportedInterfaces: [
      { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      { url: `${base}/a2a/rest`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' },
    ][restFirst ? 'reverse' : 'slice'](),
    provider: undefined,
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {}, securityRequirements: [],
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [{ id: 'work', name: 'work', description: 'does the work it is given', tags: ['work'], examples: [],
      inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), work);
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  app.use('/a2a/rest', restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  app.get('/calls', (_req, res) => res.json({ calls, handoffs, cancels }));
  if (ready) writeFileSync(ready, `${base}\n`);
  console.error(`js-upstream: serving on ${base}`);
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => server.close(() => process.exit(0)));
