/**
 * How a start names its model, in the library's words: the daemon's "no model" messages use this
 * phrase, and the CLI, whose users say `--model`, swaps it for its flag (cli/run-command.ts), so
 * each user reads the option they can actually set.
 */
export const PER_START_MODEL = "the start's agentOptions.model";

/** The message as the CLI shows it. */
export const inCliWords = (message: string): string => message.replaceAll(`${PER_START_MODEL} set to "scripted:/absolute/FILE.json"`, '--model scripted:FILE').replaceAll(PER_START_MODEL, '--model');
