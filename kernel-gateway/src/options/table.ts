/**
 * What an option table is: each option of a `ferry` command written once (its flag, value, default,
 * help, the environment variable that stands in for it, and the setting it becomes), from which the
 * command line (cli/options.ts), the parsed flags' type, the settings and the reference page
 * (docs/options.md) are all derived.
 */
import type { SecretEnvName } from '../secrets';

/** One option of a command. */
export interface IOptionSpec<Path extends string = string> {
  /** The flag as commander reads it: `--max-kernels <n>`, `--cull-busy`, `--no-auth`. */
  readonly flag: string;
  /** What it does, as `--help` and the reference page say it. */
  readonly help: string;
  /** Turns the text given into the value (a value that must be checked, a repeatable list). */
  readonly parse?: (value: string, previous: never) => unknown;
  /** The only values accepted. */
  readonly choices?: readonly string[];
  /** The value when the option is not given, in the option's own units (MiB, seconds). */
  readonly default?: unknown;
  /** The default as the reference page says it, where the value would not say it (`~/.ferry/state`, `random`). */
  readonly defaultText?: string;
  /** The command refuses to run without it. */
  readonly required?: true;
  /** The environment variable read when the option is not given (`FERRY_TOKEN`). */
  readonly env?: string;
  /**
   * A secret the command line must never carry (`ps` shows it to every user of the host): the
   * option is hidden and refuses any value, naming the variable and the file option to use instead.
   */
  readonly secret?: { readonly env: SecretEnvName; readonly file: string };
  /**
   * The setting the value becomes, as a dotted path into what the command builds
   * (`limits.maxKernels`); several paths set each. Left out: the command reads the flag itself.
   */
  readonly sets?: Path | readonly Path[];
  /** The value as the setting takes it (MiB to bytes, seconds to ms, a path made absolute). */
  readonly to?: (value: never) => unknown;
  /**
   * The setting needs other options too (a TLS certificate and its key): the code beside the table
   * builds it, and `sets` only says which it is.
   */
  readonly combined?: true;
  /**
   * The default is the command line's only: a gateway made in code without the setting behaves
   * otherwise (no state directory: a temporary one).
   */
  readonly commandLineDefault?: true;
  /** More for the reference page than `--help` says (Markdown). */
  readonly notes?: string;
  /**
   * A `--no-` flag that lands in the same value as `false` (`--auth <mode>` and `--no-auth`): its
   * flag, help and notes. The value is then `false`, the option's default, or a value given.
   */
  readonly negatedBy?: {
    readonly flag: `--no-${string}`;
    readonly help: string;
    readonly notes?: string;
  };
}

/** A command's options by the name commander gives each value (`--no-auth`: `auth`). */
export type OptionTable<Path extends string = string> = Readonly<
  Record<string, IOptionSpec<Path>>
>;

/** A heading of a command's options, as the reference page groups them. */
export interface IOptionSection<T extends OptionTable = OptionTable> {
  readonly title: string;
  /** What the reference page says under the title (Markdown). */
  readonly about?: string;
  readonly options: T;
}

/** The options of every section, as one table (a name given twice is a mistake, refused). */
export function mergeSections<S extends readonly IOptionSection[]>(
  sections: S
): Merged<S[number]['options']> {
  const table: Record<string, IOptionSpec> = {};
  for (const section of sections) {
    for (const [name, spec] of Object.entries(section.options)) {
      if (name in table) {
        throw new Error(`option ${name} is written twice`);
      }
      table[name] = spec;
    }
  }
  return table as Merged<S[number]['options']>;
}

/** The tables of union `U`, as one table. */
export type Merged<U> = (
  U extends unknown ? (table: U) => void : never
) extends (table: infer I) => void
  ? { [K in keyof I]: I[K] }
  : never;

/** The value commander hands over for one option (`false` too when a `--no-` flag negates it). */
export type OptionValue<S> = S extends { negatedBy: object }
  ? PlainValue<S> | false
  : PlainValue<S>;

type PlainValue<S> = S extends { parse: (...args: never[]) => infer V }
  ? V
  : S extends { choices: readonly (infer C)[] }
    ? C
    : S extends { flag: `${string}<${string}>` }
      ? string
      : boolean;

/** Whether an option always has a value: a default, a required option, or a `--no-` flag. */
type Always<S> = S extends
  { default: unknown } | { required: true } | { flag: `--no-${string}` }
  ? true
  : false;

/** The options that carry a value (a refused secret carries none). */
type Valued<T> = {
  [K in keyof T]: T[K] extends { secret: object } ? never : K;
}[keyof T];

/** What commander parses a command line into, for the options of table `T`. */
export type Flags<T> = {
  -readonly [
    K in Valued<T> as Always<T[K]> extends true ? K : never
  ]: OptionValue<T[K]>;
} & {
  -readonly [
    K in Valued<T> as Always<T[K]> extends true ? never : K
  ]?: OptionValue<T[K]>;
};

/**
 * Every dotted path into `T` down to its leaves and the objects on the way (`limits`,
 * `limits.maxKernels`), for checking a table's `sets`.
 */
export type SettingPath<
  T,
  Depth extends unknown[] = []
> = Depth['length'] extends 3
  ? never
  : {
      [K in keyof T & string]:
        | K
        | (NonNullable<T[K]> extends
            readonly unknown[] | ((...args: never[]) => unknown)
            ? never
            : NonNullable<T[K]> extends object
              ? `${K}.${SettingPath<NonNullable<T[K]>, [...Depth, unknown]>}`
              : never);
    }[keyof T & string];

/**
 * The settings the flags give, for every option of `table` that `sets` one by itself (a
 * {@link IOptionSpec.combined} setting is built beside the table). An option not given sets its
 * setting to `undefined`, as a setting left unsaid.
 */
export function settingsFrom(
  table: OptionTable,
  flags: object
): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(table)) {
    if (spec.sets === undefined || spec.combined) {
      continue;
    }
    const value = (flags as Record<string, unknown>)[name];
    Private.assign(settings, spec, value);
  }
  return settings;
}

/**
 * The settings the defaults give: each default of `table`, as the setting it becomes, but those that
 * are the command line's only.
 */
export function defaultSettings(table: OptionTable): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const spec of Object.values(table)) {
    const value = defaultOf(spec);
    if (
      spec.sets === undefined ||
      spec.combined ||
      spec.commandLineDefault ||
      value === undefined
    ) {
      continue;
    }
    Private.assign(settings, spec, value);
  }
  return settings;
}

/** An option's value when it is not given: its default, and `true` for a `--no-` flag. */
export function defaultOf(spec: IOptionSpec): unknown {
  return spec.default ?? (spec.flag.startsWith('--no-') ? true : undefined);
}

/** The paths an option sets, as a list. */
export function settingPaths(spec: IOptionSpec): readonly string[] {
  return spec.sets === undefined
    ? []
    : typeof spec.sets === 'string'
      ? [spec.sets]
      : spec.sets;
}

namespace Private {
  /** Set what `spec` sets in `settings` to `value`, converted. */
  export function assign(
    settings: Record<string, unknown>,
    spec: IOptionSpec,
    value: unknown
  ): void {
    const converted =
      spec.to && value !== undefined ? spec.to(value as never) : value;
    for (const path of settingPaths(spec)) {
      const keys = path.split('.');
      let target = settings;
      for (const key of keys.slice(0, -1)) {
        target = (target[key] ??= {}) as Record<string, unknown>;
      }
      target[keys[keys.length - 1]] = converted;
    }
  }
}
