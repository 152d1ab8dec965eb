/**
 * `mesh-cli verify-range BASE..HEAD [--allow]`: the check a pre-push hook and CI make before a
 * range reaches main. It refuses (exit 1) a range that changes mesh.yaml's `trust:` or
 * `signers`, or holds a commit that is unsigned or signed by a key not trusted at its parent,
 * unless `--allow` says the person pushing has looked (signing on top of such a commit deploys
 * it, and a signers change makes its key trusted on every host).
 */
import type { Command } from 'commander';
import { EXIT } from '../../core/exit.js';
import { MeshError } from '../../core/errors.js';
import { openFleet } from '../fleet.js';
import { git } from '../git.js';
import { resolveCommit } from '../tree.js';
import { reviewTrust, trustLines } from '../trust-review.js';

/** Register `verify-range`. */
export function verifyRangeCommand(program: Command): void {
  program
    .command('verify-range')
    .description('refuse a range that changes whom hosts trust, or holds commits the hosts would refuse (for a pre-push hook and CI)')
    .argument('<range>', 'BASE..HEAD, e.g. origin/main..HEAD')
    .option('--allow', 'show what the range does to trust, but do not refuse it')
    .option('--json', 'print {base, head, changes, suspects} as JSON')
    .action(async (range: string, o: { allow?: boolean; json?: boolean }) => {
      const parts = range.split('..');
      if (parts.length !== 2 || !parts[0] || !parts[1]) throw new MeshError('E_USAGE', `'${range}' is not a range: write BASE..HEAD, e.g. origin/main..HEAD`);
      const fleet = await openFleet(process.cwd());
      const [base, head] = [await resolveCommit(fleet.dir, parts[0]), await resolveCommit(fleet.dir, parts[1])];
      const review = await reviewTrust(fleet.dir, base, head);
      const lines = trustLines(review);
      if (o.json) console.log(JSON.stringify({ base, head, ...review }));
      else if (lines.length === 0) {
        const commits = (await holdsCommits(fleet.dir, base, head)) ? 'every commit is signed by a key trusted at its parent' : 'the range holds no commit to check (BASE..HEAD is what HEAD has that BASE has not: is it the wrong way round?)';
        console.log(`${range}: trust settings unchanged, and ${commits}`);
      }
      else console.log(lines.join('\n'));
      if (lines.length > 0 && !o.allow) {
        if (!o.json) console.error(`refused: look at the above, then run again with --allow (in the pre-push hook: MESH_ALLOW_TRUST=1 git push)`);
        process.exitCode = EXIT.failed;
      }
    });
}

/** Whether `base..head` holds any commit (a range given the wrong way round holds none). */
async function holdsCommits(dir: string, base: string, head: string): Promise<boolean> {
  return (await git(dir, ['rev-list', '--count', `${base}..${head}`])).trim() !== '0';
}
