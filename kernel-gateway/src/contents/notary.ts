import { createHmac, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { writeAtomic } from './atomic';

type JsonObject = Record<string, unknown>;

/**
 * Notebook trust, as jupyter_server's notary keeps it: a notebook the user saved with every output
 * trusted is signed (an HMAC of its content with a secret of this machine, kept apart from the file),
 * and opens trusted again; any other notebook opens untrusted, whatever `trusted` flags its file
 * carries, so JupyterLab does not run the scripts or HTML of a notebook someone else wrote.
 */
export class NotebookNotary {
  /**
   * @param dir - where the secret (`notebook-secret`, mode 600) and the signatures
   * (`notebook-signatures.json`) live.
   */
  constructor(readonly dir: string) {}

  /**
   * Mark every code cell trusted or not, by whether the file's bytes are ones this notary signed.
   *
   * #### Notes
   * The signature is of the file's bytes as Ferry wrote them (`serializeNotebook`, which nbformat's
   * layout is, in UTF-8), so reading needs no second serialisation of what may be 20 MB of
   * outputs: one HMAC of the bytes read (of bytes, not of the decoded text: a seventh of the time).
   * A file changed outside Ferry opens untrusted, as a notebook someone else wrote should.
   *
   * @param nb - the parsed notebook, marked in place.
   * @param bytes - the file's bytes it was parsed from.
   */
  async mark(nb: JsonObject, bytes: Buffer): Promise<void> {
    NotebookNotary.unmark(nb);
    const trusted = (await this._signatures()).has(await this._digest(bytes));
    for (const cell of Private.codeCells(nb)) {
      Private.metadata(cell).trusted = trusted;
    }
  }

  /**
   * Whether a notebook about to be written is trusted: every code cell is, or has no rich output to
   * distrust, as nbformat's `check_cells` decides.
   */
  static trusted(nb: JsonObject): boolean {
    return Private.codeCells(nb).every(
      cell =>
        Private.metadata(cell).trusted === true ||
        !((cell.outputs ?? []) as JsonObject[]).some(
          output =>
            (output.output_type === 'execute_result' ||
              output.output_type === 'display_data') &&
            Object.keys(output).some(
              key =>
                !['output_type', 'execution_count', 'metadata'].includes(key)
            )
        )
    );
  }

  /** Sign the bytes of a trusted notebook as they are written, so that it opens trusted again. */
  async sign(bytes: Buffer): Promise<void> {
    await this._add([await this._digest(bytes)]);
  }

  /**
   * Sign cells' outputs this notary's user trusts in a room's notebook that is not theirs (another
   * person's folder), so that they show trusted to them again while those outputs stay the same.
   *
   * @param fileId - the notebook's file id (it follows renames).
   * @param cells - cell id to its outputs (canonical JSON).
   */
  async signOutputs(fileId: string, cells: Map<string, string>): Promise<void> {
    await this._add(
      await Promise.all(
        [...cells].map(([id, outputs]) =>
          this._digest(Private.outputsText(fileId, id, outputs))
        )
      )
    );
  }

  /** The cells of `cells` (id to canonical outputs) whose outputs this notary signed. */
  async signedOutputs(
    fileId: string,
    cells: Map<string, string>
  ): Promise<Set<string>> {
    const signatures = await this._signatures();
    const signed = new Set<string>();
    for (const [id, outputs] of cells) {
      const digest = await this._digest(
        Private.outputsText(fileId, id, outputs)
      );
      if (signatures.has(digest)) {
        signed.add(id);
      }
    }
    return signed;
  }

  /** Keep `digests` among the signatures (the oldest go past {@link MAX_SIGNATURES}). */
  private async _add(digests: string[]): Promise<void> {
    this._writing = this._writing.then(async () => {
      const signatures = await this._signatures();
      if (digests.every(digest => signatures.has(digest))) {
        return;
      }
      for (const digest of digests) {
        // Signed again: it is the newest, the last to go.
        signatures.delete(digest);
        signatures.add(digest);
      }
      const kept = [...signatures].slice(-NotebookNotary.MAX_SIGNATURES);
      this._loaded = Promise.resolve(new Set(kept));
      await fs.mkdir(this.dir, { recursive: true });
      await writeAtomic(
        path.join(this.dir, 'notebook-signatures.json'),
        JSON.stringify(kept)
      );
    });
    await this._writing;
  }

  /** Remove every cell's `trusted` flag. */
  static unmark(nb: JsonObject): void {
    for (const cell of (nb.cells ?? []) as JsonObject[]) {
      delete Private.metadata(cell).trusted;
    }
  }

  private async _digest(bytes: Buffer | string): Promise<string> {
    return createHmac('sha256', await this._secret())
      .update(bytes)
      .digest('hex');
  }

  private _secret(): Promise<Buffer> {
    this._key ??= (async () => {
      const file = path.join(this.dir, 'notebook-secret');
      try {
        return Buffer.from(await fs.readFile(file, 'utf8'), 'base64');
      } catch {
        const secret = randomBytes(32);
        await fs.mkdir(this.dir, { recursive: true });
        try {
          await fs.writeFile(file, secret.toString('base64'), {
            mode: 0o600,
            flag: 'wx'
          });
          return secret;
        } catch {
          // Another gateway made it first: use theirs.
          return Buffer.from(await fs.readFile(file, 'utf8'), 'base64');
        }
      }
    })();
    return this._key;
  }

  private _signatures(): Promise<Set<string>> {
    this._loaded ??= fs
      .readFile(path.join(this.dir, 'notebook-signatures.json'), 'utf8')
      .then(text => new Set(JSON.parse(text) as string[]))
      .catch(() => new Set<string>());
    return this._loaded;
  }

  private _key: Promise<Buffer> | undefined;
  private _loaded: Promise<Set<string>> | undefined;
  private _writing: Promise<void> = Promise.resolve();
}

export namespace NotebookNotary {
  /** Signatures kept; the oldest go first (nbformat keeps 65535 in its database). */
  export const MAX_SIGNATURES = 10000;
}

namespace Private {
  /**
   * What a cell's outputs signature is of: a prefix no notebook file starts with (files are JSON),
   * so a cell's signature never passes for a notebook's, nor one notebook's cell for another's.
   */
  export function outputsText(
    fileId: string,
    cellId: string,
    outputs: string
  ): string {
    return `ferry-cell-outputs ${JSON.stringify([fileId, cellId, outputs])}`;
  }

  export function codeCells(nb: JsonObject): JsonObject[] {
    return ((nb.cells ?? []) as JsonObject[]).filter(
      cell => cell.cell_type === 'code'
    );
  }

  export function metadata(cell: JsonObject): JsonObject {
    if (
      typeof cell.metadata !== 'object' ||
      cell.metadata === null ||
      Array.isArray(cell.metadata)
    ) {
      cell.metadata = {};
    }
    return cell.metadata as JsonObject;
  }
}
