import * as path from 'node:path';
import { pipeline } from 'node:stream/promises';
import express, { Router, type Request, type Response } from 'express';
import {
  ContentsError,
  type ContentsType,
  type FileContentsManager,
  type IContentsModel,
  type IServedFile
} from '../../contents';
import { HttpError } from '../errors';

/** The contents a request works on: its user's folder, or the gateway's root (contents/spaces.ts). */
export type ContentsFor = (request: Request) => FileContentsManager;

/**
 * `/api/contents/{path}` and its checkpoints, as jupyter_server serves them. Bodies may be as large as
 * JupyterLab sends (a 15 MB file in one base64 PUT), hence a parser of its own.
 */
export function contentsRouter(
  contentsFor: ContentsFor,
  maxBodyBytes: number
): Router {
  const router = Router();
  router.use(
    Private.PREFIX,
    express.json({ limit: maxBodyBytes, type: () => true })
  );
  router.all(/^\/api\/contents(?:\/.*)?$/, async (request, response) => {
    const contents = contentsFor(request);
    const segments = Private.segments(request.path);
    const n = segments.length;
    const checkpoint =
      n >= 2 && segments[n - 2] === 'checkpoints' && request.method !== 'GET'
        ? segments[n - 1]
        : undefined;
    const filePath = checkpoint
      ? segments.slice(0, -2).join('/')
      : segments.join('/');
    if (checkpoint !== undefined) {
      return Private.modifyCheckpoint(
        contents,
        request,
        response,
        filePath,
        checkpoint
      );
    }
    if (n >= 1 && segments[n - 1] === 'checkpoints') {
      return Private.checkpoints(
        contents,
        request,
        response,
        segments.slice(0, -1).join('/')
      );
    }
    switch (request.method) {
      case 'GET':
        return void response.json(
          await contents.get(filePath, Private.getOptions(request))
        );
      case 'POST':
        return Private.post(contents, request, response, filePath);
      case 'PUT': {
        const { model, created } = await contents.save(
          filePath,
          Private.body(request)
        );
        return Private.sendModel(response, created ? 201 : 200, model);
      }
      case 'PATCH': {
        const body = Private.body(request);
        if (typeof body.path !== 'string') {
          throw new HttpError(
            400,
            'The body must name the new path: {"path": "..."}'
          );
        }
        return Private.sendModel(
          response,
          200,
          await contents.rename(filePath, body.path)
        );
      }
      case 'DELETE':
        await contents.delete(filePath);
        return void response.status(204).end();
      default:
        throw new HttpError(
          405,
          `${request.method} is not supported on contents`
        );
    }
  });
  return router;
}

/**
 * `/files/{path}`: a file's bytes, for downloads (`?download=1`) and for what pages link to (images in
 * Markdown). Served in a CSP sandbox, as jupyter_server does, so an HTML file opened from here cannot
 * act on this origin with the user's cookies. The file is opened by the contents service (inside the
 * root, no symlink leading out) and sent from that open file, never reopened by path.
 */
export function filesRouter(contentsFor: ContentsFor): Router {
  const router = Router();
  router.get(/^\/files\/.+$/, async (request, response) => {
    const contents = contentsFor(request);
    const segments = Private.segments(request.path, '/files');
    const file = await contents.openFile(segments.join('/'));
    try {
      await Private.sendFile(request, response, file);
    } finally {
      await file.handle.close();
    }
  });
  return router;
}

namespace Private {
  export const PREFIX = '/api/contents';

  /** The decoded path segments after `prefix`; an encoded slash or backslash is refused. */
  export function segments(requestPath: string, prefix = PREFIX): string[] {
    return requestPath
      .slice(prefix.length)
      .split('/')
      .filter(Boolean)
      .map(segment => {
        try {
          const decoded = decodeURIComponent(segment);
          // An encoded slash or backslash would turn one segment into several: refuse it outright.
          if (/[/\\]/.test(decoded)) {
            throw new ContentsError(
              400,
              `Invalid path segment ${JSON.stringify(decoded)}`
            );
          }
          return decoded;
        } catch (error) {
          if (error instanceof ContentsError) {
            throw error;
          }
          throw new HttpError(400, `Malformed path: ${requestPath}`);
        }
      });
  }

  export function getOptions(
    request: Request
  ): FileContentsManager.IGetOptions {
    const { type, format, content = '1', hash = '0' } = request.query;
    let kind: ContentsType | undefined;
    if (type !== undefined) {
      kind = ['directory', 'file', 'notebook'].includes(String(type))
        ? (String(type) as ContentsType)
        : 'file';
    }
    if (format !== undefined && format !== 'text' && format !== 'base64') {
      throw new HttpError(400, `Format ${JSON.stringify(format)} is invalid`);
    }
    if (content !== '0' && content !== '1') {
      throw new HttpError(400, `Content ${JSON.stringify(content)} is invalid`);
    }
    if (hash !== '0' && hash !== '1') {
      throw new HttpError(
        400,
        `Hash argument ${JSON.stringify(hash)} is invalid. It must be '0' or '1'.`
      );
    }
    return {
      type: kind,
      format: format as 'text' | 'base64' | undefined,
      content: content === '1',
      hash: hash === '1'
    };
  }

