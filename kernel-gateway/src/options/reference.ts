/**
 * The options reference (docs/options.md), written from the option tables: `npm run docs:options`
 * writes it, and a test fails when the page and the tables disagree.
 */
import { GATEWAY_OPTION_SECTIONS } from './gateway';
import {
  defaultOf,
  settingPaths,
  type IOptionSection,
  type IOptionSpec
} from './table';
import { WORKER_OPTION_SECTIONS } from './worker';

/** The reference page, in Markdown (not yet laid out by prettier). */
export function optionsReference(): string {
  return [
    '# Options',
    '',
    '<!-- Written by `npm run docs:options` from kernel-gateway/src/options/: edit the tables there, not this page. -->',
    '',
    'Every option of `ferry gateway` and `ferry worker`, as `--help` lists them. Pass them after `--` to',
    '`npm start`: `npm start -- --port 9999 --root-dir ~/notebooks`. What the limits do is in',
    '[Operations](operations.md#limits); remote workers, Slurm and Kubernetes in [Deployment](deployment.md).',
    '',
    'Each option is written once, in `kernel-gateway/src/options/`: its flag, default, help and the',
    "setting it becomes (**sets**: the `createGateway` option, or the worker's where a heading says so).",
    'A token is never taken on a command line, where `ps` shows it to every user of the host: it comes',
    'from the variable named beside its file option, or from the file.',
    '',
    ...Private.command('ferry gateway', GATEWAY_OPTION_SECTIONS),
    ...Private.command('ferry worker', WORKER_OPTION_SECTIONS)
  ].join('\n');
}

namespace Private {
  export function command(
    name: string,
    sections: readonly IOptionSection[]
  ): string[] {
    const lines = [`## \`${name}\``, ''];
    for (const section of sections) {
      lines.push(`### ${section.title}`, '');
      if (section.about) {
        lines.push(section.about, '');
      }
      const specs = Object.values(section.options);
      // The settings column only where an option of the section sets one.
      const sets = specs.some(spec => settingPaths(spec).length > 0);
      const header = [
        'option',
        'default',
        'what it does',
        ...(sets ? ['sets'] : [])
      ];
      lines.push(
        `| ${header.join(' | ')} |`,
        `| ${header.map(() => '---').join(' | ')} |`
      );
      for (const spec of specs) {
        lines.push(row(spec, sets));
        if (spec.negatedBy) {
          lines.push(row({ ...spec.negatedBy, sets: spec.sets }, sets));
        }
      }
      lines.push('');
    }
    return lines;
  }

  function row(spec: IOptionSpec, sets: boolean): string {
    const option = [code(spec.flag), ...(spec.env ? [code(spec.env)] : [])];
    const what = spec.secret
      ? `refused: a token on a command line is readable by every user of the host (\`ps\`); set ${code(spec.secret.env)} or use ${code(spec.secret.file)}`
      : [escape(spec.help), ...(spec.notes ? [spec.notes] : [])].join('; ');
    const cells = [
      option.join(', '),
      spec.secret ? 'refused' : defaultText(spec),
      what,
      ...(sets ? [settingPaths(spec).map(code).join(', ')] : [])
    ];
    return `| ${cells.join(' | ')} |`;
  }

  function defaultText(spec: IOptionSpec): string {
    if (spec.defaultText !== undefined) {
      return spec.defaultText;
    }
    if (spec.required) {
      return 'required';
    }
    const value = defaultOf(spec);
    if (spec.flag.startsWith('--no-') || value === undefined) {
      return '';
    }
    if (typeof value === 'boolean') {
      return value ? 'on' : 'off';
    }
    if (Array.isArray(value)) {
      return value.length === 0 ? 'none' : value.map(code).join(', ');
    }
    return typeof value === 'string' ? code(value) : String(value);
  }

  function code(text: string): string {
    return `\`${text}\``;
  }

  /** Help text as Markdown: its `*` and `|` are characters, not emphasis and cells. */
  function escape(text: string): string {
    return text.replace(/([*|])/g, '\\$1');
  }
}
