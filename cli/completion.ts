/**
 * `subagentd completion bash|zsh|fish`: a completion script generated from the command table, so
 * it offers exactly the commands and flags the parser accepts. An unknown shell is a usage error.
 */
import { COMMON_FLAGS } from './options.js';
import { flagWords, UsageError, type CommandSpec, type FlagSpecs } from './command-table.js';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;

const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

export function completionScript(shell: string, commands: readonly CommandSpec[]): string {
  switch (shell) {
    case 'bash':
      return bash(commands);
    case 'zsh':
      return zsh(commands);
    case 'fish':
      return fish(commands);
    default:
      throw new UsageError(`completion knows ${SHELLS.join(', ')}, not "${shell}"`);
  }
}

function bash(commands: readonly CommandSpec[]): string {
  const cases = commands
    .map((c) => `    ${c.name}) flags=${quote(flagWords(c).join(' '))}; operands=${quote((c.operandChoices ?? []).join(' '))} ;;`)
    .join('\n');
  return `# subagentd completion for bash: eval "$(subagentd completion bash)"
_subagentd() {
  local cur=\${COMP_WORDS[COMP_CWORD]} flags operands
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W ${quote(['--help', '--version', ...commands.map((c) => c.name)].join(' '))} -- "$cur"))
    return
  fi
  case "\${COMP_WORDS[1]}" in
${cases}
    *) flags=''; operands='' ;;
  esac
  case "\${COMP_WORDS[COMP_CWORD-1]}" in
    --socket|--state-dir|--config|--schema) COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  case "$cur" in
    -*) COMPREPLY=($(compgen -W "$flags" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -W "$operands" -- "$cur")) ;;
  esac
}
complete -o default -F _subagentd subagentd
`;
}

const flagsOf = (c: CommandSpec): FlagSpecs => ({ ...COMMON_FLAGS, ...c.flags });

function zsh(commands: readonly CommandSpec[]): string {
  const described = commands.map((c) => quote(`${c.name}:${c.summary.replace(/:/g, '\\:')}`)).join(' ');
  const cases = commands
    .map((c) => {
      const specs = Object.entries(flagsOf(c)).map(([name, f]) => {
        const help = f.help.replace(/[[\]:']/g, ' ');
        const value = f.type === 'string' ? `:${f.value ?? 'value'}:${f.choices ? `(${f.choices.join(' ')})` : '_files'}` : '';
        return quote(`--${name}[${help}]${value}`);
      });
      const operands = c.operandChoices ? [quote(`1:${c.operands ?? 'arg'}:(${c.operandChoices.join(' ')})`)] : [];
      return `    ${c.name}) _arguments ${[...specs, ...operands].join(' ')} ;;`;
    })
    .join('\n');
  return `#compdef subagentd
# subagentd completion for zsh: subagentd completion zsh > "\${fpath[1]}/_subagentd"
_subagentd() {
  if (( CURRENT == 2 )); then
    local -a commands=(${described})
    _describe command commands
    return
  fi
  local command=$words[2]
  shift words; (( CURRENT-- ))
  case $command in
${cases}
  esac
}
compdef _subagentd subagentd
`;
}

function fish(commands: readonly CommandSpec[]): string {
  const lines = ['# subagentd completion for fish: subagentd completion fish > ~/.config/fish/completions/subagentd.fish', 'complete -c subagentd -f'];
  for (const c of commands) lines.push(`complete -c subagentd -n __fish_use_subcommand -a ${c.name} -d ${quote(c.summary)}`);
  for (const c of commands) {
    const when = `'__fish_seen_subcommand_from ${c.name}'`;
    for (const [name, f] of Object.entries(flagsOf(c))) {
      const value = f.type === 'string' ? (f.choices ? ` -x -a ${quote(f.choices.join(' '))}` : ' -r -F') : '';
      lines.push(`complete -c subagentd -n ${when} -l ${name}${f.short ? ` -s ${f.short}` : ''}${value} -d ${quote(f.help)}`);
    }
    if (c.operandChoices) lines.push(`complete -c subagentd -n ${when} -a ${quote(c.operandChoices.join(' '))}`);
  }
  return `${lines.join('\n')}\n`;
}
