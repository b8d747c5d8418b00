/// <reference lib="dom" />
/**
 * Share links and co-editing in real browsers: `ferry gateway` from the CLI, the hosted JupyterLab
 * in Debian's Chromium, an owner's page and visitors' pages (each its own browser context, as
 * different people on different machines), a real ipykernel. The owner makes links with the Share
 * dialog; visitors open them as a person does (the link page, their name, the notebook).
 *
 * The picture of two people in one notebook goes to test-artifacts/screenshots/co-editing.png
 * (and to docs/images/co-editing.png, shown in docs/sharing.md, with FERRY_UPDATE_DOCS_IMAGES=1).
 */
import { readFileSync, watch } from 'node:fs';
import * as path from 'node:path';
import type { BrowserContext, Locator, Page } from 'playwright-core';
import * as Y from 'yjs';
import {
  SCREENSHOTS,
  SLOW_BROWSER_TIMEOUT,
  docsImage,
  appRestored,
  browserMissing,
  kernelIdle,
  screenshotStep,
  startLab,
  stopLab,
  watchPage,
  type ILab
} from './lab-pages';
import { codeCell, notebook } from './notebooks';
import { RawRoomClient } from './yjs-clients';

const describeInBrowser = browserMissing ? describe.skip : describe;
if (browserMissing) {
  console.warn(`Browser tests skipped: ${browserMissing}`);
}

const NOTEBOOK = 'shared.ipynb';

jest.setTimeout(SLOW_BROWSER_TIMEOUT);

