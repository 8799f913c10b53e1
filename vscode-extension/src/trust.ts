// Workspace trust: an untrusted workspace gets diagnostics (and their quick-fix edits) only. Nothing that
// builds, flashes or runs the workspace's code: no server command that runs the fixpoint CLI, no
// interpreter or path taken from the workspace's settings or its virtualenv. Pure: unit-tested.

/** The server's commands that run `fixpoint` (generate, quantize, build + flash) in the workspace. */
export const BUILD_COMMANDS: ReadonlySet<string> = new Set([
  'fixpoint.regenerateModel',
  'fixpoint.quantize',
  'fixpoint.flashVerify',
]);

/** The server's commands safe in any workspace: they read, check and report. */
export const READ_ONLY_COMMANDS: ReadonlySet<string> = new Set(['fixpoint.checkWorkspace', 'fixpoint.lastReport']);

/** May `command` be sent to the server? Unknown commands are treated as builds (denied when untrusted). */
export function commandAllowed(command: string, trusted: boolean): boolean {
  return trusted || READ_ONLY_COMMANDS.has(command);
}

export function untrustedMessage(what: string): string {
  return `Fixpoint: ${what} is disabled in Restricted Mode. Fixpoint only shows diagnostics in an untrusted ` +
    'workspace: trust it to build, regenerate or flash.';
}
