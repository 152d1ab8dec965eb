/**
 * systemd, simulated, because PID 1 here is not systemd and no service can really be started.
 * It runs the units a package installed under a machine root, reading the real unit files, and
 * does what systemd does with the settings mesh-host's units use: Restart= (always, on-failure,
 * no) after RestartSec=, the start limit (StartLimitIntervalSec=, StartLimitBurst=: a start
 * beyond the burst fails the unit with result start-limit-hit), RestartPreventExitStatus=,
 * OnFailure= (with the MONITOR_* variables systemd gives it), Type=oneshot with ExecStopPost=
 * (given EXIT_CODE, EXIT_STATUS, SERVICE_RESULT) and SuccessExitStatus=, EnvironmentFile=,
 * ConditionPathExists=, and units loaded once, as without a daemon-reload. OnFailure= runs when
 * a unit fails for good, as systemd 252 (Debian 12) does; with `everyFailedRun` set, also after
 * each failed run that Restart= follows, as systemd 254 and later (Debian 13) do by default
 * (RestartMode=normal: the unit passes through the failed state on its way to the restart).
 *
 * A command runs on the machine under the root: /usr/bin/node is this machine's node, the script
 * after it is a path under the root, and the command gets `--root ROOT`; `/bin/sh -c SCRIPT`
 * runs this machine's sh. `systemctl reset-failed UNIT` and `systemctl start UNIT`, in a unit
 * line or called by such a script, are done by the supervisor; the commands of a unit started by
 * OnFailure= can also ask `systemctl show --property=SubState --value UNIT` (failed, auto-restart,
 * running, dead). As with systemd, a unit refused at its start limit right after a failed run
 * gives its OnFailure= units that run's result (MONITOR_SERVICE_RESULT=exit-code). `timeScale` multiplies every
 * duration, so that a start limit of minutes plays out in a test in seconds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execWords, parseTimeSpan, parseUnit, readEnvironmentFile, type UnitFile } from './unit-file.js';

export interface UnitEvent {
  at: number;
  unit: string;
  event: 'start' | 'exit' | 'failed' | 'skipped' | 'reset-failed';
  pid?: number;
  code?: number | null;
  signal?: string | null;
  /** For `failed`: systemd's service result (exit-code, signal, start-limit-hit), with ", restarting" when Restart= follows it. */
  result?: string;
}

interface UnitState {
  file: UnitFile;
  proc?: ChildProcess;
  starts: number[];
  timer?: NodeJS.Timeout;
  /**
   * A start asked while it was running (a oneshot triggered again): done when this run ends, with
   * its own MONITOR_*. Under systemd, RestartSec= (5 s) lets a run of the rollback unit end long
   * before the next failure; at a test's time scale it may not, and the later trigger must not be lost.
   */
  queued?: Record<string, string>;
  last?: { code: number | null; signal: string | null };
}

export class Supervisor {
  readonly events: UnitEvent[] = [];
  readonly output: string[] = [];
  /** OnFailure= after each failed run that Restart= follows too (systemd 254 and later), not only when the unit fails for good. */
  everyFailedRun = false;
  private readonly units = new Map<string, UnitState>();
  private stopping = false;
  private bin?: string;

  constructor(readonly root: string, private readonly opts: { timeScale?: number; env?: Record<string, string> } = {}) {}

  /** `systemctl start UNIT`: start it unless it is running or about to restart. */
  start(name: string, monitor: Record<string, string> = {}): void {
    if (this.stopping) return;
    const unit = this.unit(name);
    if (unit.proc && unit.file.get('Service', 'Type') === 'oneshot') return void (unit.queued = monitor);
    if (unit.proc || unit.timer) return;
    const exists = unit.file.get('Unit', 'ConditionPathExists');
    if (exists && !existsSync(join(this.root, exists))) return void this.log({ unit: name, event: 'skipped', result: `ConditionPathExists=${exists}` });
    const burst = Number(unit.file.get('Unit', 'StartLimitBurst', '5'));
    const interval = this.span(unit.file.get('Unit', 'StartLimitIntervalSec', '10s')!);
    unit.starts = unit.starts.filter((t) => Date.now() - t < interval);
    // systemd keeps a service's result from its last run when that run failed: only after a clean one is it start-limit-hit.
    if (unit.starts.length >= burst) return this.fail(name, unit.last && unit.last.code !== 0 ? (unit.last.signal ? 'signal' : 'exit-code') : 'start-limit-hit');
    unit.starts.push(Date.now());
    const triggered = Object.keys(monitor).length > 0 ? { PATH: `${this.fakeBin()}:${process.env.PATH ?? '/usr/bin:/bin'}` } : {};
    const env = { ...process.env, MESH_LOG_LEVEL: 'warn', ...this.environment(unit.file), ...this.opts.env, ...monitor, ...triggered };
    const proc = this.spawn(unit.file.get('Service', 'ExecStart')!, env, name);
    unit.proc = proc;
    this.setState(name, 'running');
    this.log({ unit: name, event: 'start', pid: proc.pid });
    proc.on('exit', (code, signal) => void this.exited(name, code, signal, env));
  }

