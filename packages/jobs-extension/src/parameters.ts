/**
 * The parameters form of "Run as Job…": one field per assignment of the notebook's cell tagged
 * `parameters` (papermill's convention), its current value as the default.
 */
import {
  nullTranslator,
  type ITranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

/** One parameter of the `parameters` cell. */
export interface IParameter {
  name: string;
  /** Its value as the cell writes it (Python source). */
  source: string;
}

/** The assignments (`name = value`) of a `parameters` cell's source, in order. */
export function readParameters(source: string): IParameter[] {
  const parameters: IParameter[] = [];
  for (const line of source.split('\n')) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.+?)\s*(#.*)?$/.exec(line);
    if (match) {
      parameters.push({ name: match[1], source: match[2] });
    }
  }
  return parameters;
}

/**
 * A value typed into the form as the job's JSON value: `True`, `False`, `None`, numbers, quoted
 * strings and JSON lists/objects as such; anything else a string (as `ferry run -p` reads them).
 */
export function parseValue(text: string): unknown {
  const trimmed = text.trim();
  switch (trimmed) {
    case 'True':
      return true;
    case 'False':
      return false;
    case 'None':
      return null;
  }
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(trimmed)) {
    return Number(trimmed);
  }
  const quoted = /^(['"])(.*)\1$/s.exec(trimmed);
  if (quoted) {
    return quoted[2];
  }
  if (/^[[{]/.test(trimmed)) {
    try {
      return JSON.parse(trimmed) as unknown;
    } catch {
      return trimmed;
    }
  }
  return trimmed;
}

/** The kind of field a parameter's value gets. */
export type ParameterKind = 'boolean' | 'number' | 'string' | 'literal';

/** What field a value written as `source` in the cell gets, and that field's first value. */
export function typedField(source: string): {
  kind: ParameterKind;
  value: string | boolean;
} {
  const value = parseValue(source);
  const trimmed = source.trim();
  if (typeof value === 'boolean') {
    return { kind: 'boolean', value };
  }
  if (typeof value === 'number') {
    return { kind: 'number', value: trimmed };
  }
  if (typeof value === 'string' && /^(['"]).*\1$/s.test(trimmed)) {
    return { kind: 'string', value };
  }
  // Lists, dicts, None, expressions: only the literal says them.
  return { kind: 'literal', value: trimmed };
}

/**
 * The form: a typed field per parameter (a text box for a string, a number box for a number, a
 * check box for True/False), and "Edit as Python literals" for what the types do not say (a
 * parameter's name is code: never translated).
 */
export class ParametersForm extends Widget {
  constructor(
    parameters: IParameter[],
    translator: ITranslator = nullTranslator,
    options: { schedule?: boolean } = {}
  ) {
    super();
    const trans = translator.load('ferry');
    this.addClass('jp-FerryJobParameters');
    this._parameters = parameters;
    if (options.schedule) {
      this._start = Private.startField(this.node, trans);
    }
    this._fieldsNode = document.createElement('div');
    this._fieldsNode.className = 'jp-FerryJobParameters-fields';
    if (parameters.length === 0) {
      const empty = document.createElement('p');
      empty.className = 'jp-FerryJobParameters-empty';
      empty.textContent = trans.__(
        'No cell of this notebook is tagged "parameters": it runs as it is.'
      );
      this.node.append(empty);
      return;
    }
    const advanced = document.createElement('label');
    advanced.className = 'jp-FerryJobParameters-advanced';
    const toggle = document.createElement('input');
    toggle.type = 'checkbox';
    toggle.className = 'jp-FerryJobParameters-literalToggle';
    toggle.addEventListener('change', () => this._draw(toggle.checked));
    advanced.append(toggle, trans.__('Edit as Python literals'));
    advanced.title = trans.__(
      'Each value as Python source, as the parameters cell writes it: lists, dicts, None'
    );
    this.node.append(this._fieldsNode, advanced);
    this._draw(false);
  }

  /** When to run the job (an ISO time), or undefined for now. */
  get startAt(): string | undefined {
    const value = this._start?.value;
    // A datetime-local field's value is the page's local time, without its zone.
    return value ? new Date(value).toISOString() : undefined;
  }

  /** Whether the values are edited as Python literals. */
  get literal(): boolean {
    return this._literal;
  }

  /** The values changed from the cell's, as JSON values (what the job injects). */
  getValue(): Record<string, unknown> {
    const values: Record<string, unknown> = {};
    for (const field of this._fields) {
      const value = this._read(field);
      if (value !== undefined) {
        values[field.parameter.name] = value;
      }
    }
    return values;
  }

  /** A field's value when changed from the cell's; undefined when unchanged. */
  private _read(field: Private.IField): unknown {
    const { parameter, input, kind } = field;
    if (kind === 'literal') {
      return input.value.trim() !== parameter.source.trim()
        ? parseValue(input.value)
        : undefined;
    }
    const first = typedField(parameter.source).value;
    if (kind === 'boolean') {
      return input.checked !== first ? input.checked : undefined;
    }
    if (kind === 'number') {
      return input.value.trim() !== String(first).trim() && input.value !== ''
        ? Number(input.value)
        : undefined;
    }
    return input.value !== first ? input.value : undefined;
  }

  /** Draws the fields, typed or as literals; what was changed carries over. */
  private _draw(literal: boolean): void {
    const carried = new Map<string, unknown>();
    for (const field of this._fields) {
      const value = this._read(field);
      if (value !== undefined) {
        carried.set(field.parameter.name, value);
      }
    }
    this._literal = literal;
    this._fields = [];
    this._fieldsNode.replaceChildren();
    for (const parameter of this._parameters) {
      const typed = typedField(parameter.source);
      const kind: ParameterKind = literal ? 'literal' : typed.kind;
      const label = document.createElement('label');
      label.className = 'jp-FerryJobParameters-field';
      label.dataset.kind = kind;
      const name = document.createElement('span');
      name.className = 'jp-FerryJobParameters-name';
      name.textContent = parameter.name;
      const input = document.createElement('input');
      input.dataset.name = parameter.name;
      input.setAttribute('aria-label', parameter.name);
      const changed = carried.get(parameter.name);
      if (kind === 'boolean') {
        input.type = 'checkbox';
        input.className = 'jp-FerryJobParameters-value';
        input.checked = (changed ?? typed.value) === true;
      } else {
        input.className = 'jp-mod-styled jp-FerryJobParameters-value';
        if (kind === 'number') {
          input.type = 'number';
          input.step = 'any';
        }
        input.value =
          changed === undefined
            ? kind === 'literal'
              ? parameter.source
              : String(typed.value)
            : kind === 'literal'
              ? Private.literal(changed)
              : String(changed);
      }
      label.append(name, input);
      this._fieldsNode.append(label);
      this._fields.push({ parameter, input, kind });
    }
  }

  private readonly _parameters: IParameter[];
  private readonly _fieldsNode: HTMLElement;
  private _fields: Private.IField[] = [];
  private _literal = false;
  private _start: HTMLInputElement | undefined;
}

/** A JSON value written as Python source (`True`, `None`, `"text"`, `[1, 2]`). */
export function pythonLiteral(value: unknown): string {
  return Private.literal(value);
}

namespace Private {
  /** "Start: now, or at [time]": the job waits, scheduled, until the time given. */
  export function startField(
    node: HTMLElement,
    trans: TranslationBundle
  ): HTMLInputElement {
    const label = document.createElement('label');
    label.className = 'jp-FerryJobParameters-start';
    const name = document.createElement('span');
    name.className = 'jp-FerryJobParameters-name';
    name.textContent = trans.__('Start at');
    const input = document.createElement('input');
    input.type = 'datetime-local';
    input.className = 'jp-mod-styled jp-FerryJobStartAt';
    input.setAttribute('aria-label', trans.__('Start at'));
    input.title = trans.__(
      'Leave empty to run now; else the job waits, scheduled, until then (your local time)'
    );
    const hint = document.createElement('span');
    hint.className = 'jp-FerryJobParameters-hint';
    hint.textContent = trans.__('empty: now');
    label.append(name, input, hint);
    node.append(label);
    return input;
  }

  export interface IField {
    parameter: IParameter;
    input: HTMLInputElement;
    kind: ParameterKind;
  }

  /** A JSON value written as Python source. */
  export function literal(value: unknown): string {
    if (value === true) {
      return 'True';
    }
    if (value === false) {
      return 'False';
    }
    if (value === null) {
      return 'None';
    }
    return JSON.stringify(value);
  }
}