describeInBrowser('Two people in one notebook, in Chromium', () => {
  let lab: ILab;
  let owner: Page;
  let visitor: Page;
  let editLink: string;
  /** The page of the link opened last (its picture is taken after each test). */
  let linkPage: Page | undefined;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    lab = await startLab(
      'share',
      { [NOTEBOOK]: notebook([codeCell('a = 1'), codeCell('')]) },
      ['--simulate', 'gpu:H100:1']
    );
    owner = await newPage();
    await owner.goto(lab.link);
    await appRestored(owner);
    await owner.goto(`${lab.origin}/lab/tree/${NOTEBOOK}`);
    await appRestored(owner);
    await cellText(owner, 0, 'a = 1');
  });

  afterEach(async () => {
    await screenshotStep(owner, 'share-owner', 50);
    await screenshotStep(visitor, 'share-visitor', 50);
    await screenshotStep(linkPage, 'share-link', 50);
  });

  afterAll(() => stopLab(lab));

  it('the owner makes an edit link with the Share button and sees it listed', async () => {
    const panel = notebookPanel(owner);
    await panel.locator('.jp-FerryShare-toolbarButton').click();
    const dialog = owner.getByRole('dialog');
    await dialog.getByLabel('Scope').selectOption('edit');
    await dialog.getByLabel('Label').fill('for Ada');
    await dialog.getByRole('button', { name: 'Create link' }).click();
    const url = dialog.getByLabel('Link');
    await url.waitFor();
    editLink = await url.inputValue();
    expect(editLink).toMatch(new RegExp(`^${lab.origin}/share#.{20,}$`));
    await dialog
      .locator('.jp-FerryShare-link', { hasText: 'for Ada · edit' })
      .waitFor();
    await dialog.screenshot({ path: path.join(SCREENSHOTS, 'share.png') });
    await dialog.getByRole('button', { name: 'Done' }).click();
  });

  it('a visitor opens the link, gives a name and gets the notebook alone, with the link’s rights shown', async () => {
    visitor = await openLink(editLink, 'Ada');
    await cellText(visitor, 0, 'a = 1');
    expect(
      await visitor.evaluate(
        () =>
          (window as unknown as { jupyterapp: { shell: { mode: string } } })
            .jupyterapp.shell.mode
      )
    ).toBe('single-document');
    await visitor
      .locator('.jp-FerryShareBanner', {
        hasText: /Can edit · shared by .*kernel on/
      })
      .waitFor();
    // A visitor manages no links.
    expect(
      await notebookPanel(visitor)
        .locator('.jp-FerryShare-toolbarButton:visible')
        .count()
    ).toBe(0);
    // Nothing the page asked for on its way here was refused: the plugins that need the owner's
    // APIs are left out of a link's page, and what the file browser and event stream poll answers.
    expect(refused.get(visitor)).toEqual([]);
  });

  it('edits, cursors and names cross both ways', async () => {
    await typeInCell(owner, 1, 'b = a + 1');
    await cellText(visitor, 1, 'b = a + 1');
    // Whoever typed last shows their name at their cursor in the other page (a tooltip of the page).
    await visitor
      .locator('.jp-remote-userFlag-name')
      .filter({ hasText: await ownerName() })
      .first()
      .waitFor({ state: 'attached' });

    await typeInCell(visitor, 0, '  # Ada was here');
    await cellText(owner, 0, 'a = 1  # Ada was here');
    await owner
      .locator('.jp-remote-userFlag-name', { hasText: 'Ada' })
      .first()
      .waitFor({ state: 'attached' });
    await docsImage(
      owner,
      path.join(SCREENSHOTS, 'co-editing.png'),
      'co-editing.png'
    );
  });

  it('the owner sees who is connected through each link', async () => {
    await notebookPanel(owner).locator('.jp-FerryShare-toolbarButton').click();
    const dialog = owner.getByRole('dialog');
    await dialog
      .locator('.jp-FerryShare-link', { hasText: 'for Ada' })
      .filter({ hasText: 'connected: Ada' })
      .waitFor();
    await dialog.getByRole('button', { name: 'Done' }).click();
  });

  it('a cell run in one page streams to the other, and its outputs land in the file after that page closed', async () => {
    const code =
      'import time\nfor i in range(6):\n    print("tick", i, flush=True)\n    time.sleep(0.5)';
    await replaceCell(visitor, 1, code);
    await cellText(owner, 1, code);
    await visitor.keyboard.press('Shift+Enter');
    const outputs = notebookPanel(owner)
      .locator('.jp-Notebook .jp-Cell')
      .nth(1)
      .locator('.jp-OutputArea-output');
    // The owner's page sees the run as it goes...
    await outputs.filter({ hasText: 'tick 0' }).first().waitFor();
    // ...the visitor closes their laptop mid-run...
    await visitor.context().close();
    // ...and the rest still arrives, in the owner's page and in the file.
    await outputs.filter({ hasText: 'tick 5' }).first().waitFor();
    await fileMatches(path.join(lab.rootDir, NOTEBOOK), text => {
      const cells = (
        JSON.parse(text) as {
          cells: { outputs?: { text?: string | string[] }[] }[];
        }
      ).cells;
      return (cells[1].outputs ?? []).some(output =>
        [output.text ?? ''].flat().join('').includes('tick 5')
      );
    });
  });

  it('a view link’s page cannot change the notebook', async () => {
    const created = await lab.api('POST', '/api/shares', {
      path: NOTEBOOK,
      scope: 'view',
      label: 'for Bob'
    });
    expect(created.status).toBe(201);
    const viewer = await openLink((created.body as { url: string }).url, 'Bob');
    await cellText(viewer, 0, 'a = 1  # Ada was here');
    const cells = notebookPanel(viewer).locator('.jp-Notebook .jp-Cell');
    // Every cell the owner has, synced and drawn, before counting them.
    const count = await notebookPanel(owner)
      .locator('.jp-Notebook .jp-Cell')
      .count();
    await viewer.waitForFunction(
      expected =>
        document.querySelectorAll(
          '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell'
        ).length === expected,
      count
    );
    const cell = cells.nth(0);
    await cell.locator('.cm-editor.jp-mod-readOnly').waitFor();
    await cell.locator('.cm-content').click();
    await viewer.keyboard.insertText('x');
    // A structural edit from the keyboard (command mode "d d") is refused with a notice.
    await viewer.keyboard.press('Escape');
    await viewer.keyboard.press('d');
    await viewer.keyboard.press('d');
    await viewer.locator('.Toastify__toast', { hasText: /view/ }).waitFor();
    expect(await cells.count()).toBe(count);
    // The owner's notebook did not change either.
    await typeInCell(owner, 0, '!');
    await cellText(viewer, 0, 'a = 1  # Ada was here!');
    await cellText(owner, 0, 'a = 1  # Ada was here!');
  });

  it('a comment link’s visitor comments on a cell, and the owner reads it under the cell', async () => {
    const created = await lab.api('POST', '/api/shares', {
      path: NOTEBOOK,
      scope: 'comment',
      label: 'for Cy'
    });
    const commenter = await openLink(
      (created.body as { url: string }).url,
      'Cy'
    );
    const cell = notebookPanel(commenter)
      .locator('.jp-Notebook .jp-Cell')
      .nth(0);
    await cell.locator('.jp-InputPrompt').click();
    // The box opens on demand, from the cell's comment button.
    await cell.getByRole('button', { name: 'Add a comment' }).click();
    const box = cell.getByLabel('Comment on this cell');
    await box.fill('Why 1?');
    await box.press('Enter');
    await notebookPanel(owner)
      .locator('.jp-Notebook .jp-Cell')
      .nth(0)
      .locator('.jp-FerryComments-comment', { hasText: 'Cy' })
      .filter({ hasText: 'Why 1?' })
      .waitFor();
  });

  it('a run link’s page runs cells on the owner’s kernel, and edits none', async () => {
    const created = await lab.api('POST', '/api/shares', {
      path: NOTEBOOK,
      scope: 'run',
      label: 'for Eve'
    });
    const eve = await openLink((created.body as { url: string }).url, 'Eve');
    await eve
      .locator('.jp-FerryShareBanner', {
        hasText: /Can run cells · shared by .*kernel on/
      })
      .waitFor();
    const cells = notebookPanel(eve).locator('.jp-Notebook .jp-Cell');
    await cells.nth(0).locator('.cm-editor.jp-mod-readOnly').waitFor();
    // Every cell the owner has, rendered; and the page's session on the owner's kernel (a run
    // asked for before it has one runs nothing).
    const count = await notebookPanel(owner)
      .locator('.jp-Notebook .jp-Cell')
      .count();
    await cells.nth(count - 1).waitFor();
    await kernelIdle(eve);
    const prompt = notebookPanel(owner)
      .locator('.jp-Notebook .jp-Cell')
      .nth(0)
      .locator('.jp-InputPrompt');
    const before = await prompt.innerText();
    await cells.nth(0).locator('.jp-InputPrompt').click();
    await eve.keyboard.press('Control+Enter');
    // The owner's page shows the run Eve started: a new execution count on that cell.
    await owner.waitForFunction(
      ([text]) => {
        const prompt = document.querySelector(
          '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell .jp-InputPrompt'
        ) as HTMLElement | null;
        return (
          !!prompt &&
          /\[\d+\]/.test(prompt.innerText) &&
          prompt.innerText !== text
        );
      },
      [before] as const
    );
    // Shift+Enter on the last cell runs it without adding a cell.
    await typeInCell(owner, count - 1, 'print("for Eve")');
    await cellText(eve, count - 1, 'print("for Eve")');
    await cells
      .nth(count - 1)
      .locator('.jp-InputPrompt')
      .click();
    await eve.keyboard.press('Shift+Enter');
    await cells
      .nth(count - 1)
      .locator('.jp-OutputArea-output', { hasText: 'for Eve' })
      .waitFor();
    expect(await cells.count()).toBe(count);
  });

  it('revoking a link in the Share dialog cuts its visitor off', async () => {
    const created = await lab.api('POST', '/api/shares', {
      path: NOTEBOOK,
      scope: 'edit',
      label: 'for Dee'
    });
    const dee = await openLink((created.body as { url: string }).url, 'Dee');
    await cellText(dee, 0, 'a = 1  # Ada was here!');
    await notebookPanel(owner).locator('.jp-FerryShare-toolbarButton').click();
    const dialog = owner.getByRole('dialog').filter({ hasText: 'Share' });
    await dialog
      .locator('.jp-FerryShare-link', { hasText: 'for Dee' })
      .getByRole('button', { name: 'Revoke' })
      .click();
    await dialog
      .getByRole('group', { name: 'Revoke this link?' })
      .getByRole('button', { name: 'Revoke now' })
      .click();
    await dialog
      .locator('.jp-FerryShare-link', { hasText: 'for Dee' })
      .waitFor({ state: 'detached' });
    await dialog.getByRole('button', { name: 'Done' }).click();
    // Dee's page says so at once, over everything, and the owner's doc holds nothing more of Dee's.
    await dee
      .getByRole('alertdialog', { name: 'This link no longer works' })
      .filter({ hasText: 'revoked' })
      .waitFor();
    await typeInCell(owner, 0, '?');
    await cellText(owner, 0, 'a = 1  # Ada was here!?');
    await cellText(dee, 0, 'a = 1  # Ada was here!');
    const me = await dee.evaluate(async () => (await fetch('/api/me')).status);
    expect(me).toBe(403);
  });

  /** What each visitor page was refused (HTTP 4xx/5xx answers, websocket errors). */
  const refused = new Map<Page, string[]>();

  /** A page in a browser context of its own (its own cookies and storage: another person). */
  async function newPage(): Promise<Page> {
    const context = await lab.browser.newContext({
      viewport: { width: 1280, height: 800 }
    });
    contexts.push(context);
    const page = await context.newPage();
    page.setDefaultTimeout(30_000);
    watchPage(page);
    return page;
  }

  /** Open a share link as a new person does: the link page, a name, then the notebook. */
  async function openLink(url: string, name: string): Promise<Page> {
    const page = await newPage();
    linkPage = page;
    const failures: string[] = [];
    refused.set(page, failures);
    page.on('response', response => {
      if (response.status() >= 400) {
        failures.push(`${response.status()} ${response.url()}`);
      }
    });
    page.on('websocket', ws =>
      ws.on('socketerror', error => failures.push(`${ws.url()}: ${error}`))
    );
    await page.goto(url);
    await page.getByLabel(/Your name/).fill(name);
    await page.getByRole('button', { name: /Open/ }).click();
    await page.waitForURL(/\/lab\/tree\//);
    await appRestored(page);
    return page;
  }

  it('an edit link’s HTML output, in a cell it marks trusted, does not run in the owner’s page', async () => {
    const created = await lab.api('POST', '/api/shares', {
      path: NOTEBOOK,
      scope: 'edit'
    });
    expect(created.status).toBe(201);
    const session = await lab.api(
      'PUT',
      `/api/collaboration/session/${NOTEBOOK}`,
      {
        format: 'json',
        type: 'notebook'
      }
    );
    const { fileId } = session.body as { fileId: string };
    // A client of its own making, as the link's holder can write: no page stands in its way.
    const guest = await RawRoomClient.connect(
      lab.origin,
      `json:notebook:${fileId}`,
      {
        token: (created.body as { token: string }).token
      }
    );
    await guest.sync();
    guest.change(doc => {
      const outputs = new Y.Array<Y.Map<unknown>>();
      outputs.push([
        new Y.Map<unknown>([
          ['output_type', 'display_data'],
          [
            'data',
            {
              'text/html':
                '<p>guest-html-marker</p><img src="x" onerror="window.ferryPwned = 1">'
            }
          ],
          ['metadata', {}]
        ])
      ]);
      doc.getArray('cells').push([
        new Y.Map<unknown>([
          ['id', 'guest-cell'],
          ['cell_type', 'code'],
          ['source', new Y.Text('# from the guest')],
          ['metadata', new Y.Map<unknown>([['trusted', true]])],
          ['outputs', outputs],
          ['execution_count', null]
        ])
      ]);
    });
    // The owner's page shows the guest's output, as untrusted HTML: sanitized, its script gone.
    await owner.waitForFunction(() =>
      Array.from(document.querySelectorAll('.jp-OutputArea-output')).some(
        node => node.textContent?.includes('guest-html-marker')
      )
    );
    // Its image (its src resolved by the page) has failed to load: an onerror would have run.
    const img = await owner.waitForFunction(() => {
      const output = Array.from(
        document.querySelectorAll('.jp-OutputArea-output')
      ).find(node => node.textContent?.includes('guest-html-marker'));
      const found = output?.querySelector('img');
      return found?.complete ? found : undefined;
    });
    expect(await img.evaluate(node => node!.hasAttribute('onerror'))).toBe(
      false
    );
    expect(
      await owner.evaluate(
        () => (window as unknown as { ferryPwned?: number }).ferryPwned
      )
    ).toBeUndefined();
    guest.close();
  });

  /** The owner's name as the gateway reports it. */
  async function ownerName(): Promise<string> {
    const me = await lab.api('GET', '/api/me');
    return (me.body as { identity: { display_name: string } }).identity
      .display_name;
  }
});