  /** `systemctl reset-failed UNIT`: forget its failures and its start limit count. */
  resetFailed(name: string): void {
    this.unit(name).starts = [];
    if (this.subState(name) === 'failed') this.setState(name, 'dead');
    this.log({ unit: name, event: 'reset-failed' });
  }

  /** The running process of `name`, if any. */
  running(name: string): ChildProcess | undefined {
    return this.units.get(name)?.proc;
  }

  /** Stop every unit (SIGTERM, as systemctl stop) and wait for them to exit. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const unit of this.units.values()) clearTimeout(unit.timer);
    const procs = [...this.units.values()].flatMap((u) => (u.proc ? [u.proc] : []));
    await Promise.all(procs.map((p) => new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGTERM');
    })));
    if (this.bin) rmSync(this.bin, { recursive: true, force: true });
  }

  private async exited(name: string, code: number | null, signal: string | null, env: NodeJS.ProcessEnv): Promise<void> {
    const unit = this.unit(name);
    unit.proc = undefined;
    unit.last = { code, signal };
    this.log({ unit: name, event: 'exit', code, signal });
    const success = ['0', ...(unit.file.get('Service', 'SuccessExitStatus', '') ?? '').split(/\s+/)];
    const clean = code !== null && success.includes(String(code));
    const result = clean ? 'success' : signal ? 'signal' : 'exit-code';
    if (unit.file.get('Service', 'Type') === 'oneshot') {
      const status = { SERVICE_RESULT: result, EXIT_CODE: signal ? 'killed' : 'exited', EXIT_STATUS: signal ?? String(code) };
      for (const line of unit.file.all('Service', 'ExecStopPost')) await this.runSync(line, { ...env, ...status }, name);
      if (!clean) this.log({ unit: name, event: 'failed', result });
      const queued = unit.queued;
      unit.queued = undefined;
      if (queued) this.start(name, queued);
      return;
    }
    if (this.stopping) return;
    const restart = unit.file.get('Service', 'Restart', 'no');
    const prevented = (unit.file.get('Service', 'RestartPreventExitStatus', '') ?? '').split(/\s+/).includes(String(code));
    if (!prevented && (restart === 'always' || (restart === 'on-failure' && !clean))) {
      unit.timer = setTimeout(() => ((unit.timer = undefined), this.start(name)), this.span(unit.file.get('Service', 'RestartSec', '100ms')!));
      this.setState(name, 'auto-restart');
      if (!clean && this.everyFailedRun) this.notifyFailure(name, result, true);
    } else if (!clean) this.fail(name, result);
    else this.setState(name, 'dead');
  }

  /** The unit fails for good: systemd starts its OnFailure= units with MONITOR_* describing the failure. */
  private fail(name: string, result: string): void {
    this.setState(name, 'failed');
    this.notifyFailure(name, result);
  }

  private notifyFailure(name: string, result: string, restarting = false): void {
    const unit = this.unit(name);
    this.log({ unit: name, event: 'failed', result: restarting ? `${result}, restarting` : result });
    const last = unit.last;
    const monitor = { MONITOR_UNIT: name, MONITOR_SERVICE_RESULT: result, ...(last ? { MONITOR_EXIT_CODE: last.signal ? 'killed' : 'exited', MONITOR_EXIT_STATUS: last.signal ?? String(last.code) } : {}) };
    for (const other of unit.file.all('Unit', 'OnFailure').flatMap((v) => v.split(/\s+/))) this.start(other, monitor);
  }

