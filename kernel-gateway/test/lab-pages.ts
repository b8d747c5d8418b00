/// <reference lib="dom" />
/**
 * What the browser suites share: starting `ferry gateway` from the CLI, launching Debian's
 * Chromium through playwright-core, and driving the hosted JupyterLab as a user does (open a
 * notebook, type and run a cell, save).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  copyFileSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  writeFileSync
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import {
  chromium,
  type Browser,
  type BrowserContext,
  type Locator,
  type Page,
  type Request
} from 'playwright-core';
import { apiFor, type ITestGateway } from './helpers';
import type { ISignedIn } from './oidc-harness';

const FERRY = path.join(__dirname, '..', 'bin', 'ferry.js');
const CHROMIUM = '/usr/bin/chromium';
const LAB_BUILD = path.join(
  __dirname,
  '..',
  '..',
  'packages',
  'lab-app',
  'build',
  'lab.json'
);

/** Where the browser suites put their screenshots. */
export const SCREENSHOTS = path.join(
  __dirname,
  '..',
  '..',
  'test-artifacts',
  'screenshots'
);

/** Where each browser suite's gateways write their logs (one file per spec, appended). */
export const GATEWAY_LOGS = path.join(
  __dirname,
  '..',
  '..',
  'test-artifacts',
  'gateway-logs'
);

/** The pictures the README and docs/*.md show: the browser suites take them again. */
export const DOCS_IMAGES = path.join(__dirname, '..', '..', 'docs', 'images');

/**
 * A screenshot of `target` at `file` (under {@link SCREENSHOTS}); with `FERRY_UPDATE_DOCS_IMAGES=1`
 * in the environment, copied to docs/images/`docsName` too, so the docs show today's UI
 * (`FERRY_UPDATE_DOCS_IMAGES=1 npx jest kernel-gateway/test/lab-devices.spec.ts`).
 */
export async function docsImage(
  target: Page | Locator,
  file: string,
  docsName: string
): Promise<void> {
  await target.screenshot({ path: file });
  if (process.env.FERRY_UPDATE_DOCS_IMAGES === '1') {
    copyFileSync(file, path.join(DOCS_IMAGES, docsName));
  }
}

/** Why the browser suites cannot run here, if they cannot. */
export const browserMissing = !existsSync(CHROMIUM)
  ? `${CHROMIUM} is missing (apt-get install chromium)`
  : !existsSync(LAB_BUILD)
    ? 'the JupyterLab app is not built (npm run build)'
    : undefined;

/** Debian's Chromium, headless, without the background traffic a test does not want. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run'
    ]
  });
}

/** The part of JupyterLab's command registry the tests call. */
export interface ICommands {
  execute(id: string, args?: unknown): Promise<unknown>;
}

/**
 * `--state-dir` in a temporary directory of its own (removed when the gateway exits), unless `args`
 * names one: the default, ~/.ferry/state, is held by one gateway at a time.
 */
function stateDirArgs(args: string[]): string[] {
  return args.includes('--state-dir')
    ? []
    : ['--state-dir', mkdtempSync(path.join(tmpdir(), 'ferry-lab-state-'))];
}

/** Start `ferry gateway` from the CLI and resolve with the token link it prints. */
export async function startFerry(
  args: string[]
): Promise<{ child: ChildProcess; link: string }> {
  const stateDir = stateDirArgs(args);
  const child = spawn(
    process.execPath,
    // Kernels as this user: as root, `ferry` would run them as nobody, to whom the temporary
    // notebook directory is closed.
    [
      FERRY,
      'gateway',
      '--port',
      '0',
      '--kernel-user',
      userInfo().username,
      ...stateDir,
      ...args
    ],
    { env: process.env, stdio: ['ignore', 'pipe', 'pipe'] }
  );
  child.once('exit', () => {
    if (stateDir.length > 0) {
      rmSync(stateDir[1], { recursive: true, force: true });
    }
  });
  let stderr = '';
  child.stderr!.on('data', chunk => (stderr += chunk));
  // Its log beside the screenshots: when a page hangs, what the gateway did meanwhile.
  mkdirSync(GATEWAY_LOGS, { recursive: true });
  const spec = path.basename(expect.getState().testPath ?? 'lab', '.spec.ts');
  child.stderr!.pipe(
    createWriteStream(path.join(GATEWAY_LOGS, `${spec}.log`), { flags: 'a' })
  );
  const reader = createInterface({ input: child.stdout! });
  const link = await new Promise<string>((resolve, reject) => {
    child.once('exit', code =>
      reject(new Error(`ferry exited with ${code}: ${stderr}`))
    );
    reader.on('line', line => {
      const match = /(http:\/\/\S+\/lab\?token=\S+)/.exec(line);
      if (match) {
        resolve(match[1]);
      }
    });
  });
  return { child, link };
}

