/**
 * Imported first by the executable (main.ts), so an old Node is refused with one line before any
 * other module of ours is evaluated: the only output is the version found, the one needed and how
 * to get it, and the exit code is 1.
 */
import { nodeVersionProblem } from '../common/node-version.js';

const problem = nodeVersionProblem();
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
