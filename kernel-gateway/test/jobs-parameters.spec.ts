/**
 * Papermill-style parameters on their own: where the injected cell goes, the Python literals it
 * holds, what is refused (with a 400 before anything is queued), and a language whose kernelspec
 * declares its syntax.
 */
import {
  injectParameters,
  JobRequestError,
  parameterSyntax,
  type INotebook
} from '../src';
import { codeCell, notebook } from './notebooks';

const python = parameterSyntax('python3', 'python', undefined);

function sources(nb: INotebook): string[] {
  return nb.cells.map(c => String(c.source));
}

describe('papermill parameters', () => {
  it('replaces an injected cell left by an earlier run instead of adding a second', () => {
    const nb = notebook([
      codeCell('a = 1', ['parameters']),
      codeCell('# Parameters\na = 2\n', ['injected-parameters']),
      codeCell('print(a)')
    ]) as unknown as INotebook;
    injectParameters(nb, { a: 3 }, python);
    expect(sources(nb)).toEqual(['a = 1', '# Parameters\na = 3\n', 'print(a)']);
    expect(nb.cells[1].id).toMatch(/^[0-9a-f]{8}$/);
  });

  it('changes nothing without parameters, whatever the language', () => {
    const nb = notebook([codeCell('x')]) as unknown as INotebook;
    injectParameters(nb, {}, python);
    expect(sources(nb)).toEqual(['x']);
  });

  it('writes Python literals papermill would write', () => {
    const nb = notebook([]) as unknown as INotebook;
    injectParameters(
      nb,
      { s: 'a\\b\n"c"', i: -3, f: 1.5e-7, t: true, n: null, l: [[], {}] },
      python
    );
    expect(nb.cells[0].source).toBe(
      '# Parameters\ns = "a\\\\b\\n\\"c\\""\ni = -3\nf = 1.5e-7\nt = True\nn = None\nl = [[], {}]\n'
    );
  });

  it('refuses keywords as names and values nested too deep, with a 400', () => {
    const refused = (parameters: Record<string, unknown>) => {
      try {
        injectParameters(
          notebook([]) as unknown as INotebook,
          parameters,
          python
        );
      } catch (error) {
        expect(error).toBeInstanceOf(JobRequestError);
        expect((error as JobRequestError).status).toBe(400);
        return (error as Error).message;
      }
      throw new Error('not refused');
    };
    expect(refused({ class: 1 })).toMatch(/class: a keyword/);
    let deep: unknown = 1;
    for (let i = 0; i < 40; i++) {
      deep = [deep];
    }
    expect(refused({ deep })).toMatch(/nested more than 32 levels/);
  });

  it('refuses a language it cannot write, and follows a kernelspec that says how', () => {
    expect(() => parameterSyntax('ir', 'R', {})).toThrow(
      /Kernel ir runs R: Ferry writes parameters in Python, or in a language whose kernelspec says how/
    );
    const r = parameterSyntax('ir', 'R', {
      ferry: { parameters: { assign: '{name} <- {value}', comment: '#' } }
    });
    const nb = notebook([]) as unknown as INotebook;
    injectParameters(nb, { alpha: 0.5, label: 'x' }, r);
    expect(nb.cells[0].source).toBe(
      '# Parameters\nalpha <- 0.5\nlabel <- "x"\n'
    );
  });
});
