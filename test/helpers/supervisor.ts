/**
 * systemd, simulated, because PID 1 here is not systemd and no service can really be started.
 * It runs the units a package installed under a machine root, reading the real unit files, and
 * does what systemd does with the settings mesh-host's units use: Restart= (always, on-failure,
 * no) after RestartSec=, the start limit (StartLimitIntervalSec=, StartLimitBurst=: a start
 * beyond the burst fails the unit with result start-limit-hit), RestartPreventExitStatus=,
 * OnFailure= (with the MONITOR_* variables systemd gives it), Type=oneshot with ExecStopPost=,
 * EnvironmentFile=, ConditionPathExists=, and units loaded once, as without a daemon-reload.
 *
 * A command runs on the machine under the root: /usr/bin/node is this machine's node, the script
 * after it is a path under the root, and the command gets `--root ROOT`. `systemctl reset-failed
 * UNIT` and `systemctl start UNIT` are done by the supervisor. `timeScale` multiplies every
 * duration, so that a start limit of minutes plays out in a test in seconds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execWords, parseTimeSpan, parseUnit, readEnvironmentFile, type UnitFile } from './unit-file.js';

export interface UnitEvent {
  at: number;
  unit: string;
  event: 'start' | 'exit' | 'failed' | 'skipped' | 'reset-failed';
  pid?: number;
  code?: number | null;
  signal?: string | null;
  /** For `failed`: systemd's service result (exit-code, signal, start-limit-hit). */
  result?: string;
}

interface UnitState {
  file: UnitFile;
  proc?: ChildProcess;
  starts: number[];
  timer?: NodeJS.Timeout;
  last?: { code: number | null; signal: string | null };
}

export class Supervisor {
  readonly events: UnitEvent[] = [];
  readonly output: string[] = [];
  private readonly units = new Map<string, UnitState>();
  private stopping = false;

  constructor(readonly root: string, private readonly opts: { timeScale?: number; env?: Record<string, string> } = {}) {}

  /** `systemctl start UNIT`: start it unless it is running or about to restart. */
  start(name: string, monitor: Record<string, string> = {}): void {
    if (this.stopping) return;
    const unit = this.unit(name);
    if (unit.proc || unit.timer) return;
    const exists = unit.file.get('Unit', 'ConditionPathExists');
    if (exists && !existsSync(join(this.root, exists))) return void this.log({ unit: name, event: 'skipped', result: `ConditionPathExists=${exists}` });
    const burst = Number(unit.file.get('Unit', 'StartLimitBurst', '5'));
    const interval = this.span(unit.file.get('Unit', 'StartLimitIntervalSec', '10s')!);
    unit.starts = unit.starts.filter((t) => Date.now() - t < interval);
    if (unit.starts.length >= burst) return this.fail(name, 'start-limit-hit');
    unit.starts.push(Date.now());
    const env = { ...process.env, MESH_LOG_LEVEL: 'warn', ...this.environment(unit.file), ...this.opts.env, ...monitor };
    const proc = this.spawn(unit.file.get('Service', 'ExecStart')!, env, name);
    unit.proc = proc;
    this.log({ unit: name, event: 'start', pid: proc.pid });
    proc.on('exit', (code, signal) => void this.exited(name, code, signal, env));
  }

  /** `systemctl reset-failed UNIT`: forget its failures and its start limit count. */
  resetFailed(name: string): void {
    this.unit(name).starts = [];
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
  }

  private async exited(name: string, code: number | null, signal: string | null, env: NodeJS.ProcessEnv): Promise<void> {
    const unit = this.unit(name);
    unit.proc = undefined;
    unit.last = { code, signal };
    this.log({ unit: name, event: 'exit', code, signal });
    const clean = code === 0;
    if (unit.file.get('Service', 'Type') === 'oneshot') {
      for (const line of unit.file.all('Service', 'ExecStopPost')) await this.runSync(line, env, name);
      if (!clean) this.log({ unit: name, event: 'failed', result: signal ? 'signal' : 'exit-code' });
      return;
    }
    if (this.stopping) return;
    const restart = unit.file.get('Service', 'Restart', 'no');
    const prevented = (unit.file.get('Service', 'RestartPreventExitStatus', '') ?? '').split(/\s+/).includes(String(code));
    if (!prevented && (restart === 'always' || (restart === 'on-failure' && !clean))) {
      unit.timer = setTimeout(() => ((unit.timer = undefined), this.start(name)), this.span(unit.file.get('Service', 'RestartSec', '100ms')!));
    } else if (!clean) this.fail(name, signal ? 'signal' : 'exit-code');
  }

  /** The unit fails: systemd starts its OnFailure= units with MONITOR_* describing the failure. */
  private fail(name: string, result: string): void {
    const unit = this.unit(name);
    this.log({ unit: name, event: 'failed', result });
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

  /** An ExecStopPost= line: systemctl is the supervisor itself; anything else runs to completion. */
  private async runSync(line: string, env: NodeJS.ProcessEnv, name: string): Promise<void> {
    const words = execWords(line, env as Record<string, string>);
    if (words[0] === '/bin/systemctl' || words[0] === '/usr/bin/systemctl') {
      const [verb, ...targets] = words.slice(1).filter((w) => !w.startsWith('--'));
      if (verb !== 'reset-failed' && verb !== 'start') throw new Error(`${name}: systemctl ${verb} is not simulated`);
      for (const target of targets) {
        if (verb === 'start') this.start(target);
        else this.resetFailed(target);
      }
      return;
    }
    await new Promise((resolve) => this.spawn(line, env, name).once('exit', resolve));
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
