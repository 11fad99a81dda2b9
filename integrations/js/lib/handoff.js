// What the tests share: the environment .ci/js.sh sets up, the handoff
// CLI (offer, verify-status) and a forgery.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the tests with .ci/js.sh`);
  return v;
}

export const bin = env('HANDOFF_BIN');
export const dir = env('HANDOFF_JS_DIR');
export const base = env('HANDOFF_INTEROP_URL');
export const planner = env('HANDOFF_PLANNER');
export const coder = env('HANDOFF_CODER');

// The draft's carriage keys: A2A extension URI (metadata key) and MCP _meta key.
export const extensionURI = 'https://quantumlearningmachines.com/a2a/ext/agent-handoff/v1';
export const metaKey = 'quantumlearningmachines.com/agent-handoff';

// offer signs an offer from the planner to the coder with `handoff offer`
// and returns the file and the Handoff object.
export function offer(task, dialog) {
  const file = join(dir, `${task}-${randomUUID()}.json`);
  execFileSync(bin, ['offer', '--key', join(dir, 'planner.jwk'), '--iss', planner, '--aud', coder,
    '--dialog', dialog, '--task', task, '--out', file]);
  return { file, handoff: JSON.parse(readFileSync(file, 'utf8')) };
}

// verifyStatus checks a signed status against the offer in offerFile with
// `handoff verify-status`: its exit code and its JSON answer.
export function verifyStatus(offerFile, status) {
  const file = join(dir, `status-${randomUUID()}`);
  writeFileSync(file, status);
  const r = spawnSync(bin, ['verify-status', '--trust', join(dir, 'trust.json'), '--offer', offerFile, file], { encoding: 'utf8' });
  if (r.status === 2) throw new Error(`verify-status: ${r.stderr}`);
  return { code: r.status, answer: JSON.parse(r.stdout) };
}

// forge returns the Handoff with its offer's task changed and the
// signature kept: an offer whose signature no longer verifies.
export function forge(handoff, task) {
  const [h, p, s] = handoff.offer.split('.');
  const payload = JSON.parse(Buffer.from(p, 'base64url').toString('utf8'));
  payload.task = task;
  return { ...handoff, offer: [h, Buffer.from(JSON.stringify(payload)).toString('base64url'), s].join('.') };
}

// calls returns how often the server's work ran: {a2a, mcp}.
export async function calls() {
  const r = await fetch(`${base}/calls`);
  return r.json();
}
