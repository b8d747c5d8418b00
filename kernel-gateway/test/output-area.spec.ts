/**
 * Kernel output applied to a notebook cell is one mechanism (`protocol/output-area.ts`) with two
 * adapters: the rooms' Y doc (server-side execution, read back through JupyterLab's own
 * @jupyter/ydoc model) and a job's notebook JSON. Each case runs through both and must give the
 * same outputs. The stream cases' expectations are what JupyterLab 4.6's output area model makes
 * of the same messages (its `processText`: `\r` returns to the line's start, `\b` deletes).
 */
import { YNotebook, type YCodeCell } from '@jupyter/ydoc';
import { CellOutputs, DocDisplayIds } from '../src/rooms';
import {
  DisplayIds,
  JsonOutputs,
  OutputArea,
  OutputBudget
} from '../src/protocol';

/** One message to a cell: its type, content, and which cell (default the first). */
type Step = [msgType: string, content: Record<string, unknown>, cell?: number];

/** A notebook of `cells` code cells written through one adapter. */
interface IHarness {
  start(cell: number): void;
  apply(step: Step): void;
  outputs(cell: number): unknown[];
  dispose(): void;
}

const BUDGET = 1 << 20;

function jsonHarness(cells: number): IHarness {
  const notebook = Array.from({ length: cells }, () => ({
    outputs: [] as Record<string, unknown>[]
  }));
  const displays = new DisplayIds<Record<string, unknown>>();
  const budget = new OutputBudget({ maxBytes: BUDGET, notice: 'over\n' });
  const areas: OutputArea<Record<string, unknown>>[] = [];
  return {
    start: cell => {
      areas[cell] = new OutputArea({
        list: new JsonOutputs(notebook[cell]),
        displays,
        budget
      });
      areas[cell].clear();
    },
    apply: ([msgType, content, cell = 0]) => {
      areas[cell].apply(msgType, content);
    },
    // As the notebook is saved: JSON.
    outputs: cell => JSON.parse(JSON.stringify(notebook[cell].outputs)),
    dispose: () => undefined
  };
}

function yHarness(cells: number): IHarness {
  const model = YNotebook.create();
  const ids = Array.from(
    { length: cells },
    () => model.addCell({ cell_type: 'code', source: '' }).id
  );
  const displays = new DocDisplayIds();
  const writers: CellOutputs[] = [];
  const transact = (change: () => void) =>
    model.ydoc.transact(change, 'server');
  return {
    start: cell => {
      writers[cell] = new CellOutputs({
        doc: model.ydoc,
        cellId: ids[cell],
        displays,
        budgetBytes: BUDGET
      });
      transact(() => writers[cell].start());
    },
    apply: ([msgType, content, cell = 0]) =>
      transact(() =>
        writers[cell].output(msgType, content, JSON.stringify(content).length)
      ),
    outputs: cell =>
      (model.cells.find(c => c.id === ids[cell]) as YCodeCell).toJSON()
        .outputs as unknown[],
    dispose: () => model.dispose()
  };
}

const stream = (text: string, name = 'stdout'): Step => [
  'stream',
  { name, text }
];
const display = (text: string, id?: string, cell = 0): Step => [
  'display_data',
  {
    data: { 'text/plain': text },
    metadata: {},
    ...(id ? { transient: { display_id: id } } : {})
  },
  cell
];
const update = (text: string, id: string, cell = 0): Step => [
  'update_display_data',
  { data: { 'text/plain': text }, metadata: {}, transient: { display_id: id } },
  cell
];
const clear = (wait: boolean, cell = 0): Step => [
  'clear_output',
  { wait },
  cell
];
const streamOutput = (text: string, name = 'stdout') => ({
  output_type: 'stream',
  name,
  text
});
const displayOutput = (text: string) => ({
  output_type: 'display_data',
  data: { 'text/plain': text },
  metadata: {}
});

/** A case: the cells that run (in order), the messages, and each cell's outputs after. */
interface ICase {
  what: string;
  cells?: number;
  steps: Step[];
  expected: unknown[][];
}

