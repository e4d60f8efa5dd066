/**
 * Persona templates: strict `{{name}}` interpolation. Every placeholder must name a known
 * variable and every pair of braces must be a well-formed placeholder; anything else fails
 * loudly rather than reaching the model half-rendered. Single braces are plain text.
 */
import { isoTime } from '../../common/iso-time.js';

export class TemplateError extends Error {
  override readonly name = 'TemplateError';
  constructor(
    message: string,
    /** The unknown variable, when that is the problem. */
    readonly variable?: string,
  ) {
    super(message);
  }
}

export const DEFAULT_PERSONA = [
  'You are a subagent: another agent delegated a task to you and sees only your final message.',
  'You work in {{cwd}}. Today is {{date}}.',
  'Use the tools you are offered to do the task, then reply with a concise, complete answer.',
].join(' ');

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/y;

export function interpolate(template: string, vars: Readonly<Record<string, string>>): string {
  let out = '';
  let i = 0;
  while (i < template.length) {
    const open = template.indexOf('{{', i);
    const close = template.indexOf('}}', i);
    if (close !== -1 && (open === -1 || close < open)) {
      throw new TemplateError(`malformed template: "}}" without a matching "{{" at offset ${close}`);
    }
    if (open === -1) {
      out += template.slice(i);
      break;
    }
    PLACEHOLDER.lastIndex = open;
    const match = PLACEHOLDER.exec(template);
    if (!match) throw new TemplateError(`malformed template: "{{" at offset ${open} does not start a {{name}} placeholder`);
    const name = match[1] as string;
    if (!Object.hasOwn(vars, name)) {
      throw new TemplateError(`unknown template variable "${name}" (known: ${Object.keys(vars).sort().join(', ')})`, name);
    }
    out += template.slice(i, open) + vars[name];
    i = PLACEHOLDER.lastIndex;
  }
  return out;
}

/** The variables every persona may use; configured ones come first so built-ins win. */
export function personaVariables(
  configured: Readonly<Record<string, string>>,
  builtin: { cwd: string; provider: string; depth: number; now?: Date },
): Record<string, string> {
  return {
    ...configured,
    cwd: builtin.cwd,
    date: isoTime((builtin.now ?? new Date()).getTime()).slice(0, 10),
    provider: builtin.provider,
    depth: String(builtin.depth),
  };
}
