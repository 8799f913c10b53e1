// The server's stderr into the Fixpoint output channel at the right level. The server logs with
// Python's logging ("2026-01-02 10:11:12,345 logger LEVEL message"); vscode-languageclient would show
// every stderr line as an error. pygls' per-message wire log and its feature registrations go to trace
// and debug (shown when the channel's log level asks for them). Pure: unit-tested.

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

const LINE = /^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)? (\S+) (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/;
const LEVELS: Record<string, LogLevel> = { DEBUG: 'debug', INFO: 'info', WARNING: 'warn', ERROR: 'error', CRITICAL: 'error' };

export class ServerLogParser {
  /** The level of the last logging record: a traceback's lines follow it. */
  private last: LogLevel = 'info';

  line(raw: string): { level: LogLevel; text: string } {
    const m = LINE.exec(raw);
    if (!m) return { level: this.last === 'error' || this.last === 'warn' ? this.last : 'info', text: raw };
    const [, logger, name, message] = m;
    let level = LEVELS[name];
    if (level === 'info' && logger.startsWith('pygls.protocol')) level = 'trace'; // "Sending data: {...}"
    else if (level === 'info' && logger.startsWith('pygls.feature_manager')) level = 'debug';
    this.last = level;
    return { level, text: `[server] ${logger}: ${message}` };
  }
}
