/**
 * Parameters as papermill injects them: a code cell tagged `injected-parameters` holding one
 * assignment per value, after the cell tagged `parameters` (at the top when there is none; in place
 * of an earlier injected cell when the notebook already has one), so notebooks written for papermill
 * run unchanged. Python is built in; another language needs its kernelspec to say how, in
 * `metadata.ferry.parameters` (`{"assign": "{name} <- {value}", "comment": "#"}`, values as JSON).
 *
 * @packageDocumentation
 */
import { randomUUID } from 'node:crypto';
import { JobRequestError } from './errors';
import type { INotebook } from './notebook';

/** How parameters are written in a kernel's language. */
export interface IParameterSyntax {
  /** The comment leader (`#`). */
  comment: string;
  /** One assignment, from a name and a value already in the language's literal form. */
  assign(name: string, value: string): string;
  /** A value as a literal of the language. */
  literal(value: unknown): string;
  /** Names that cannot be assigned to (the language's keywords). */
  reserved?: ReadonlySet<string>;
}

/** The tag of the cell whose values the injected cell overrides (papermill's). */
export const PARAMETERS_TAG = 'parameters';

/** The tag of the injected cell (papermill's). */
export const INJECTED_TAG = 'injected-parameters';

/**
 * The syntax for a kernel's language: Python's, or what the kernelspec's
 * `metadata.ferry.parameters` says.
 *
 * @throws JobRequestError 400 for a language Ferry cannot write parameters in.
 */
export function parameterSyntax(
  kernelName: string,
  language: string,
  kernelspecMetadata: Record<string, unknown> | undefined
): IParameterSyntax {
  const declared = Private.record(
    Private.record(kernelspecMetadata?.ferry).parameters
  );
  if (typeof declared.assign === 'string') {
    const template = declared.assign;
    const comment =
      typeof declared.comment === 'string' ? declared.comment : '#';
    return {
      comment,
      assign: (name, value) =>
        template.replace('{name}', () => name).replace('{value}', () => value),
      literal: value => JSON.stringify(value)
    };
  }
  if (language.toLowerCase() === 'python') {
    return Private.PYTHON;
  }
  throw new JobRequestError(
    400,
    `Kernel ${kernelName} runs ${language || 'an unknown language'}: Ferry writes parameters in Python, or in a language whose kernelspec says how (metadata.ferry.parameters: {"assign": "{name} <- {value}", "comment": "#"})`
  );
}

/**
 * Inject `parameters` into `notebook` (in place) as papermill does; nothing changes when there are
 * none.
 *
 * @throws JobRequestError 400 for a value the language cannot take (not finite, too deep).
 */
export function injectParameters(
  notebook: INotebook,
  parameters: Record<string, unknown>,
  syntax: IParameterSyntax
): void {
  const names = Object.keys(parameters);
  if (names.length === 0) {
    return;
  }
  const lines = [`${syntax.comment} Parameters`];
  for (const name of names) {
    if (syntax.reserved?.has(name)) {
      throw new JobRequestError(
        400,
        `Parameter ${name}: a keyword of the kernel's language cannot be a parameter's name`
      );
    }
    let literal: string;
    try {
      literal = syntax.literal(parameters[name]);
    } catch (error) {
      throw new JobRequestError(
        400,
        `Parameter ${name}: ${(error as Error).message}`
      );
    }
    lines.push(syntax.assign(name, literal));
  }
  const cell: Record<string, unknown> = {
    cell_type: 'code',
    execution_count: null,
    metadata: { tags: [INJECTED_TAG] },
    outputs: [],
    source: lines.join('\n') + '\n'
  };
  if (Private.hasCellIds(notebook)) {
    cell.id = randomUUID().slice(0, 8);
  }
  const cells = notebook.cells;
  const injected = cells.findIndex(c => Private.tagged(c, INJECTED_TAG));
  if (injected >= 0) {
    cells.splice(injected, 1, cell);
    return;
  }
  const parametersCell = cells.findIndex(c =>
    Private.tagged(c, PARAMETERS_TAG)
  );
  cells.splice(parametersCell + 1, 0, cell);
}

namespace Private {
  export function record(value: unknown): Record<string, unknown> {
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  }

  export function tagged(cell: Record<string, unknown>, tag: string): boolean {
    const tags = record(cell.metadata).tags;
    return Array.isArray(tags) && tags.includes(tag);
  }

  /** Whether the notebook's cells carry ids (nbformat 4.5 and later). */
  export function hasCellIds(notebook: INotebook): boolean {
    return (
      notebook.nbformat === 4 &&
      typeof notebook.nbformat_minor === 'number' &&
      notebook.nbformat_minor >= 5
    );
  }

  /** Values deeper than this are refused: a literal is written by recursion. */
  const MAX_DEPTH = 32;

  /** A JSON value as a Python literal (what papermill's PythonTranslator writes for it). */
  function python(value: unknown, depth = 0): string {
    if (depth > MAX_DEPTH) {
      throw new Error(`nested more than ${MAX_DEPTH} levels deep`);
    }
    if (value === null || value === undefined) {
      return 'None';
    }
    switch (typeof value) {
      case 'boolean':
        return value ? 'True' : 'False';
      case 'number':
        if (!Number.isFinite(value)) {
          throw new Error(`${value} is not a finite number`);
        }
        return String(value);
      case 'string':
        // A JSON string is a Python string literal with the same value.
        return JSON.stringify(value);
    }
    if (Array.isArray(value)) {
      return `[${value.map(v => python(v, depth + 1)).join(', ')}]`;
    }
    if (typeof value === 'object') {
      return `{${Object.entries(value as Record<string, unknown>)
        .map(([k, v]) => `${JSON.stringify(k)}: ${python(v, depth + 1)}`)
        .join(', ')}}`;
    }
    throw new Error(`a ${typeof value} cannot be a parameter`);
  }

  export const PYTHON: IParameterSyntax = {
    comment: '#',
    assign: (name, value) => `${name} = ${value}`,
    literal: value => python(value),
    // Python 3's keywords (keyword.kwlist).
    reserved: new Set(
      'False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield'.split(
        ' '
      )
    )
  };
}
