/**
 * Jobs against the reference: the same notebook executed by Ferry (a job on the embedded worker)
 * and by Debian's nbclient (`python3-nbclient`, the library behind `jupyter nbconvert --execute`
 * and papermill) gives the same outputs and execution counts, ids and timestamps aside.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { JobsClient } from '../src/cli/jobs-client';
import { startGateway, type ITestGateway } from './helpers';
import { codeCell, notebook } from './notebooks';

const PYTHON = '/usr/bin/python3';

const hasNbclient =
  spawnSync(PYTHON, ['-c', 'import nbclient, nbformat']).status === 0;

/** Run a notebook file through nbclient, as `jupyter nbconvert --execute` does; the result's JSON. */
function nbclientExecute(input: string, output: string): unknown {
  const script = [
    'import sys, nbformat, nbclient',
    'nb = nbformat.read(sys.argv[1], as_version=4)',
    "nbclient.NotebookClient(nb, kernel_name='python3', timeout=60).execute()",
    'nbformat.write(nb, sys.argv[2])'
  ].join('\n');
  const run = spawnSync(PYTHON, ['-c', script, input, output], {
    encoding: 'utf8'
  });
  if (run.status !== 0) {
    throw new Error(`nbclient failed: ${run.stderr}`);
  }
  return JSON.parse(readFileSync(output, 'utf8'));
}

/** What must agree: per cell, its outputs and count, strings joined, volatile fields out. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
function comparable(nb: any): unknown[] {
  const join = (value: unknown) =>
    Array.isArray(value) ? value.join('') : value;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return nb.cells.map((cell: any) => ({
    type: cell.cell_type,
    count: cell.execution_count ?? null,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    outputs: (cell.outputs ?? []).map((output: any) => {
      const copy = { ...output };
      if ('text' in copy) {
        copy.text = join(copy.text);
      }
      if (copy.data) {
        copy.data = Object.fromEntries(
          Object.entries(copy.data).map(([k, v]) => [
            k,
            /json$/.test(k) ? v : join(v)
          ])
        );
      }
      // Memory addresses and such differ between two runs of anything: not what is compared.
      delete copy.transient;
      return copy;
    })
  }));
}

(hasNbclient ? describe : describe.skip)(
  'a job and nbclient give the same executed notebook',
  () => {
    let root: string;
    let gw: ITestGateway;

    beforeAll(async () => {
      root = mkdtempSync(path.join(os.tmpdir(), 'ferry-jobs-reference-'));
      gw = await startGateway({ rootDir: root });
    });

    afterAll(async () => {
      await gw?.close();
      rmSync(root, { recursive: true, force: true });
    });

    it('for streams, results, displays, updates, clears, rich output and markdown', async () => {
      const source = notebook([
        { id: 'md', cell_type: 'markdown', source: '# Title', metadata: {} },
        codeCell('print("out")\nimport sys\nprint("err", file=sys.stderr)'),
        codeCell('for i in range(3):\n    print(i)'),
        codeCell('x = 6 * 7\nx'),
        codeCell(''),
        codeCell(
          'from IPython.display import display, HTML, Markdown\ndisplay(HTML("<b>bold</b>"))\ndisplay(Markdown("*md*"))\n{"a": [1, 2]}'
        ),
        codeCell(
          'from IPython.display import clear_output\nprint("gone")\nclear_output()\nprint("kept")'
        ),
        codeCell(
          'h = display("first", display_id="d1")\nh.update("second")\nprint("after update")'
        ),
        codeCell(
          'import json\nfrom IPython.display import JSON\nJSON({"k": "v"})'
        ),
        codeCell('print("last")\nx + 1')
      ]);
      const file = path.join(root, 'reference.ipynb');
      writeFileSync(file, JSON.stringify(source));
      const reference = nbclientExecute(
        file,
        path.join(root, 'reference.nbclient.ipynb')
      );
      const client = new JobsClient({ url: gw.url, token: gw.token });
      const job = await client.submit({ path: 'reference.ipynb' });
      for await (const _event of client.follow(job.id)) {
        // to its end
      }
      const executed = JSON.parse(
        readFileSync(path.join(root, job.output_path!), 'utf8')
      );
      expect(comparable(executed)).toEqual(comparable(reference));
      // The same timing keys nbclient records, on every cell that ran.
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const keys = (nb: any, i: number) =>
        Object.keys(nb.cells[i].metadata.execution ?? {}).sort();
      const cells = (reference as { cells: { execution_count?: number }[] })
        .cells;
      const ran = cells
        .map((cell, i) => (typeof cell.execution_count === 'number' ? i : -1))
        .filter(i => i >= 0);
      expect(ran.length).toBeGreaterThan(5);
      for (const i of ran) {
        expect(keys(executed, i)).toEqual(keys(reference, i));
      }
    });
  }
);
