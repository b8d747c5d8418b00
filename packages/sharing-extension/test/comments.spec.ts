/**
 * Comment threads and a link's rights in the page, with real yjs documents: two pages' docs kept in
 * step by exchanging their updates, as the room does.
 */
import * as Y from 'yjs';
import { Widget } from '@lumino/widgets';
import { COMMENTS_ROOT, addComment, commandAllowed } from '../src';
import {
  CommentThread,
  deleteComment,
  relativeTime,
  setResolved,
  threadsOf,
  type CommentEntry
} from '../src/comments';
import { mayComment, type ShareScope } from '../src/api';

/** Two docs that pass every update to each other, as two pages in one room. */
function pair(): [Y.Doc, Y.Doc] {
  const a = new Y.Doc();
  const b = new Y.Doc();
  a.on('update', (update: Uint8Array, origin: unknown) => {
    if (origin !== 'remote') {
      Y.applyUpdate(b, update, 'remote');
    }
  });
  b.on('update', (update: Uint8Array, origin: unknown) => {
    if (origin !== 'remote') {
      Y.applyUpdate(a, update, 'remote');
    }
  });
  return [a, b];
}

describe('comment threads', () => {
  it('shows a comment written in one page under the same cell in the other, with its author', () => {
    const [ada, owner] = pair();
    const written = new CommentThread(ada, 'cell-1', {
      author: () => 'Ada',
      canWrite: true,
      isOwner: false
    });
    const read = new CommentThread(owner, 'cell-1', {
      author: () => 'Owner',
      canWrite: false,
      isOwner: false
    });
    const other = new CommentThread(owner, 'cell-2', {
      author: () => 'Owner',
      canWrite: false,
      isOwner: false
    });
    Widget.attach(written, document.body);
    Widget.attach(read, document.body);

    // No box until asked for (the cell's comment button opens it).
    expect(written.node.querySelector('input')).toBeNull();
    written.open();
    const input = written.node.querySelector('input')!;
    input.value = '  Why 1?  ';
    written.node
      .querySelector('form')!
      .dispatchEvent(new Event('submit', { cancelable: true }));

    const comments = read.node.querySelectorAll('.jp-FerryComments-comment');
    expect(comments).toHaveLength(1);
    expect(
      comments[0].querySelector('.jp-FerryComments-author')!.textContent
    ).toBe('Ada');
    expect(
      comments[0].querySelector('.jp-FerryComments-text')!.textContent
    ).toBe('Why 1?');
    // When, as a time a person reads, with the exact time on hover.
    const time = comments[0].querySelector('time')!;
    expect(time.textContent).toBe('now');
    expect(Date.parse(time.dateTime)).not.toBeNaN();
    expect(input.value).toBe('');
    // Sent: the box closes again.
    expect(written.node.querySelector('input')).toBeNull();
    // Only that cell's thread has it; a read-only thread offers no box.
    expect(
      other.node.querySelectorAll('.jp-FerryComments-comment')
    ).toHaveLength(0);
    expect(read.node.querySelector('form')).toBeNull();
    written.dispose();
    read.dispose();
    other.dispose();
  });

  it('changes nothing of the doc but its comments map (what a comment link may change)', () => {
    const doc = new Y.Doc();
    doc.getArray('cells').push(['x']);
    const touched = new Set<string>();
    doc.on('afterTransaction', (transaction: Y.Transaction) => {
      for (const type of transaction.changedParentTypes.keys()) {
        let root: Y.AbstractType<Y.YEvent<any>> = type; // eslint-disable-line @typescript-eslint/no-explicit-any
        while (root._item?.parent) {
          root = root._item.parent as typeof root;
        }
        for (const [name, value] of doc.share) {
          if (value === root) {
            touched.add(name);
          }
        }
      }
    });
    addComment(doc, 'cell-1', 'Ada', 'first');
    addComment(doc, 'cell-1', 'Ada', 'second');
    expect([...touched]).toEqual([COMMENTS_ROOT]);
    expect(
      doc
        .getMap<Y.Array<{ text: string }>>(COMMENTS_ROOT)
        .get('cell-1')!
        .toArray()
        .map(comment => comment.text)
    ).toEqual(['first', 'second']);
  });
});