/**
 * jest's budget for a browser spec whose tests drive two browser contexts at once (an owner and a
 * guest), restart a gateway or wait on a queue: each step may wait 30 s, and a loaded CI machine
 * runs two Chromium contexts slowly (one such test took 13 s alone and over 120 s in CI).
 */
export const SLOW_BROWSER_TIMEOUT = 180_000;

/** A gateway a browser suite started: its process, link and API. */
export interface ILabGateway {
  ferry: ChildProcess;
  /** The token link the gateway printed. */
  link: string;
  /** `http://host:port` of the gateway. */
  origin: string;
  /** The owner's token, from the link. */
  token: string;
  /** The REST API as the owner. */
  api: ITestGateway['api'];
}

/** A gateway and a browser for a browser suite (see {@link startLab}). */
export interface ILab extends ILabGateway {
  browser: Browser;
  /** The gateway's `--root-dir`: a temporary directory of its own. */
  rootDir: string;
  /** The gateway's `--state-dir` (its lab settings in `lab/`): a temporary directory of its own. */
  stateDir: string;
  /** The gateway's options, for {@link restartLabGateway}. */
  args: string[];
}

/**
 * Start `ferry gateway --no-discover` on a temporary root directory holding `files` (an object is
 * written as JSON, a string as it is) and a state directory of its own, and launch Chromium.
 *
 * @param name - in the temporary directories' names, to tell a leftover's suite.
 * @param args - more of the gateway's options.
 */
export async function startLab(
  name: string,
  files: Record<string, unknown> = {},
  args: string[] = []
): Promise<ILab> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const rootDir = mkdtempSync(path.join(tmpdir(), `ferry-${name}-root-`));
  const stateDir = mkdtempSync(path.join(tmpdir(), `ferry-${name}-state-`));
  const all = [
    '--no-discover',
    '--root-dir',
    rootDir,
    '--state-dir',
    stateDir,
    '--lab-settings-dir',
    path.join(stateDir, 'lab'),
    ...args
  ];
  let gateway: ILabGateway | undefined;
  try {
    for (const [file, content] of Object.entries(files)) {
      writeFileSync(
        path.join(rootDir, file),
        typeof content === 'string' ? content : JSON.stringify(content)
      );
    }
    gateway = await Private.startGateway(all);
    return {
      ...gateway,
      browser: await launchChromium(),
      rootDir,
      stateDir,
      args: all
    };
  } catch (error) {
    await stopFerry(gateway?.ferry);
    rmSync(rootDir, { recursive: true, force: true });
    rmSync(stateDir, { recursive: true, force: true });
    throw error;
  }
}

/** Stop a lab's gateway and start it again on the same directories (its link and API change). */
export async function restartLabGateway(lab: ILab): Promise<void> {
  await stopFerry(lab.ferry);
  Object.assign(lab, await Private.startGateway(lab.args));
}

/** Close what {@link startLab} started: the browser, the gateway, and its directories. */
export async function stopLab(lab: ILab | undefined): Promise<void> {
  if (lab) {
    await lab.browser.close();
    await stopFerry(lab.ferry);
    rmSync(lab.rootDir, { recursive: true, force: true });
    rmSync(lab.stateDir, { recursive: true, force: true });
  }
}

/**
 * A page of the lab as its owner (each step failing after 30 s), signed in with the token link and
 * restored.
 */
export async function openLabPage(
  lab: ILab,
  viewport = { width: 1400, height: 900 }
): Promise<Page> {
  const page = await lab.browser.newPage({ viewport });
  page.setDefaultTimeout(30_000);
  watchPage(page);
  await page.goto(lab.link);
  await appRestored(page);
  return page;
}

