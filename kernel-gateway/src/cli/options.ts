/**
 * The option tables (options/) as commander options: each command declares its options from its
 * table, so the flags, their help and defaults are written once.
 */
import { Option, type Command } from 'commander';
import type { OptionTable } from '../options';
import { secretOnCommandLine, type SecretEnvName } from '../secrets';

/** Declare every option of `table` on `command`, in the table's order. */
export function declareOptions(command: Command, table: OptionTable): Command {
  for (const [name, spec] of Object.entries(table)) {
    const option = spec.secret
      ? refusedSecret(
          command,
          spec.flag.split(' ')[0],
          spec.secret.env,
          spec.secret.file
        )
      : new Option(spec.flag, spec.help);
    if (spec.parse) {
      option.argParser(
        spec.parse as (value: string, previous: unknown) => unknown
      );
    }
    if (spec.choices) {
      option.choices(spec.choices);
    }
    if (spec.default !== undefined) {
      option.default(spec.default);
    }
    if (spec.required) {
      option.makeOptionMandatory();
    }
    // The table's name is the flags' field its value lands in: a misspelt one would be undefined.
    if (option.attributeName() !== name) {
      throw new Error(
        `option ${spec.flag} lands in ${option.attributeName()}, not ${name}`
      );
    }
    command.addOption(option);
    if (spec.negatedBy) {
      // After the option itself: commander then keeps its default rather than `true`.
      command.addOption(new Option(spec.negatedBy.flag, spec.negatedBy.help));
    }
  }
  return command;
}

/**
 * A hidden option that refuses any value, with where the secret goes instead: a secret on a command
 * line is readable by every user of the host. Commander would repeat the value in its own message.
 */
export function refusedSecret(
  command: Command,
  option: string,
  envName: SecretEnvName,
  fileOption: string
): Option {
  return new Option(`${option} <token>`).hideHelp().argParser(() =>
    command.error(
      `error: ${secretOnCommandLine(option, envName, fileOption)}`,
      {
        exitCode: 2,
        code: 'ferry.secretOnCommandLine'
      }
    )
  );
}