describe('replies, resolving and deleting', () => {
  const ada = { author: () => 'Ada', canWrite: true, isOwner: false };
  const owner = { author: () => 'Owner', canWrite: true, isOwner: true };

  it('threads replies under their comment, resolves and reopens, counts them', () => {
    const [a, b] = pair();
    const mine = new CommentThread(a, 'c', ada);
    const theirs = new CommentThread(b, 'c', owner);
    const root = addComment(a, 'c', 'Ada', 'Why 1?');
    addComment(b, 'c', 'Owner', 'Because.', root.id);
    const replies = mine.node.querySelectorAll(
      '.jp-FerryComments-replies .jp-FerryComments-text'
    );
    expect([...replies].map(node => node.textContent)).toEqual(['Because.']);
    expect(mine.counts).toEqual({ all: 2, open: 2 });
    // Ada started the thread: she may resolve it; the owner's reply is not hers to delete.
    const actions = (thread: CommentThread, id: string) =>
      [
        ...thread.node.querySelectorAll(
          `[data-comment-id="${id}"] .jp-FerryComments-action`
        )
      ].map(node => node.textContent);
    const reply = threadsOf(
      a.getMap<Y.Array<CommentEntry>>('comments').get('c')!.toArray()
    )[0].replies[0];
    expect(actions(mine, root.id)).toEqual(['Reply', 'Resolve', 'Delete']);
    expect(actions(mine, reply.id)).toEqual([]);
    expect(actions(theirs, reply.id)).toEqual(['Delete']);
    mine.node
      .querySelector<HTMLButtonElement>('.jp-FerryComments-resolve')!
      .click();
    expect(theirs.counts).toEqual({ all: 2, open: 0 });
    expect(
      theirs.node.querySelector('.jp-FerryComments-resolvedNote')!.textContent
    ).toMatch(/^Resolved by Ada · now$/);
    theirs.node
      .querySelector<HTMLButtonElement>('.jp-FerryComments-resolve')!
      .click();
    expect(mine.counts).toEqual({ all: 2, open: 2 });
    mine.dispose();
    theirs.dispose();
  });

  it('deletes: an author their own comment, the owner a whole thread', () => {
    const [a, b] = pair();
    const root = addComment(a, 'c', 'Ada', 'first');
    const own = addComment(a, 'c', 'Ada', 'mine', root.id);
    addComment(b, 'c', 'Owner', 'reply', root.id);
    setResolved(a, 'c', 'Ada', root.id, true);
    deleteComment(a, 'c', own.id);
    const texts = (doc: Y.Doc) =>
      doc
        .getMap<Y.Array<CommentEntry>>('comments')
        .get('c')!
        .toArray()
        .map(entry => entry.text);
    expect(texts(b)).toEqual(['first', 'reply', '']);
    deleteComment(b, 'c', root.id, true);
    expect(texts(a)).toEqual([]);
  });

  it('says times as a person does', () => {
    const now = Date.parse('2026-01-10T12:00:00Z');
    expect(relativeTime('2026-01-10T11:59:50Z', now)).toBe('now');
    expect(relativeTime('2026-01-10T11:55:00Z', now)).toBe('5 minutes ago');
    expect(relativeTime('2026-01-10T09:00:00Z', now)).toBe('3 hours ago');
    expect(relativeTime('2026-01-09T12:00:00Z', now)).toBe('yesterday');
    expect(relativeTime('not a time', now)).toBe('');
  });
});

describe("a link's rights in the page", () => {
  it.each([
    ['view', false, false],
    ['comment', false, false],
    ['run', true, false],
    ['edit', true, true]
  ] as const)('%s: runs cells %s, deletes cells %s', (scope, runs, edits) => {
    expect(commandAllowed(scope, 'notebook:run-cell-and-select-next')).toBe(
      runs
    );
    expect(commandAllowed(scope, 'notebook:run-all-cells')).toBe(runs);
    expect(commandAllowed(scope, 'notebook:delete-cell')).toBe(edits);
    expect(commandAllowed(scope, 'notebook:run-cell-and-insert-below')).toBe(
      edits
    );
    expect(commandAllowed(scope, 'docmanager:save')).toBe(edits);
    // Everyone may look around.
    expect(commandAllowed(scope, 'notebook:enter-command-mode')).toBe(true);
    // Nobody but the owner restarts, interrupts or changes the owner's kernel.
    expect(commandAllowed(scope, 'notebook:restart-kernel')).toBe(false);
    expect(commandAllowed(scope, 'kernelmenu:interrupt')).toBe(false);
    // A link's guest never trusts outputs; a visitor whose room keeps their trust (a signed-in
    // person the notebook is granted to) trusts for themselves.
    expect(commandAllowed(scope, 'notebook:trust')).toBe(false);
    expect(commandAllowed(scope, 'notebook:trust', true)).toBe(true);
  });
});

describe('who may write comments', () => {
  it("follows the gateway's scope table: comment and edit links, not view or run links", () => {
    // The gateway refuses a run link's comment (rooms' change rule, SCOPE_CAPABILITIES): a page
    // that offered it a comment box would lose what was typed.
    expect(
      ['view', 'comment', 'run', 'edit'].filter(s =>
        mayComment(s as ShareScope)
      )
    ).toEqual(['comment', 'edit']);
  });
});