/** Stop a gateway `startFerry` started (SIGTERM), and wait until it has exited. */
export async function stopFerry(
  child: ChildProcess | undefined
): Promise<void> {
  if (child && child.exitCode === null) {
    const exited = new Promise(resolve => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}

/**
 * Keep the page as the current test left it, `<prefix>-<the test's name>.png` in
 * {@link SCREENSHOTS}: the first thing to look at when a step fails. For `afterEach`.
 */
export async function screenshotStep(
  page: Page | undefined,
  prefix = 'last',
  nameChars = 60
): Promise<void> {
  const name = expect.getState().currentTestName;
  if (page && !page.isClosed() && name) {
    const slug = name.replace(/[^a-z0-9]+/gi, '-').slice(-nameChars);
    await page.screenshot({
      path: path.join(SCREENSHOTS, `${prefix}-${slug}.png`)
    });
  }
}

/**
 * A browser context of its own holding `who`'s session at `url` (the cookies they got signing in
 * through the provider): that person's own browser.
 */
export async function contextSignedIn(
  browser: Browser,
  who: ISignedIn,
  url: string,
  viewport: { width: number; height: number }
): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport });
  await context.addCookies(
    (await who.jar.getCookies(url)).map(cookie => ({
      name: cookie.key,
      value: cookie.value,
      url
    }))
  );
  return context;
}

/** A page of a context of its own (a person of their own), with a 30 s timeout, watched. */
export async function newWatchedPage(browser: Browser): Promise<Page> {
  const page = await (await browser.newContext()).newPage();
  page.setDefaultTimeout(30_000);
  watchPage(page);
  return page;
}

/** What a watched page has under way and what went wrong in it, for a page that never restores. */
const watched = new WeakMap<
  Page,
  { open: Map<Request | object, string>; errors: string[] }
>();

/**
 * Keep track of `page`'s requests and websockets still open, and of its errors (uncaught exceptions,
 * console errors): {@link appRestored} names them when the page does not restore.
 */
export function watchPage(page: Page): void {
  const open = new Map<Request | object, string>();
  const errors: string[] = [];
  watched.set(page, { open, errors });
  page.on('request', request =>
    open.set(request, `${request.method()} ${request.url()}`)
  );
  page.on('requestfinished', request => open.delete(request));
  page.on('requestfailed', request => open.delete(request));
  page.on('websocket', socket => {
    open.set(socket, `websocket ${socket.url()}`);
    socket.on('close', () => open.delete(socket));
  });
  // A refusal says why in its body ({ reason, message }): keep that, not only the status.
  page.on('response', response => {
    if (response.status() >= 400) {
      const request = response.request();
      void response
        .json()
        .then((body: { message?: string }) => body.message ?? '')
        .catch(() => '')
        .then(message =>
          errors.push(
            `refused: ${response.status()} ${request.method()} ${response.url()}${message ? ` (${message})` : ''}`
          )
        );
    }
  });
  page.on('pageerror', error => errors.push(`uncaught: ${error.message}`));
  page.on('console', message => {
    if (message.type() === 'error') {
      errors.push(`console: ${message.text().slice(0, 300)}`);
    }
  });
}

/**
 * Wait until JupyterLab has started and restored its layout, within the page's timeout: awaiting
 * `restored` in `page.evaluate` would wait without a bound, and a page that never restores would
 * spend the whole test's budget there and say nothing of where it stopped.
 */
export async function appRestored(page: Page): Promise<void> {
  await page.waitForFunction(() => 'jupyterapp' in window);
  await page.evaluate(() => {
    const app = window as unknown as {
      jupyterapp: { restored: Promise<void> };
      ferryRestored?: boolean;
    };
    app.ferryRestored = false;
    void app.jupyterapp.restored.then(() => (app.ferryRestored = true));
  });
  await page
    .waitForFunction(
      () => (window as unknown as { ferryRestored?: boolean }).ferryRestored
    )
    .catch((error: Error) => {
      const seen = watched.get(page);
      const detail = seen
        ? `\nstill open: ${[...seen.open.values()].join(', ') || 'nothing'}` +
          `\nerrors: ${seen.errors.join(' | ') || 'none'}`
        : '';
      throw new Error(
        `JupyterLab did not finish restoring its layout at ${page.url()}: ${error.message}${detail}`
      );
    });
}

/** The notebook panel in front. */
export function currentNotebook(page: Page): Locator {
  return page.locator('.jp-NotebookPanel:not(.lm-mod-hidden)');
}

/** Cell `index` of the notebook in front. */
export function cell(page: Page, index: number): Locator {
  return currentNotebook(page).locator('.jp-Notebook .jp-Cell').nth(index);
}

