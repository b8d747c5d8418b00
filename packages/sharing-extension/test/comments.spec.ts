/**
 * Comment threads and a link's rights in the page, with real yjs documents: two pages' docs kept in
 * step by exchanging their updates, as the room does.
 */
import * as Y from 'yjs';
import { Widget } from '@lumino/widgets';
import { COMMENTS_ROOT, addComment, commandAllowed } from '../src';
import { CommentThread } from '../src/comments';
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
    const written = new CommentThread(ada, 'cell-1', () => 'Ada', true);
    const read = new CommentThread(owner, 'cell-1', () => 'Owner', false);
    const other = new CommentThread(owner, 'cell-2', () => 'Owner', false);
    Widget.attach(written, document.body);
    Widget.attach(read, document.body);

    const input = written.node.querySelector('input')!;
    input.value = '  Why 1?  ';
    written.node
      .querySelector('form')!
      .dispatchEvent(new Event('submit', { cancelable: true }));

    const comments = read.node.querySelectorAll('.jp-FerryComments-comment');
    expect(comments).toHaveLength(1);
    expect(comments[0].textContent).toBe('AdaWhy 1?');
    expect(input.value).toBe('');
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
