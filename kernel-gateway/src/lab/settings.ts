import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import Ajv, { type ValidateFunction } from 'ajv';
import JSON5 from 'json5';
import type { Logger } from 'pino';
import { writeAtomic } from '../contents';
import type { RestSchemas } from '../protocol';
import { LabApiError } from './errors';

/**
 * One plugin's settings, as jupyterlab_server's `rest-api.yml` `SettingsEntry` (schema
 * `SettingsEntry`); `raw` is the user's settings as written (JSON5, comments kept).
 */
type ISettingsEntry = RestSchemas['SettingsEntry'];

/**
 * JupyterLab's settings as jupyterlab_server keeps them: plugin schemas from the build, the user's
 * raw JSON5 in `<settingsDir>/<package>/<plugin>.jupyterlab-settings`, validated against the schema
 * on every save (and on read: invalid user settings are dropped with a warning, as there).
 */
export class SettingsStore {
  constructor(options: SettingsStore.IOptions) {
    this._schemasDir = options.schemasDir;
    this._settingsDir = options.settingsDir;
    this._logger = options.logger;
    // Plugin schemas carry `jupyter.lab.*` keywords Ajv does not know: not strict.
    this._ajv = new Ajv({ strict: false, allErrors: true, logger: false });
  }

  /** Every plugin's id, sorted as jupyterlab_server sorts them (descending). */
  async ids(): Promise<string[]> {
    const ids: string[] = [];
    const walk = async (dir: string, rel: string[]): Promise<void> => {
      let entries;
      try {
        entries = await fs.readdir(dir, { withFileTypes: true });
      } catch {
        return;
      }
      for (const entry of entries) {
        if (entry.isDirectory()) {
          await walk(path.join(dir, entry.name), [...rel, entry.name]);
        } else if (entry.name.endsWith('.json') && rel.length > 0) {
          ids.push(`${rel.join('/')}:${entry.name.slice(0, -'.json'.length)}`);
        }
      }
    };
    await walk(this._schemasDir, []);
    return ids.sort().reverse();
  }

  /** Every plugin's entry. */
  async list(): Promise<ISettingsEntry[]> {
    return Promise.all((await this.ids()).map(id => this.get(id)));
  }

  /**
   * One plugin's entry.
   *
   * @throws LabApiError 404 for an unknown plugin.
   */
  async get(id: string): Promise<ISettingsEntry> {
    const { schema, version } = await this._schema(id);
    const file = this._userFile(id);
    let raw = '{}';
    let settings: Record<string, unknown> = {};
    let lastModified: string | null = null;
    let created: string | null = null;
    try {
      const stat = await fs.stat(file);
      lastModified = stat.mtime.toISOString();
      created = (
        stat.birthtimeMs > 0 ? stat.birthtime : stat.ctime
      ).toISOString();
      raw = (await fs.readFile(file, 'utf8')) || '{}';
      settings = Private.parseObject(raw);
      const validate = this._validator(id, schema);
      if (!validate(settings)) {
        throw new Error(
          this._ajv.errorsText(validate.errors, { dataVar: 'settings' })
        );
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
        this._logger.warn(
          { plugin: id, file, err: (error as Error).message },
          'ignoring invalid user settings'
        );
      }
      raw = '{}';
      settings = {};
    }
    return {
      id,
      schema,
      version,
      raw,
      settings,
      last_modified: lastModified,
      created
    };
  }

  /**
   * One plugin's entry with `raw` as its user settings instead of the user's file (the schema's
   * defaults alone when undefined): what a share link's visitor is given, never the owner's.
   *
   * @throws LabApiError 404 for an unknown plugin.
   */
  async entryOf(id: string, raw: string | undefined): Promise<ISettingsEntry> {
    const { schema, version } = await this._schema(id);
    return {
      id,
      schema,
      version,
      raw: raw ?? '{}',
      settings: raw === undefined ? {} : await this.check(id, raw),
      last_modified: null,
      created: null
    };
  }