/** The notebook panel of a page. */
function notebookPanel(page: Page): Locator {
  return page.locator('.jp-NotebookPanel:not(.lm-mod-hidden)');
}

/** Wait until cell `index` of the page shows `text` as its source (lines and all). */
async function cellText(
  page: Page,
  index: number,
  text: string
): Promise<void> {
  await page.waitForFunction(
    ([i, expected]) => {
      const cells = document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell .cm-content'
      );
      return (
        (cells[i as number] as HTMLElement | undefined)?.innerText === expected
      );
    },
    [index, text] as const
  );
}

/** Click at the end of cell `index` and type. */
async function typeInCell(
  page: Page,
  index: number,
  text: string
): Promise<void> {
  const content = notebookPanel(page)
    .locator('.jp-Notebook .jp-Cell')
    .nth(index)
    .locator('.cm-content');
  await content.click();
  await page.keyboard.press('Control+End');
  await page.keyboard.insertText(text);
}

/** Replace the source of cell `index` with `text`, leaving the cursor in it. */
async function replaceCell(
  page: Page,
  index: number,
  text: string
): Promise<void> {
  const content = notebookPanel(page)
    .locator('.jp-Notebook .jp-Cell')
    .nth(index)
    .locator('.cm-content');
  await content.click();
  await page.keyboard.press('Control+a');
  await page.keyboard.insertText(text);
}

/**
 * Wait until the file's content satisfies `test`: checked now, then each time the directory changes
 * (the gateway saves by writing a temporary file and renaming it over the notebook).
 */
async function fileMatches(
  file: string,
  test: (text: string) => boolean
): Promise<void> {
  const check = () => {
    try {
      return test(readFileSync(file, 'utf8'));
    } catch {
      return false; // not there, or half-read: the next change says more
    }
  };
  if (check()) {
    return;
  }
  await new Promise<void>((resolve, reject) => {
    const watcher = watch(path.dirname(file), () => {
      if (check()) {
        watcher.close();
        resolve();
      }
    });
    watcher.on('error', reject);
  });
}
