/**
 * File ids follow a notebook through Ferry's own saves, at every moment of one: a share link asks
 * which file its id stands for on every request, and a request that lands between a save's rename
 * and the store's commit must still find the notebook (it once found "another file" and ended the
 * link for good: every later visitor was refused).
 */
import {
  mkdtempSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { replacements } from '../src/contents';
import { EventBus } from '../src/events';
import { FileIdStore } from '../src/rooms/file-ids';
import { StateStore } from '../src/store';

describe('file ids', () => {
  let dir: string;
  let store: StateStore;
  let fileIds: FileIdStore;

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-file-ids-'));
    store = new StateStore(path.join(dir, 'state'));
    fileIds = new FileIdStore({ store, rootDir: dir });
  });

  afterEach(async () => {
    fileIds.dispose();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * What a save through Ferry does (contents/atomic.ts): a new file, the listeners told just
   * before it takes the name, then the rename; all at once here, so that no commit of the store
   * can come between.
   */
  function saveInPlace(name: string, text: string): void {
    const file = path.join(dir, name);
    const staged = path.join(dir, '.~ferry-0123456789abcdef.tmp');
    writeFileSync(staged, text);
    const replacement = {
      file,
      previous: statSync(file),
      written: statSync(staged)
    };
    for (const listener of replacements) {
      listener(replacement);
    }
    renameSync(staged, file);
  }

  it('is the same notebook right after a save renames it in place, before the store commits', async () => {
    writeFileSync(path.join(dir, 'nb.ipynb'), '{"cells": []}');
    const { fileId } = await fileIds.index('nb.ipynb');
    expect(fileIds.generation(fileId)).toBe(0);

    saveInPlace('nb.ipynb', '{"cells": [1]}');
    // Asked before anything was awaited: the identity the save announced is already known.
    expect(fileIds.generation(fileId)).toBe(0);
    // And once everything is on disk, still the same file, and so after a reopen.
    await store.flushed;
    expect(fileIds.generation(fileId)).toBe(0);
    saveInPlace('nb.ipynb', '{"cells": [2]}');
    expect(fileIds.generation(fileId)).toBe(0);
    fileIds.dispose();
    await store.close();
    store = new StateStore(path.join(dir, 'state'));
    fileIds = new FileIdStore({ store, rootDir: dir });
    expect(fileIds.generation(fileId)).toBe(0);
  });

  it('follows a rename and a delete through Ferry at once, before the store commits', async () => {
    // The bus the contents manager publishes on: a rename is answered right after its event.
    const events = new EventBus();
    fileIds.dispose();
    fileIds = new FileIdStore({ store, rootDir: dir, events });
    const renamed = (from: string, to: string) => {
      renameSync(path.join(dir, from), path.join(dir, to));
      events.emit(EventBus.CONTENTS_SERVICE, {
        action: 'rename',
        path: to,
        source_path: from
      });
    };
    writeFileSync(path.join(dir, 'nb.ipynb'), '{"cells": []}');
    const { fileId } = await fileIds.index('nb.ipynb');

    renamed('nb.ipynb', 'moved.ipynb');
    // Asked before anything was awaited: a link's next request finds its notebook where it went.
    expect(fileIds.path(fileId)).toBe('moved.ipynb');
    expect(fileIds.id('moved.ipynb')).toBe(fileId);
    expect(fileIds.id('nb.ipynb')).toBeUndefined();
    expect(fileIds.generation(fileId)).toBe(0);
    // Renamed again at once: the second move finds the first.
    renamed('moved.ipynb', 'again.ipynb');
    expect(fileIds.path(fileId)).toBe('again.ipynb');
    rmSync(path.join(dir, 'again.ipynb'));
    events.emit(EventBus.CONTENTS_SERVICE, {
      action: 'delete',
      path: 'again.ipynb'
    });
    expect(fileIds.path(fileId)).toBeUndefined();
    expect(fileIds.id('again.ipynb')).toBeUndefined();
    await store.flushed;
    expect(fileIds.path(fileId)).toBeUndefined();
  });

  it('is another notebook when a file took the path outside Ferry, whenever it is asked', async () => {
    writeFileSync(path.join(dir, 'nb.ipynb'), '{"cells": []}');
    writeFileSync(path.join(dir, 'other.ipynb'), '{"cells": ["other"]}');
    const { fileId } = await fileIds.index('nb.ipynb');
    expect(fileIds.generation(fileId)).toBe(0);
    rmSync(path.join(dir, 'nb.ipynb'));
    renameSync(path.join(dir, 'other.ipynb'), path.join(dir, 'nb.ipynb'));
    expect(fileIds.generation(fileId)).toBe(1);
    expect(fileIds.generation(fileId)).toBe(1);
    await store.flushed;
    expect(fileIds.generation(fileId)).toBe(1);
    // Ferry's saves of this new file keep its generation.
    saveInPlace('nb.ipynb', '{"cells": ["other, saved"]}');
    expect(fileIds.generation(fileId)).toBe(1);
  });
});