  /**
   * Validate raw JSON5 settings against the plugin's schema and write them as given (comments kept).
   *
   * @throws LabApiError 400 for JSON5 that does not parse or settings the schema refuses; 404 for
   * an unknown plugin.
   */
  async save(id: string, raw: string): Promise<void> {
    await this.check(id, raw);
    const file = this._userFile(id);
    await fs.mkdir(path.dirname(file), { recursive: true });
    await writeAtomic(file, raw);
  }

  /**
   * The settings `raw` holds, validated against the plugin's schema.
   *
   * @throws LabApiError 400 for JSON5 that does not parse or settings the schema refuses; 404 for
   * an unknown plugin.
   */
  async check(id: string, raw: string): Promise<Record<string, unknown>> {
    const { schema } = await this._schema(id);
    let settings: Record<string, unknown>;
    try {
      settings = Private.parseObject(raw);
    } catch (error) {
      throw new LabApiError(
        400,
        `Failed parsing raw settings of ${id}: ${(error as Error).message}`
      );
    }
    const validate = this._validator(id, schema);
    if (!validate(settings)) {
      throw new LabApiError(
        400,
        `Failed validating input for ${id}: ${this._ajv.errorsText(validate.errors, { dataVar: 'settings' })}`
      );
    }
    return settings;
  }

  private async _schema(
    id: string
  ): Promise<{ schema: Record<string, unknown>; version: string }> {
    const file = this._schemaFile(id);
    let text: string;
    try {
      text = await fs.readFile(file, 'utf8');
    } catch {
      throw new LabApiError(404, `Schema not found: ${id}`);
    }
    const schema = JSON.parse(text) as Record<string, unknown>;
    let version = 'N/A';
    try {
      const orig = JSON.parse(
        await fs.readFile(
          path.join(path.dirname(file), 'package.json.orig'),
          'utf8'
        )
      ) as { version?: string };
      version = orig.version ?? version;
    } catch {
      // no package.json.orig beside the schema: jupyterlab_server says N/A too
    }
    return { schema, version };
  }

  private _validator(
    id: string,
    schema: Record<string, unknown>
  ): ValidateFunction {
    const key = JSON.stringify(schema);
    const cached = this._validators.get(id);
    if (cached?.key === key) {
      return cached.validate;
    }
    const { $schema: _ignored, ...compilable } = schema;
    const validate = this._ajv.compile(compilable);
    this._validators.set(id, { key, validate });
    return validate;
  }

  /** `<schemasDir>/<package>/<plugin>.json`; ids that would leave the folder are unknown. */
  private _schemaFile(id: string): string {
    return path.join(this._schemasDir, ...Private.split(id)) + '.json';
  }

  private _userFile(id: string): string {
    return (
      path.join(this._settingsDir, ...Private.split(id)) +
      '.jupyterlab-settings'
    );
  }

  private _schemasDir: string;
  private _settingsDir: string;
  private _logger: Logger;
  private _ajv: Ajv;
  private _validators = new Map<
    string,
    { key: string; validate: ValidateFunction }
  >();
}

export namespace SettingsStore {
  export interface IOptions {
    /** The build's `schemas/` folder. */
    schemasDir: string;
    /** Where the user's settings are written. */
    settingsDir: string;
    logger: Logger;
  }
}

namespace Private {
  /** `@scope/package:plugin` as path parts; anything else is an unknown plugin. */
  export function split(id: string): string[] {
    const match =
      /^((?:@[A-Za-z0-9._-]+\/)?[A-Za-z0-9._-]+):([A-Za-z0-9._-]+)$/.exec(id);
    if (
      !match ||
      match[1].split('/').some(p => p === '.' || p === '..') ||
      match[2].startsWith('.')
    ) {
      throw new LabApiError(404, `Schema not found: ${id}`);
    }
    return [...match[1].split('/'), match[2]];
  }

  export function parseObject(raw: string): Record<string, unknown> {
    const value: unknown = JSON5.parse(raw);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new Error('settings must be an object');
    }
    return value as Record<string, unknown>;
  }
}