  /** The JSON body as an object (an empty body is an empty object). */
  export function body(request: Request): Record<string, unknown> {
    const value: unknown = request.body ?? {};
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new HttpError(400, 'The body must be a JSON object');
    }
    return value as Record<string, unknown>;
  }

  export function sendModel(
    response: Response,
    status: number,
    model: IContentsModel
  ): void {
    response
      .status(status)
      .location(`${PREFIX}/${encodeParts(model.path)}`)
      .json(model);
  }

  export async function post(
    contents: FileContentsManager,
    request: Request,
    response: Response,
    dirPath: string
  ): Promise<void> {
    const body = Private.body(request);
    if (await contents.fileExists(dirPath)) {
      throw new HttpError(400, 'Cannot POST to files, use PUT instead.');
    }
    if (body.copy_from !== undefined) {
      if (typeof body.copy_from !== 'string') {
        throw new HttpError(400, 'copy_from must be a path');
      }
      return sendModel(
        response,
        201,
        await contents.copy(body.copy_from, dirPath)
      );
    }
    for (const key of ['type', 'ext'] as const) {
      if (body[key] !== undefined && typeof body[key] !== 'string') {
        throw new HttpError(400, `${key} must be a string`);
      }
    }
    sendModel(
      response,
      201,
      await contents.newUntitled(dirPath, {
        type: body.type as string | undefined,
        ext: body.ext as string | undefined
      })
    );
  }

  export async function checkpoints(
    contents: FileContentsManager,
    request: Request,
    response: Response,
    filePath: string
  ): Promise<void> {
    if (request.method === 'GET') {
      response.json(await contents.listCheckpoints(filePath));
      return;
    }
    if (request.method !== 'POST') {
      throw new HttpError(
        405,
        `${request.method} is not supported on checkpoints`
      );
    }
    const checkpoint = await contents.createCheckpoint(filePath);
    response
      .status(201)
      .location(
        `${PREFIX}/${encodeParts(filePath)}/checkpoints/${encodeURIComponent(checkpoint.id)}`
      )
      .json(checkpoint);
  }

  export async function modifyCheckpoint(
    contents: FileContentsManager,
    request: Request,
    response: Response,
    filePath: string,
    id: string
  ): Promise<void> {
    if (request.method === 'POST') {
      await contents.restoreCheckpoint(filePath, id);
    } else if (request.method === 'DELETE') {
      await contents.deleteCheckpoint(filePath, id);
    } else {
      throw new HttpError(
        405,
        `${request.method} is not supported on a checkpoint`
      );
    }
    response.status(204).end();
  }

  /**
   * Send an open file as express's `sendFile` would: its type, validators (ETag, Last-Modified,
   * answering 304 when the client's copy is fresh), and one byte range when asked (for seeking in
   * audio and video).
   */
  export async function sendFile(
    request: Request,
    response: Response,
    file: IServedFile
  ): Promise<void> {
    const { stat, name } = file;
    response.setHeader('Content-Security-Policy', 'sandbox allow-scripts');
    response.setHeader('X-Content-Type-Options', 'nosniff');
    response.setHeader('Cache-Control', 'no-cache');
    response.setHeader('Accept-Ranges', 'bytes');
    response.setHeader('Last-Modified', stat.mtime.toUTCString());
    const etag = `W/"${stat.size.toString(16)}-${Math.floor(stat.mtimeMs).toString(16)}"`;
    response.setHeader('ETag', etag);
    response.type(path.extname(name) || 'application/octet-stream');
    if (
      request.query.download !== undefined &&
      request.query.download !== '0'
    ) {
      response.attachment(name);
    }
    if (request.fresh) {
      response.status(304).end();
      return;
    }
    let start = 0;
    let end = stat.size - 1;
    const ifRange = request.get('If-Range');
    const ranges =
      request.get('Range') &&
      (!ifRange || ifRange === etag || ifRange === stat.mtime.toUTCString())
        ? request.range(stat.size)
        : undefined;
    if (ranges === -1) {
      response.setHeader('Content-Range', `bytes */${stat.size}`);
      throw new HttpError(416, 'Range not satisfiable');
    }
    if (
      Array.isArray(ranges) &&
      ranges.type === 'bytes' &&
      ranges.length === 1
    ) {
      ({ start, end } = ranges[0]);
      response.status(206);
      response.setHeader('Content-Range', `bytes ${start}-${end}/${stat.size}`);
    }
    response.setHeader('Content-Length', String(Math.max(0, end - start + 1)));
    if (request.method === 'HEAD' || end < start) {
      response.end();
      return;
    }
    try {
      await pipeline(
        file.handle.createReadStream({ start, end, autoClose: false }),
        response
      );
    } catch (error) {
      // A client that goes away mid-download (a closed tab, a seek in a video) is no failure.
      if (
        (error as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE'
      ) {
        throw error;
      }
    }
  }

  function encodeParts(apiPath: string): string {
    return apiPath.split('/').map(encodeURIComponent).join('/');
  }
}