/** The current notebook's kernel id, as JupyterLab knows it. */
export async function currentKernelId(page: Page): Promise<string> {
  const handle = await page.waitForFunction(() => {
    const app = (
      window as unknown as {
        jupyterapp: {
          shell: {
            currentWidget: {
              sessionContext?: { session?: { kernel?: { id: string } } };
            } | null;
          };
        };
      }
    ).jupyterapp;
    return app.shell.currentWidget?.sessionContext?.session?.kernel?.id;
  });
  return (await handle.jsonValue()) as string;
}

/** Open a new Python notebook from a launcher, as a user does, and wait for its kernel. */
export async function newNotebook(page: Page): Promise<void> {
  const before = await page.locator('.jp-NotebookPanel').count();
  if (!(await page.locator('.jp-Launcher:visible').count())) {
    await showLeftPanel(page, 'filebrowser');
    await page.locator('[data-command="launcher:create"]:visible').click();
  }
  await page
    .locator('.jp-Launcher:visible .jp-LauncherCard[data-category="Notebook"]')
    .first()
    .click();
  await page.waitForFunction(
    count => document.querySelectorAll('.jp-NotebookPanel').length > count,
    before
  );
  await currentNotebook(page)
    .locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]')
    .waitFor();
}

/** Show a panel of the left sidebar by clicking its tab, unless it shows already. */
export async function showLeftPanel(page: Page, id: string): Promise<void> {
  if (!(await page.locator(`#${id}:visible`).count())) {
    await page.locator(`.lm-TabBar-tab[data-id="${id}"]`).click();
  }
  await page.locator(`#${id}`).waitFor();
}

/**
 * Wait until the current notebook's kernel is connected and idle, as the status bar shows it
 * ("Python 3 (ipykernel) | Idle"): after a move the kernel runs before the page's connection to it
 * has caught up.
 */
export async function kernelIdle(page: Page): Promise<void> {
  await page.waitForFunction(() => {
    const kernel = (
      window as unknown as {
        jupyterapp: {
          shell: {
            currentWidget: {
              sessionContext?: {
                session?: {
                  kernel?: { connectionStatus: string; status: string };
                };
              };
            } | null;
          };
        };
      }
    ).jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel;
    return kernel?.connectionStatus === 'connected' && kernel.status === 'idle';
  });
}

/** Type `code` into the last cell and run it (Shift+Enter) without waiting for its output. */
export async function startCell(page: Page, code: string): Promise<Locator> {
  await kernelIdle(page);
  const notebook = currentNotebook(page);
  const cells = notebook.locator('.jp-Notebook .jp-Cell');
  const index = (await cells.count()) - 1;
  const cell = cells.nth(index);
  await cell.locator('.cm-content').click();
  await page.keyboard.insertText(code);
  await page.keyboard.press('Shift+Enter');
  return cell;
}

/** Run `code` in the last cell and resolve with its printed output. */
export async function runCell(page: Page, code: string): Promise<string> {
  const cell = await startCell(page, code);
  const output = cell.locator('.jp-OutputArea-output');
  await output.first().waitFor();
  await cell
    .locator('.jp-InputPrompt', { hasText: /\[\d+\]/ })
    .first()
    .waitFor();
  return output.allInnerTexts().then(texts => texts.join(''));
}

/**
 * Save the current notebook (Ctrl+S) and wait until it is clean. JupyterLab offers to rename an
 * untitled notebook on its first save: keep the name.
 */
export async function save(page: Page): Promise<void> {
  await page.keyboard.press('Control+s');
  const rename = page
    .getByRole('dialog')
    .getByRole('button', { name: 'Rename' });
  const clean = page
    .locator('.lm-TabBar-tab.jp-mod-current:not(.jp-mod-dirty)')
    .first();
  await rename.or(clean).first().waitFor();
  if (await rename.isVisible()) {
    await rename.click();
  }
  await page
    .locator('.lm-TabBar-tab.jp-mod-current:not(.jp-mod-dirty)')
    .first()
    .waitFor();
}

namespace Private {
  /** Start `ferry gateway` with `args` and read its link. */
  export async function startGateway(args: string[]): Promise<ILabGateway> {
    const { child, link } = await startFerry(args);
    const url = new URL(link);
    const token = url.searchParams.get('token')!;
    return {
      ferry: child,
      link,
      origin: url.origin,
      token,
      api: apiFor(url.origin, token)
    };
  }
}
