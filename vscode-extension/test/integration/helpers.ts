// What the integration test files share: waiting, asserting, the server's processes, and the step runner
// whose record ($FIXPOINT_E2E_OUT) scripts/e2e.sh tallies.

import * as fs from 'fs';
import * as vscode from 'vscode';
import type { FixpointApi } from '../../src/extension';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const TIMEOUT = 60_000;

/** Thrown by a step that cannot run here: recorded as skipped with the reason. */
export class Skip extends Error {}

export interface Step { name: string; ok: boolean; ms: number; detail?: unknown; error?: string; skipped?: boolean }

export async function until<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeout = TIMEOUT): Promise<T> {
  const end = Date.now() + timeout;
  let last: unknown;
  while (Date.now() < end) {
    last = await probe();
    if (last) return last as T;
    await sleep(100);
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
}

/** A diagnostic's rule code: the server sends a codeDescription too, so VS Code holds {value, target}. */
export function codeOf(d: vscode.Diagnostic): string | undefined {
  return typeof d.code === 'object' && d.code !== null ? String(d.code.value) : d.code === undefined ? undefined : String(d.code);
}

export function fixpointDiagnostics(uri: vscode.Uri, code?: string): vscode.Diagnostic[] {
  return vscode.languages.getDiagnostics(uri).filter((d) => d.source === 'fixpoint' && (code === undefined || codeOf(d) === code));
}

/** Command lines (from /proc) of the processes whose argv mentions `what` and that run in (or name) `text`. */
export function processesMentioning(text: string, what: string): string[] {
  const found: string[] = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      if (!cmd.includes(what)) continue;
      const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
      if (cmd.includes(text) || cwd === text || cwd.startsWith(text + '/')) found.push(`${pid}: ${cmd.slice(0, 160)}`);
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

/** Wait for the server to go through a restart (triggered by `change`) and run again. */
export async function restarted(api: FixpointApi, change: () => Thenable<void> | Promise<void>, want: string = 'running'): Promise<string> {
  const states: string[] = [];
  const sub = api.server.onDidChangeState((s) => states.push(s));
  try {
    await change();
    await until(`the server to restart into "${want}"`, () => states.includes('starting') && states[states.length - 1] === want)
      .catch((e: Error) => { throw new Error(`${e.message}; states: ${states.join(' -> ') || 'none'}`); });
    return states.join(' -> ');
  } finally {
    sub.dispose();
  }
}

/** Runs one named step, records it in `steps` and logs it; a Skip is recorded as skipped, not failed. */
export function stepRunner(steps: Step[]): (name: string, fn: () => Promise<unknown>) => Promise<void> {
  return async (name, fn) => {
    const t = Date.now();
    try {
      const detail = await fn();
      steps.push({ name, ok: true, ms: Date.now() - t, detail });
      console.log(`ok    ${name} (${Date.now() - t} ms)`);
    } catch (e) {
      if (e instanceof Skip) {
        steps.push({ name, ok: true, ms: Date.now() - t, skipped: true, detail: e.message });
        console.log(`NOTE  skipped ${name}: ${e.message}`);
        return;
      }
      steps.push({ name, ok: false, ms: Date.now() - t, error: String((e as Error)?.stack ?? e) });
      console.log(`FAIL  ${name}: ${String(e)}`);
      throw e;
    }
  };
}
