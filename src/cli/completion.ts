import { ADMIN_COLLECTION_PATHS } from '@payorch/client';
import { type CliIo, EXIT, type ExitCode, UsageError } from './cli-io.js';

/** Every command and the words that may follow it, as the dispatchers take them. */
export const COMMAND_WORDS: Readonly<Record<string, readonly string[]>> = {
  serve: [],
  migrate: ['--status'],
  call: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
  intents: ['create', 'get', 'events', 'watch'],
  quote: [],
  accounts: ['create', 'balance', 'history', 'statement'],
  policies: ['evaluate'],
  admin: ['resolve', 'log-level', 'webhooks', ...Object.keys(ADMIN_COLLECTION_PATHS)],
  audit: [],
  completion: ['bash', 'zsh'],
  help: [],
};
const RECORD_VERBS = ['list', 'get', 'create', 'update', 'delete'];
const OPTIONS = ['--service', '--admin-token', '--user', '--url', '--json', '--legacy-signature', '--help'];

/**
 * A bash completion function; zsh runs the same through bashcompinit. Commands, subcommands, the
 * admin records' verbs and the common options complete; values are left to the user.
 */
function bashScript(): string {
  const cases = Object.entries(COMMAND_WORDS)
    .filter(([, words]) => words.length > 0)
    .map(([command, words]) => `      ${command}) words="${words.join(' ')}" ;;`)
    .join('\n');
  return `# payorch completion: eval "$(payorch completion bash)" in ~/.bashrc
_payorch() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" words=""
  if [[ "$cur" == -* ]]; then
    words="${OPTIONS.join(' ')}"
  elif (( COMP_CWORD == 1 )); then
    words="${Object.keys(COMMAND_WORDS).join(' ')} --version --help"
  elif (( COMP_CWORD == 2 )); then
    case "\${COMP_WORDS[1]}" in
${cases}
    esac
  elif (( COMP_CWORD == 3 )) && [[ "\${COMP_WORDS[1]}" == admin ]]; then
    case "\${COMP_WORDS[2]}" in
      ${Object.keys(ADMIN_COLLECTION_PATHS).join('|')}) words="${RECORD_VERBS.join(' ')}" ;;
    esac
  fi
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _payorch payorch
`;
}

/** completion bash|zsh: prints the completion script to evaluate in the shell's start-up file. */
export function completionCommand(args: readonly string[], io: CliIo): ExitCode {
  const [shell, ...rest] = args;
  if (rest.length > 0 || (shell !== 'bash' && shell !== 'zsh')) throw new UsageError('usage: payorch completion bash|zsh');
  const script = bashScript();
  io.out(
    shell === 'bash'
      ? script
      : `# payorch completion: eval "$(payorch completion zsh)" in ~/.zshrc\nautoload -U +X bashcompinit && bashcompinit\n${script}`,
  );
  return EXIT.OK;
}