  private spawn(line: string, env: NodeJS.ProcessEnv, name: string): ChildProcess {
    const [program, script, ...args] = execWords(line, env as Record<string, string>);
    if (program !== '/usr/bin/node' || !script) throw new Error(`${name}: the simulated supervisor runs only /usr/bin/node SCRIPT commands, not: ${line}`);
    const proc = spawn(process.execPath, [join(this.root, script), ...args, '--root', this.root], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    for (const stream of [proc.stdout!, proc.stderr!]) stream.on('data', (b: Buffer) => this.output.push(...b.toString().trimEnd().split('\n').map((l) => `${name}[${proc.pid}]: ${l}`)));
    return proc;
  }

  /**
   * An ExecStopPost= line, run to completion. systemctl is the supervisor itself; a `/bin/sh -c`
   * script runs with a `systemctl` first on its PATH that writes its arguments down, and what it
   * was asked is done when the script ends, in order.
   */
  private async runSync(line: string, env: NodeJS.ProcessEnv, name: string): Promise<void> {
    const words = execWords(line, env as Record<string, string>);
    if (words[0] === '/bin/systemctl' || words[0] === '/usr/bin/systemctl') return this.systemctl(words.slice(1), name);
    if (words[0] === '/bin/sh' && words[1] === '-c') {
      const calls = join(this.fakeBin(), `calls-${process.pid}-${Date.now()}`);
      const proc = spawn('/bin/sh', words.slice(1), { env: { ...env, PATH: `${this.fakeBin()}:${env.PATH ?? '/usr/bin:/bin'}`, SUPERVISOR_CALLS: calls }, stdio: 'ignore' });
      await new Promise((resolve) => proc.once('exit', resolve));
      const asked = existsSync(calls) ? readFileSync(calls, 'utf8').split('\n').filter(Boolean) : [];
      rmSync(calls, { force: true });
      for (const call of asked) this.systemctl(call.split(' '), name);
      return;
    }
    await new Promise((resolve) => this.spawn(line, env, name).once('exit', resolve));
  }

  private systemctl(args: string[], name: string): void {
    const [verb, ...targets] = args.filter((w) => !w.startsWith('--'));
    if (verb !== 'reset-failed' && verb !== 'start') throw new Error(`${name}: systemctl ${verb} is not simulated`);
    for (const target of targets) {
      if (verb === 'start') this.start(target);
      else this.resetFailed(target);
    }
  }

  /**
   * A folder with the `systemctl` that unit commands run: `show … UNIT` prints the unit's sub-state
   * (kept in this folder as state.UNIT), anything else is appended to $SUPERVISOR_CALLS.
   */
  private fakeBin(): string {
    if (!this.bin) {
      this.bin = mkdtempSync(join(tmpdir(), 'mesh-supervisor-'));
      const script = `#!/bin/sh\nif [ "$1" = show ]; then for a; do unit=$a; done; cat "${this.bin}/state.$unit" 2>/dev/null || echo dead; exit 0; fi\necho "$*" >> "$SUPERVISOR_CALLS"\n`;
      writeFileSync(join(this.bin, 'systemctl'), script);
      chmodSync(join(this.bin, 'systemctl'), 0o755);
    }
    return this.bin;
  }

  private subState(name: string): string {
    try {
      return readFileSync(join(this.fakeBin(), `state.${name}`), 'utf8').trim();
    } catch {
      return 'dead';
    }
  }

  /**
   * Written whole and renamed into place: a unit command's `systemctl show` may read it at any
   * moment, and a file being rewritten in place can be read empty (seen: a rollback at the start
   * limit read no state and went ahead without knowing that systemd had given up).
   */
  private setState(name: string, state: 'running' | 'auto-restart' | 'failed' | 'dead'): void {
    const file = join(this.fakeBin(), `state.${name}`);
    writeFileSync(`${file}.new`, `${state}\n`);
    renameSync(`${file}.new`, file);
  }

  private unit(name: string): UnitState {
    let unit = this.units.get(name);
    if (!unit) {
      unit = { file: parseUnit(name, readFileSync(join(this.root, 'usr/lib/systemd/system', name), 'utf8')), starts: [] };
      this.units.set(name, unit);
    }
    return unit;
  }

  private environment(file: UnitFile): Record<string, string> {
    return Object.assign({}, ...file.all('Service', 'EnvironmentFile').map((f) => readEnvironmentFile(join(this.root, f.replace(/^-/, '')), f.startsWith('-'))));
  }

  private span(text: string): number {
    return parseTimeSpan(text) * (this.opts.timeScale ?? 1);
  }

  private log(e: Omit<UnitEvent, 'at'>): void {
    this.events.push({ at: Date.now(), ...e });
  }
}
