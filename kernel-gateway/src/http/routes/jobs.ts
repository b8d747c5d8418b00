/**
 * `/api/jobs`: submit a notebook to run headless, list and read jobs, cancel one, follow one as
 * server-sent events, and download its executed notebook. Owner only: the share guard lets no
 * link's holder reach these routes.
 */
import { Router } from 'express';
import { can, type IIdentityResolver } from '../../auth';
import type { IJobModel, JobService, JobStreamEvent } from '../../jobs';
import type { RestSchemas } from '../../protocol';
import type { ISpace } from '../../users';
import type { IGatewayContext } from '../context';
import { HttpError } from '../errors';
import { OutboundStream, outboundLimits } from '../outbound';
import { principalOf } from '../ownership';
import { validateBody } from '../validation';

/** The routes of jobs. */
export function jobsRouter(
  context: IGatewayContext,
  options: jobsRouter.IOptions
): Router {
  const { jobs, auth } = options;
  const router = Router();
  router.get('/api/jobs', (request, response) => {
    const principal = principalOf(context, request);
    const space = context.spaces.spaceOf(principal);
    response.json(
      jobs
        .list(user => context.spaces.reaches(principal, user))
        .map(job => Private.shown(job, context, space))
    );
  });
  router.post(
    '/api/jobs',
    validateBody(context.schemas, 'JobSubmitRequest'),
    async (request, response) => {
      const principal = auth.resolve(request);
      if (!principal || !can(principal, 'kernels:manage-own')) {
        throw new HttpError(403, 'Jobs are for the owner');
      }
      const body = request.body as RestSchemas['JobSubmitRequest'];
      const space = context.spaces.spaceOf(principal);
      // Paths of the user's folder, as the gateway's root names them.
      const named = (given: string | undefined) => {
        const path =
          given === undefined
            ? undefined
            : context.spaces.toGateway(space, given);
        if (given !== undefined && path === undefined) {
          throw new HttpError(
            400,
            'Jobs read and write notebooks under --root-dir, and --user-root is outside it: send the notebook itself (`notebook`) and no paths'
          );
        }
        return path;
      };
      const path = named(body.path);
      const output = named(body.output_path);
      const job = await jobs.submit(
        {
          ...body,
          ...(path !== undefined ? { path } : {}),
          ...(output !== undefined ? { output_path: output } : {})
        },
        space.owner
      );
      response
        .status(201)
        .location(`/api/jobs/${encodeURIComponent(job.id)}`)
        .json(Private.shown(job, context, space));
    }
  );
  router.get('/api/jobs/:id', (request, response) => {
    const space = context.spaces.spaceOf(principalOf(context, request));
    response.json(Private.shown(jobs.get(request.params.id), context, space));
  });
  router.delete('/api/jobs/:id', async (request, response) => {
    const space = context.spaces.spaceOf(principalOf(context, request));
    response.json(
      Private.shown(await jobs.cancel(request.params.id), context, space)
    );
  });
  router.get('/api/jobs/:id/notebook', (request, response) => {
    const notebook = jobs.notebook(request.params.id);
    const name = jobs.get(request.params.id).name.replace(/[^\w.-]+/g, '_');
    response
      .type('application/x-ipynb+json')
      .attachment(name.endsWith('.ipynb') ? name : `${name}.ipynb`)
      .send(notebook);
  });
  router.get('/api/jobs/:id/events', (request, response) => {
    jobs.get(request.params.id);
    const space = context.spaces.spaceOf(principalOf(context, request));
    response.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      // No buffering in a proxy between: each event goes out as it happens.
      'X-Accel-Buffering': 'no'
    });
    response.flushHeaders();
    const stream = new Private.EventStream(
      OutboundStream.response(
        response,
        outboundLimits(
          context.options.clientBufferBytes,
          context.options.slowClientTimeoutMs ?? 60_000
        ),
        reason =>
          context.logger.warn(
            { job: request.params.id, reason },
            'job event stream closed'
          )
      )
    );
    let stop: () => void = () => undefined;
    const close = () => {
      stop();
      clearInterval(keepAlive);
    };
    // A comment now and then: proxies and clients see the stream is alive while a cell runs long.
    const keepAlive = setInterval(
      () => stream.comment('keep-alive'),
      Private.KEEP_ALIVE_MS
    );
    keepAlive.unref();
    request.on('close', close);
    stop = jobs.follow(request.params.id, event => {
      // Its job as the follower names its notebooks, as the other routes answer it.
      const shown =
        'job' in event
          ? { ...event, job: Private.shown(event.job, context, space) }
          : event;
      if (!stream.send(shown)) {
        close();
        response.destroy();
        return;
      }
      if (event.type === 'end') {
        close();
        response.end();
      }
    });
    if (response.writableEnded) {
      stop();
    }
  });
  return router;
}

/** The options of {@link jobsRouter}. */
export namespace jobsRouter {
  export interface IOptions {
    jobs: JobService;
    /** Who a request acts as (the per-user limit counts per principal). */
    auth: IIdentityResolver;
  }
}

namespace Private {
  /** A job as its user names its notebooks: within their own folder (users/ownership.ts). */
  export function shown(
    job: IJobModel,
    context: IGatewayContext,
    space: ISpace
  ): IJobModel {
    const { spaces } = context;
    return {
      ...job,
      ...(job.path !== undefined
        ? { path: spaces.toUser(space, job.path) }
        : {}),
      ...(job.output_path !== undefined
        ? { output_path: spaces.toUser(space, job.output_path) }
        : {})
    };
  }

  /** How often an idle event stream gets a comment. */
  export const KEEP_ALIVE_MS = 15_000;

  /**
   * Server-sent events on one response: `event:` and one `data:` line of JSON each, under the
   * budget of every outbound stream (a follower too far behind is cut off; it can reconnect).
   */
  export class EventStream {
    constructor(stream: OutboundStream) {
      this._stream = stream;
    }

    /** Write an event; false when the follower was too far behind (its stream is closed). */
    send(event: JobStreamEvent): boolean {
      const data = 'job' in event ? event.job : event.data;
      // JSON has no raw newlines, so one data line holds it.
      return this._stream.send(
        `event: ${event.type}\ndata: ${JSON.stringify(data)}\n\n`
      );
    }

    comment(text: string): void {
      this._stream.send(`: ${text}\n\n`);
    }

    private _stream: OutboundStream;
  }
}