const CASES: ICase[] = [
  {
    what: 'a cell that prints in several flushes saves one stream output',
    steps: [stream('0\n'), stream('1\n'), stream('2'), stream('\n')],
    expected: [[streamOutput('0\n1\n2\n')]]
  },
  {
    what: 'another stream, or other output between, begins a new output',
    steps: [
      stream('a\n'),
      stream('b\n', 'stderr'),
      stream('c\n'),
      display('d'),
      stream('e\n')
    ],
    expected: [
      [
        streamOutput('a\n'),
        streamOutput('b\n', 'stderr'),
        streamOutput('c\n'),
        displayOutput('d'),
        streamOutput('e\n')
      ]
    ]
  },
  {
    what: "carriage returns leave a progress bar's last state",
    steps: [
      stream('started\n'),
      stream('0%'),
      stream('\r50%'),
      stream('\r100%\n'),
      stream('done\n')
    ],
    expected: [[streamOutput('started\n100%\ndone\n')]]
  },
  {
    what: 'a carriage return in one flush, text overwritten only as far as it goes',
    steps: [stream('xyz\rA\n'), stream('abc\rX'), stream('Y'), stream('\n')],
    expected: [[streamOutput('Ayz\nXYc\n')]]
  },
  {
    what: 'backspaces, as JupyterLab applies them',
    steps: [
      stream('abc'),
      stream('\b\bX\n'),
      stream('abcdef\r12\b3\n'),
      stream('line\r'),
      stream('12'),
      stream('\b'),
      stream('\n')
    ],
    expected: [[streamOutput('aX\n13ef\n1e\n')]]
  },
  {
    what: 'clear_output(wait=True) clears at the next output, not before',
    cells: 2,
    steps: [
      stream('old\n'),
      clear(true),
      stream('new\n'),
      stream('kept\n', 'stdout'),
      ['stream', { name: 'stdout', text: 'still here\n' }, 1],
      clear(true, 1)
    ],
    expected: [[streamOutput('new\nkept\n')], [streamOutput('still here\n')]]
  },
  {
    what: 'clear_output clears at once, and a progress bar starts afresh after it',
    steps: [stream('abc'), clear(false), stream('\rX'), stream('Y\n')],
    expected: [[streamOutput('XY\n')]]
  },
  {
    what: 'a display update reaches its outputs, in this cell and an earlier one',
    cells: 2,
    steps: [
      display('first', 'd1'),
      display('other', 'd2'),
      display('again', 'd1', 1),
      update('second', 'd1', 1),
      update('nothing', 'unknown', 1)
    ],
    expected: [
      [displayOutput('second'), displayOutput('other')],
      [displayOutput('second')]
    ]
  },
  {
    what: 'a cleared output is no longer updated, and an update waits for no clear',
    steps: [
      display('shown', 'd1'),
      clear(false),
      display('kept'),
      clear(true),
      update('updated', 'd1')
    ],
    expected: [[displayOutput('kept')]]
  },
  {
    what: 'results and errors as nbformat keeps them; other messages change nothing',
    steps: [
      ['status', { execution_state: 'busy' }],
      [
        'execute_result',
        { execution_count: 3, data: { 'text/plain': '42' }, metadata: {} }
      ],
      [
        'error',
        { ename: 'ValueError', evalue: 'no', traceback: ['line 1', 'line 2'] }
      ]
    ],
    expected: [
      [
        {
          output_type: 'execute_result',
          execution_count: 3,
          data: { 'text/plain': '42' },
          metadata: {}
        },
        {
          output_type: 'error',
          ename: 'ValueError',
          evalue: 'no',
          traceback: ['line 1', 'line 2']
        }
      ]
    ]
  }
];

// @jupyter/ydoc reads types before they are in a doc when it makes a cell: yjs warns each time.
const warn = console.warn;
beforeAll(() => {
  jest.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => {
    if (!String(args[0]).includes('Invalid access')) {
      warn(...args);
    }
  });
});

describe.each([
  ['a room (Y doc)', yHarness],
  ["a job's notebook (JSON)", jsonHarness]
])('kernel output applied to cells of %s', (_name, harness) => {
  it.each(CASES.map(c => [c.what, c] as const))('%s', (_what, c) => {
    const cells = c.cells ?? 1;
    const notebook = harness(cells);
    try {
      // Cells start in order, as runs do; each step goes to its cell.
      let started = -1;
      for (const step of c.steps) {
        const cell = step[2] ?? 0;
        while (started < cell) {
          notebook.start(++started);
        }
        notebook.apply(step);
      }
      while (started < cells - 1) {
        notebook.start(++started);
      }
      expect(
        Array.from({ length: cells }, (_, i) => notebook.outputs(i))
      ).toEqual(c.expected);
    } finally {
      notebook.dispose();
    }
  });
});

describe('OutputArea', () => {
  it('returns what each message added, as the kernel sent it, and a spent budget once', () => {
    const cell = { outputs: [] as Record<string, unknown>[] };
    const area = new OutputArea({
      list: new JsonOutputs(cell),
      displays: new DisplayIds(),
      budget: new OutputBudget({ maxBytes: 120, notice: 'over\n' })
    });
    expect(area.apply('stream', { name: 'stdout', text: '0%' })).toEqual([
      streamOutput('0%')
    ]);
    expect(area.apply('stream', { name: 'stdout', text: '\r99%' })).toEqual([
      streamOutput('\r99%')
    ]);
    expect(
      area.apply('stream', { name: 'stdout', text: 'x'.repeat(100) })
    ).toEqual([streamOutput('over\n', 'stderr')]);
    expect(area.apply('stream', { name: 'stdout', text: 'more' })).toEqual([]);
    expect(cell.outputs).toEqual([
      streamOutput('99%'),
      streamOutput('over\n', 'stderr')
    ]);
  });

  it('keeps a long stream output growing in place (thousands of progress bars, one output)', () => {
    const cell = { outputs: [] as Record<string, unknown>[] };
    const area = new OutputArea({
      list: new JsonOutputs(cell),
      displays: new DisplayIds(),
      budget: new OutputBudget({ maxBytes: 1 << 30, notice: '' })
    });
    let expected = '';
    for (let i = 0; i < 3000; i++) {
      for (const text of [`${i}: 0%`, `\r${i}: 50%`, `\r${i}: 100%\n`]) {
        area.apply('stream', { name: 'stdout', text });
      }
      expected += `${i}: 100%\n`;
    }
    expect(cell.outputs).toEqual([streamOutput(expected)]);
  });
});
