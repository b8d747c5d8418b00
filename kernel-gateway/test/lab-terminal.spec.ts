/// <reference lib="dom" />
/**
 * JupyterLab's terminal in the hosted lab, in Chromium: `ferry gateway` as `npm start` runs it, a
 * simulated GPU (no GPU here), a real pty running bash, JupyterLab 4.6.4's own terminal extension
 * (xterm.js) typed into as a user types. What the terminal shows is read from xterm's screen buffer.
 */
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { startKernel } from './helpers';
import {
  SCREENSHOTS,
  appRestored,
  browserMissing,
  currentKernelId,
  newNotebook,
  openLabPage,
  screenshotStep,
  startLab,
  stopLab,
  type ICommands,
  type ILab
} from './lab-pages';
import { useOwnHome } from './terminal-clients';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(120_000);

useOwnHome();
describeInBrowser('a terminal in the hosted JupyterLab, in Chromium', () => {
  let lab: ILab;
  let page: Page;

  beforeAll(async () => {
    lab = await startLab('lab-term', {}, ['--simulate', 'gpu:H100:1']);
    page = await openLabPage(lab);
  });

  afterEach(async () => {
    await screenshotStep(page);
  });

  afterAll(() => stopLab(lab));

  /** The lines xterm shows in the terminal in front, trailing blanks dropped. */
  function screen(): Promise<string> {
    return page.evaluate(() => {
      const app = (
        window as unknown as {
          jupyterapp: {
            shell: {
              currentWidget: {
                content?: {
                  _term?: {
                    buffer: {
                      active: {
                        length: number;
                        getLine(
                          i: number
                        ):
                          | { translateToString(trim: boolean): string }
                          | undefined;
                      };
                    };
                  };
                };
              } | null;
            };
          };
        }
      ).jupyterapp;
      const buffer = app.shell.currentWidget?.content?._term?.buffer.active;
      const lines: string[] = [];
      for (let i = 0; buffer && i < buffer.length; i++) {
        lines.push(buffer.getLine(i)?.translateToString(true) ?? '');
      }
      return lines.join('\n');
    });
  }

  /** Wait until the terminal in front shows `pattern`; its match. */
  async function shows(pattern: RegExp): Promise<RegExpExecArray> {
    try {
      await page.waitForFunction(
        ({ source, flags }) => {
          const term = (
            window as unknown as {
              jupyterapp: {
                shell: {
                  currentWidget: {
                    content?: {
                      _term?: {
                        buffer: {
                          active: {
                            length: number;
                            getLine(
                              i: number
                            ):
                              | { translateToString(trim: boolean): string }
                              | undefined;
                          };
                        };
                      };
                    };
                  } | null;
                };
              };
            }
          ).jupyterapp.shell.currentWidget?.content?._term;
          const buffer = term?.buffer.active;
          const lines: string[] = [];
          for (let i = 0; buffer && i < buffer.length; i++) {
            lines.push(buffer.getLine(i)?.translateToString(true) ?? '');
          }
          return new RegExp(source, flags).test(lines.join('\n'));
        },
        { source: pattern.source, flags: pattern.flags }
      );
    } catch (error) {
      throw new Error(
        `the terminal does not show ${pattern}:\n${await screen()}\n${(error as Error).message}`
      );
    }
    return pattern.exec(await screen())!;
  }

  /** Type a line into the terminal in front, as a user does. */
  async function typeLine(line: string): Promise<void> {
    await page.locator('.jp-Terminal:visible .xterm').click();
    await page.keyboard.type(line);
    await page.keyboard.press('Enter');
  }

  /** xterm's size in the terminal in front. */
  function xtermSize(): Promise<{ rows: number; cols: number }> {
    return page.evaluate(() => {
      const term = (
        window as unknown as {
          jupyterapp: {
            shell: {
              currentWidget: {
                content?: { _term?: { rows: number; cols: number } };
              } | null;
            };
          };
        }
      ).jupyterapp.shell.currentWidget?.content?._term;
      return { rows: term?.rows ?? 0, cols: term?.cols ?? 0 };
    });
  }

  it('opens from the launcher and runs a shell', async () => {
    await page
      .locator('.jp-Launcher:visible .jp-LauncherCard[data-category="Other"]', {
        hasText: 'Terminal'
      })
      .click();
    await page.locator('.jp-Terminal:visible').waitFor();
    await typeLine('echo "hello-$((6*7))"');
    await shows(/^hello-42$/m);
    const listed = await lab.api('GET', '/api/terminals');
    expect(listed.body).toHaveLength(1);
  });

  it("opens beside a notebook's kernel from the Kernel menu's command", async () => {
    await newNotebook(page);
    const kernelId = await currentKernelId(page);
    const before = (await lab.api('GET', '/api/terminals')).body.length;
    await page.locator('.lm-MenuBar-item', { hasText: 'Kernel' }).click();
    await page
      .locator('.lm-Menu-item', {
        hasText: "New Terminal on This Kernel's Accelerator"
      })
      .click();
    await page.locator('.jp-Terminal:visible').waitFor();
    const terminals = (await lab.api('GET', '/api/terminals')).body as {
      kernel?: string;
    }[];
    expect(terminals).toHaveLength(before + 1);
    expect(terminals.at(-1)!.kernel).toBe(kernelId);
    await typeLine('echo "beside-$((5+5))"');
    await shows(/^beside-10$/m);
  });

  it('beside a kernel: sees its device; resizes; Ctrl-C; reattaches after a reload', async () => {
    const kernelId = await startKernel(
      { api: lab.api },
      {
        name: 'python3',
        accelerator: { kind: 'gpu', count: 1 }
      }
    );
    const opened = await lab.api('POST', '/api/terminals', {
      kernel: kernelId
    });
    expect(opened.status).toBe(200);
    // Read after the terminal opened: a kernel holds its devices only while used, and a terminal
    // beside it makes it take them.
    const kernel = (await lab.api('GET', `/api/kernels/${kernelId}`)).body;
    expect(kernel.accelerator.held).toBe(true);
    const visible = (
      await lab.api('GET', '/api/accelerators')
    ).body.workers[0].devices.find(
      (d: { id: string }) => d.id === kernel.accelerator.devices[0].id
    ).visibleId;
    await page.evaluate(
      name =>
        (
          window as unknown as { jupyterapp: { commands: ICommands } }
        ).jupyterapp.commands.execute('terminal:open', { name }),
      opened.body.name as string
    );
    await page.locator('.jp-Terminal:visible').waitFor();
    await typeLine('echo "cvd=[$CUDA_VISIBLE_DEVICES]"');
    expect((await shows(/^cvd=\[(.*)\]$/m))[1]).toBe(visible);

    // A smaller window: xterm fits fewer rows and columns, and the shell is told.
    const before = await xtermSize();
    await page.setViewportSize({ width: 1000, height: 600 });
    await page.waitForFunction(({ rows, cols }) => {
      const term = (
        window as unknown as {
          jupyterapp: {
            shell: {
              currentWidget: {
                content?: { _term?: { rows: number; cols: number } };
              } | null;
            };
          };
        }
      ).jupyterapp.shell.currentWidget?.content?._term;
      return !!term && (term.rows !== rows || term.cols !== cols);
    }, before);
    const after = await xtermSize();
    await typeLine('stty size');
    await shows(new RegExp(`^${after.rows} ${after.cols}$`, 'm'));

    // Ctrl-C stops a sleep, and the shell takes the next line.
    await typeLine('sleep 100; echo "slept-$((1+1))"');
    await shows(/sleep 100; echo "slept-\$\(\(1\+1\)\)"/);
    await page.keyboard.press('Control+c');
    await typeLine('echo "after-$((2+3))"');
    await shows(/^after-5$/m);
    expect(await screen()).not.toMatch(/^slept-2$/m);

    // A reload: the terminal comes back with what it showed.
    await page.reload();
    await appRestored(page);
    await page.locator('.jp-Terminal:visible').waitFor();
    await page.evaluate(
      name =>
        (
          window as unknown as { jupyterapp: { commands: ICommands } }
        ).jupyterapp.commands.execute('terminal:open', { name }),
      opened.body.name as string
    );
    await shows(/^after-5$/m);
    await shows(/^cvd=\[/m);
    await typeLine('echo "again-$((3+4))"');
    await shows(/^again-7$/m);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'terminal.png') });
  });
});
