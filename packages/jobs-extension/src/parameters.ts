/**
 * The parameters form of "Run as Job…": one field per assignment of the notebook's cell tagged
 * `parameters` (papermill's convention), its current value as the default.
 */
import { nullTranslator, type ITranslator } from '@jupyterlab/translation';
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

/** The form: a labelled field per parameter (a parameter's name is code: never translated). */
export class ParametersForm extends Widget {
  constructor(
    parameters: IParameter[],
    translator: ITranslator = nullTranslator
  ) {
    super();
    const trans = translator.load('ferry');
    this.addClass('jp-FerryJobParameters');
    if (parameters.length === 0) {
      const empty = document.createElement('p');
      empty.className = 'jp-FerryJobParameters-empty';
      empty.textContent = trans.__(
        'No cell of this notebook is tagged "parameters": it runs as it is.'
      );
      this.node.append(empty);
    }
    for (const parameter of parameters) {
      const label = document.createElement('label');
      label.className = 'jp-FerryJobParameters-field';
      const name = document.createElement('span');
      name.className = 'jp-FerryJobParameters-name';
      name.textContent = parameter.name;
      const input = document.createElement('input');
      input.className = 'jp-mod-styled jp-FerryJobParameters-value';
      input.value = parameter.source;
      input.dataset.name = parameter.name;
      input.setAttribute('aria-label', parameter.name);
      label.append(name, input);
      this.node.append(label);
      this._fields.push({ parameter, input });
    }
  }

  /** The values changed from the cell's, as JSON values (what the job injects). */
  getValue(): Record<string, unknown> {
    const values: Record<string, unknown> = {};
    for (const { parameter, input } of this._fields) {
      if (input.value.trim() !== parameter.source.trim()) {
        values[parameter.name] = parseValue(input.value);
      }
    }
    return values;
  }

  private _fields: { parameter: IParameter; input: HTMLInputElement }[] = [];
}
