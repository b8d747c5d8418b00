/// <reference lib="dom" />
/**
 * Who is here, in Debian's Chromium against `ferry gateway` from the CLI: the owner and two guests
 * (a view link and a comment link, each its own browser) in one notebook, each on a cell of their
 * own; the Collaboration panel's "Online collaborators" of every page lists the others with their
 * colour, their name, owner or guest, and the cell they are on.
 */
import * as path from 'node:path';
import type { Locator, Page } from 'playwright-core';
import {
  newWatchedPage,
  SCREENSHOTS,
  SLOW_BROWSER_TIMEOUT,
  appRestored,
  browserMissing,
  cell,
  startLab,
  stopLab,
  type ILab
} from './lab-pages';
import { codeCell, notebook } from './notebooks';

const describeInBrowser = browserMissing ? describe.skip : describe;

jest.setTimeout(SLOW_BROWSER_TIMEOUT);

const NOTEBOOK = 'together.ipynb';

describeInBrowser('Online collaborators, in Chromium', () => {
  let lab: ILab;

  beforeAll(async () => {
    lab = await startLab('presence', {
      [NOTEBOOK]: notebook(
        ['first = 1', 'second = 2', 'third = 3'].map(source => codeCell(source))
      )
    });
  });

  afterAll(() => stopLab(lab));

  it('every page lists the others: name, colour, owner or guest, and their cell', async () => {
    const ownerName = (
      (await lab.api('GET', '/api/me')).body as {
        identity: { display_name: string };
      }
    ).identity.display_name;
    const owner = await newWatchedPage(lab.browser);
    owner.setDefaultTimeout(30_000);
    await owner.goto(lab.link);
    await appRestored(owner);
    await owner.goto(`${lab.origin}/lab/tree/${NOTEBOOK}`);
    await appRestored(owner);
    await cell(owner, 0).locator('.cm-content', { hasText: 'first' }).waitFor();
    await cell(owner, 0).locator('.jp-InputPrompt').click();

    const guests: Page[] = [];
    for (const [scope, name, index] of [
      ['view', 'Vera', 1],
      ['comment', 'Colm', 2]
    ] as const) {
      const created = await lab.api('POST', '/api/shares', {
        path: NOTEBOOK,
        scope
      });
      expect(created.status).toBe(201);
      const guest = await newWatchedPage(lab.browser);
      guest.setDefaultTimeout(30_000);
      await guest.goto((created.body as { url: string }).url);
      await guest.getByLabel(/Your name/).fill(name);
      await guest.getByRole('button', { name: 'Open the notebook' }).click();
      await appRestored(guest);
      await cell(guest, index)
        .locator('.cm-content', { hasText: /\w+ = \d/ })
        .waitFor();
      await cell(guest, index).locator('.jp-InputPrompt').click();
      guests.push(guest);
    }

    // The owner sees both guests, and where each is.
    const ownerList = await openPresence(owner);
    await person(ownerList, 'Vera')
      .filter({ hasText: 'guest' })
      .filter({ hasText: 'cell 2' })
      .waitFor();
    await person(ownerList, 'Colm')
      .filter({ hasText: 'guest' })
      .filter({ hasText: 'cell 3' })
      .waitFor();
    // Each with the colour their cursor has.
    const avatar = person(ownerList, 'Vera').locator(
      '.jp-FerryPresence-avatar'
    );
    expect(
      await avatar.evaluate(node => getComputedStyle(node).backgroundColor)
    ).toMatch(/^rgb/);
    await owner.screenshot({
      path: path.join(SCREENSHOTS, 'presence-owner.png')
    });

    // A guest sees the owner (as the owner) and the other guest.
    const veraList = await openPresence(guests[0]);
    await person(veraList, ownerName)
      .filter({ hasText: 'owner' })
      .filter({ hasText: 'cell 1' })
      .waitFor();
    await person(veraList, 'Colm').filter({ hasText: 'cell 3' }).waitFor();
    await guests[0].screenshot({
      path: path.join(SCREENSHOTS, 'presence-guest.png')
    });

    // Moving to another cell moves the entry.
    await cell(guests[1], 0).locator('.jp-InputPrompt').click();
    await person(ownerList, 'Colm').filter({ hasText: 'cell 1' }).waitFor();
    // Clicking it takes the owner to that cell.
    await cell(owner, 2).locator('.jp-InputPrompt').click();
    await person(ownerList, 'Vera')
      .getByRole('button', { name: 'cell 2' })
      .click();
    await owner
      .locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell.jp-mod-active', {
        hasText: 'second = 2'
      })
      .waitFor();

    // A guest who leaves leaves the list.
    await guests[1].context().close();
    await person(ownerList, 'Colm').waitFor({ state: 'detached' });
    await guests[0].context().close();
    await owner.context().close();
  });
});

/** Open the Collaboration panel of the left sidebar and return its list of who is here. */
async function openPresence(page: Page): Promise<Locator> {
  const list = page.locator('#jp-ferry-online-collaborators');
  if (!(await list.isVisible())) {
    await page
      .locator('.lm-TabBar-tab[data-id="jp-collaboration-panel"]')
      .click();
  }
  await list.waitFor();
  return list;
}

/** The entry of the person called `name` in a list. */
function person(list: Locator, name: string): Locator {
  return list.locator('.jp-FerryPresence-person', {
    has: list.page().locator('.jp-FerryPresence-name', { hasText: name })
  });
}
