/**
 * The parameters of "Run as Job…": what is read from the cell tagged `parameters` (papermill's
 * convention), how a typed value becomes the job's JSON value, and the form that sends only what
 * the user changed.
 */
import { parseValue, ParametersForm, readParameters } from '../src';

describe('readParameters', () => {
  it("reads a parameters cell's assignments in order, with their source as written", () => {
    expect(
      readParameters(
        [
          '# Parameters of the sweep',
          'lr = 0.01  # the learning rate',
          'epochs=3',
          '',
          'layers = [64, 32]',
          'name = "baseline"',
          'import math',
          'print(lr)',
          '    indented = 1',
          '2x = 1'
        ].join('\n')
      )
    ).toEqual([
      { name: 'lr', source: '0.01' },
      { name: 'epochs', source: '3' },
      { name: 'layers', source: '[64, 32]' },
      { name: 'name', source: '"baseline"' }
    ]);
  });

  it('finds none in an empty cell', () => {
    expect(readParameters('')).toEqual([]);
  });
});

describe('parseValue', () => {
  it.each([
    ['True', true],
    ['False', false],
    ['None', null],
    ['3', 3],
    ['-0.5', -0.5],
    ['1e-3', 0.001],
    ['.5', 0.5],
    ['"quoted"', 'quoted'],
    ["'single'", 'single'],
    ['[1, 2]', [1, 2]],
    ['{"a": 1}', { a: 1 }],
    ['[not json', '[not json'],
    ['  plain words  ', 'plain words'],
    ['1.2.3', '1.2.3']
  ])('reads %s as ferry run -p does', (text, value) => {
    expect(parseValue(text)).toEqual(value);
  });
});

describe('ParametersForm', () => {
  it('shows a typed field per parameter and sends only the changed ones, as JSON values', () => {
    const form = new ParametersForm([
      { name: 'lr', source: '0.01' },
      { name: 'epochs', source: '3' },
      { name: 'tag', source: '"a"' },
      { name: 'debug', source: 'False' },
      { name: 'layers', source: '[64, 32]' }
    ]);
    const inputs = Array.from(
      form.node.querySelectorAll<HTMLInputElement>(
        '.jp-FerryJobParameters-value'
      )
    );
    // A number box, a text box holding the string itself, a check box, and the literal.
    expect(
      inputs.map(input => [
        input.getAttribute('aria-label'),
        input.type,
        input.type === 'checkbox' ? input.checked : input.value
      ])
    ).toEqual([
      ['lr', 'number', '0.01'],
      ['epochs', 'number', '3'],
      ['tag', 'text', 'a'],
      ['debug', 'checkbox', false],
      ['layers', 'text', '[64, 32]']
    ]);
    expect(form.getValue()).toEqual({});
    inputs[0].value = '0.5';
    inputs[1].value = '3';
    inputs[2].value = 'b';
    inputs[3].checked = true;
    expect(form.getValue()).toEqual({ lr: 0.5, tag: 'b', debug: true });
    form.dispose();
  });

  it('edits the values as Python literals on demand, keeping what was changed', () => {
    const form = new ParametersForm([
      { name: 'tag', source: "'baseline'" },
      { name: 'debug', source: 'False' }
    ]);
    const typed = form.node.querySelectorAll<HTMLInputElement>(
      '.jp-FerryJobParameters-value'
    );
    typed[0].value = 'sweep';
    const toggle = form.node.querySelector<HTMLInputElement>(
      '.jp-FerryJobParameters-literalToggle'
    )!;
    toggle.checked = true;
    toggle.dispatchEvent(new Event('change'));
    const literal = form.node.querySelectorAll<HTMLInputElement>(
      '.jp-FerryJobParameters-value'
    );
    expect([...literal].map(input => input.value)).toEqual([
      '"sweep"',
      'False'
    ]);
    literal[1].value = 'None';
    expect(form.getValue()).toEqual({ tag: 'sweep', debug: null });
    form.dispose();
  });

  it('says so when the notebook has no parameters cell', () => {
    const form = new ParametersForm([]);
    expect(form.node.textContent).toBe(
      'No cell of this notebook is tagged "parameters": it runs as it is.'
    );
    expect(form.getValue()).toEqual({});
    form.dispose();
  });
});
