/// <reference lib="dom" />
/**
 * Comments as people use them, in Debian's Chromium against `ferry gateway` from the CLI: the owner
 * and a comment link's guest in one notebook. No empty box under the active cell; a guest opens one
 * from the cell's comment button, and the owner sees a count on the cell, the comment with its
 * time, replies to it; the guest resolves the thread they started; the owner reopens it and
 * deletes it; a guest is offered no Delete on the owner's reply.
 */
import * as path from 'node:path';
import type { Locator } from 'playwright-core';
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

const NOTEBOOK = 'review.ipynb';

describeInBrowser('Comments on cells, in Chromium', () => {
  let lab: ILab;

  beforeAll(async () => {
    lab = await startLab('comments', {
      [NOTEBOOK]: notebook([codeCell('rate = 0.1'), codeCell('epochs = 3')])
    });
  });

  afterAll(() => stopLab(lab));

  it('opens on demand, counts, times, replies, resolves and deletes', async () => {
    const owner = await newWatchedPage(lab.browser);
    owner.setDefaultTimeout(30_000);
    await owner.goto(lab.link);
    await appRestored(owner);
    await owner.goto(`${lab.origin}/lab/tree/${NOTEBOOK}`);
    await appRestored(owner);
    await cell(owner, 0).locator('.cm-content', { hasText: 'rate' }).waitFor();
    await cell(owner, 0).locator('.jp-InputPrompt').click();
    // No empty "Comment on this cell" box under the active cell.
    await cell(owner, 0).locator('.jp-FerryComments-badge').waitFor();
    expect(await owner.getByLabel('Comment on this cell').count()).toBe(0);
    expect(await visible(cell(owner, 0).locator('.jp-FerryComments'))).toBe(
      false
    );

    const created = await lab.api('POST', '/api/shares', {
      path: NOTEBOOK,
      scope: 'comment'
    });
    const guest = await newWatchedPage(lab.browser);
    guest.setDefaultTimeout(30_000);
    await guest.goto((created.body as { url: string }).url);
    await guest.getByLabel(/Your name/).fill('Cy');
    await guest.getByRole('button', { name: 'Open the notebook' }).click();
    await appRestored(guest);
    const guestCell = cell(guest, 1);
    await guestCell.locator('.cm-content', { hasText: 'epochs' }).waitFor();
    await guestCell.locator('.jp-InputPrompt').click();
    await guestCell.getByRole('button', { name: 'Add a comment' }).click();
    const box = guestCell.getByLabel('Comment on this cell');
    await box.fill('Why only 3 epochs?');
    await box.press('Enter');
    await box.waitFor({ state: 'detached' });

    // The owner: a count on the cell, the comment with its author and time.
    const ownerCell = cell(owner, 1);
    await ownerCell
      .getByRole('button', { name: '1 comment', exact: true })
      .waitFor();
    const thread = ownerCell.locator('.jp-FerryComments-thread');
    const root = thread.locator('.jp-FerryComments-comment').first();
    await root.locator('.jp-FerryComments-author', { hasText: 'Cy' }).waitFor();
    await root
      .locator('.jp-FerryComments-text', { hasText: 'Why only 3 epochs?' })
      .waitFor();
    expect(await root.locator('time').innerText()).toBe('now');
    expect(await root.locator('time').getAttribute('title')).toMatch(/\d/);

    // The owner replies.
    await root.getByRole('button', { name: 'Reply' }).click();
    const reply = ownerCell.getByLabel('Reply to this comment');
    await reply.fill('The loss is flat after 3.');
    await reply.press('Enter');
    await ownerCell
      .getByRole('button', { name: '2 comments', exact: true })
      .waitFor();
    const guestThread = guestCell.locator('.jp-FerryComments-thread');
    const guestReply = guestThread.locator(
      '.jp-FerryComments-replies .jp-FerryComments-comment'
    );
    await guestReply
      .locator('.jp-FerryComments-text', {
        hasText: 'The loss is flat after 3.'
      })
      .waitFor();
    // The owner's reply is not the guest's to delete; their own comment is.
    expect(
      await guestReply.getByRole('button', { name: 'Delete' }).count()
    ).toBe(0);
    await guestThread
      .locator('.jp-FerryComments-comment')
      .first()
      .getByRole('button', { name: 'Delete' })
      .waitFor();
    await owner.screenshot({
      path: path.join(SCREENSHOTS, 'comments-owner.png')
    });

    // The guest started the thread: they resolve it, and the owner sees it resolved.
    await guestThread.getByRole('button', { name: 'Resolve' }).click();
    await thread
      .locator('.jp-FerryComments-resolvedNote', { hasText: 'Resolved by Cy' })
      .waitFor();
    await ownerCell
      .getByRole('button', { name: '2 comments', exact: true })
      .and(ownerCell.locator('.jp-mod-resolved'))
      .waitFor();
    await guest.screenshot({
      path: path.join(SCREENSHOTS, 'comments-guest-resolved.png')
    });
    // The owner reopens it, then deletes the whole thread.
    await thread.getByRole('button', { name: 'Reopen' }).click();
    await guestThread.getByRole('button', { name: 'Resolve' }).waitFor();
    await thread
      .locator('.jp-FerryComments-comment')
      .first()
      .getByRole('button', { name: 'Delete' })
      .click();
    await guestThread.waitFor({ state: 'detached' });
    await ownerCell
      .getByRole('button', { name: /comment/ })
      .and(ownerCell.locator('.jp-mod-empty'))
      .waitFor({ state: 'attached' });
    await guest.context().close();
    await owner.context().close();
  });
});

/** Whether an element is drawn. */
function visible(locator: Locator): Promise<boolean> {
  return locator.evaluate(node => (node as HTMLElement).offsetParent !== null);
}
