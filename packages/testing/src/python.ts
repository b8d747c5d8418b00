/**
 * Python without a module: for tests of what a kernel says where numpy or torch is missing,
 * whatever the machine has installed.
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Python that makes these top-level modules fail to import, as where they are not installed
 * (`ModuleNotFoundError: No module named 'numpy'`), whatever the machine has: run it first.
 *
 * @param modules - Top-level module names (`numpy`).
 */
export function pythonWithout(modules: readonly string[]): string {
  return `import sys
class FerryTestHidden:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition('.')[0] in ${JSON.stringify(modules)}:
            raise ModuleNotFoundError('No module named %r' % name, name=name)
sys.meta_path.insert(0, FerryTestHidden)
del FerryTestHidden
`;
}

/**
 * Write a kernelspec of Debian's real ipykernel in whose Python these modules cannot be imported.
 *
 * @param dataDir - A Jupyter data directory (for `JUPYTER_PATH`).
 * @param name - The kernelspec's name.
 * @param modules - What the kernel's Python lacks.
 */
export function writeKernelspecWithout(
  dataDir: string,
  name: string,
  modules: readonly string[]
): void {
  const dir = join(dataDir, 'kernels', name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'kernel.json'),
    JSON.stringify({
      argv: [
        '/usr/bin/python3',
        '-c',
        `${pythonWithout(modules)}from ipykernel import kernelapp\nkernelapp.launch_new_instance()\n`,
        '-f',
        '{connection_file}'
      ],
      display_name: `Python 3 without ${modules.join(', ')}`,
      language: 'python'
    })
  );
}
