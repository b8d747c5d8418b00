/**
 * Each person's own choices in `/api/accelerators` and its stream, through a real gateway process
 * (`--auth oidc` against a real OpenID Provider, simulated H100s, a real ipykernel): Ann's group
 * `students` has a pool of 8 s of GPU, Ben's group none. Once Ann's kernel has used the pool up (its
 * devices go back), Ann's snapshot, stream and `/api/accelerators/choices` offer the H100s as
 * unavailable in the words of the refusal her start would get, while Ben's, at the same moment,
 * offer them free. Each step waits for an event or an answer, never for time.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createParser } from 'eventsource-parser';
import WebSocket from 'ws';
import { awaitNamed, expectSchema } from './helpers';
import {
  callAs as call,
  signIn,
  startOidcGateway,
  type IOidcGateway,
  type ISignedIn
} from './oidc-harness';

jest.setTimeout(180_000);

interface IChoice {
  label: string;
  request: { kind: string; model?: string; count?: number };
  availability: string;
  reason?: string;
}

/** The first `count` events of `/api/accelerators/stream` as `who` (a snapshot, then updates). */
async function streamed(
  url: string,
  who: ISignedIn,
  count: number
): Promise<{ event: string; data: { choices: IChoice[] } }[]> {
  const abort = new AbortController();
  const response = await fetch(`${url}/api/accelerators/stream`, {
    headers: who.headers,
    signal: abort.signal
  });
  expect(response.status).toBe(200);
  const events: { event: string; data: { choices: IChoice[] } }[] = [];
  const parser = createParser({
    onEvent: message =>
      events.push({
        event: message.event ?? 'message',
        data: JSON.parse(message.data)
      })
  });
  const decoder = new TextDecoder();
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      parser.feed(decoder.decode(chunk, { stream: true }));
      if (events.length >= count) {
        break;
      }
    }
  } finally {
    abort.abort();
  }
  return events.slice(0, count);
}

/** The H100 choices of a list, by label. */
const h100 = (choices: IChoice[]) =>
  choices.filter(c => c.request.kind === 'gpu' && c.request.model === 'H100');

const POOL_USED_UP =
  /^The pool of your group students of 8 s of GPU device time in 1 h is used up by its members/;

describe("each person's choices (a gateway process, two people)", () => {
  let env: IOidcGateway;
  let url: string;
  let dir: string;
  let ann: ISignedIn;
  let ben: ISignedIn;
  let events: WebSocket;
  /** The kernels whose devices went back for a quota, as Ann's event stream told. */
  const returned = new Set<string>();
  let onReturned = (): void => undefined;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'ferry-choices-people-'));
    const profiles = path.join(dir, 'profiles.yaml');
    writeFileSync(
      profiles,
      [
        'quotas:',
        '  groups:',
        '    students:',
        '      pool: { period: rolling-1h, gpu: 8s }',
        ''
      ].join('\n')
    );
    env = await startOidcGateway({
      groups: { ann: ['students'], ben: ['staff'] },
      args: [
        '--profiles',
        profiles,
        '--simulate',
        'gpu:H100:2',
        '--hold-devices',
        'always',
        '--kernel-user',
        'root'
      ]
    });
    url = env.gateway.url;
    ann = await signIn(url, 'ann');
    ben = await signIn(url, 'ben');
    // Ann's quota events: the one that says her devices went back.
    events = new WebSocket(
      `${url.replace(/^http/, 'ws')}/api/events/subscribe`,
      { headers: { Cookie: ann.cookie } }
    );
    events.on('message', data => {
      const e = JSON.parse(String(data)) as Record<string, unknown>;
      if (
        e.schema_id === 'https://ferry.dev/events/quota/v1' &&
        e.action === 'returned'
      ) {
        returned.add(e.kernel_id as string);
        onReturned();
      }
    });
    await new Promise((resolve, reject) => {
      events.once('open', resolve);
      events.once('error', reject);
    });
  });

  afterAll(async () => {
    events?.close();
    await env?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('offers Ann the H100s as refused once her pool is used up, and Ben the same H100s free', async () => {
    // Before any use, both are offered the H100s free.
    for (const who of [ann, ben]) {
      const model = (await call(url, who, 'GET', '/api/accelerators')).body;
      expect(h100(model.choices).map(c => c.availability)).toEqual([
        'free',
        'free'
      ]);
    }

    // Ann's kernel holds an H100 from its start and uses the pool up; its devices go back.
    const started = await call(url, ann, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'H100', count: 1 }
    });
    expect(started.status).toBe(201);
    const id = started.body.id as string;
    await awaitNamed(
      "the quota event that says Ann's kernel's devices went back",
      new Promise<void>(resolve => {
        onReturned = () => returned.has(id) && resolve();
        onReturned();
      }),
      120_000
    );

    // The snapshot: Ann's H100s are refused in the words her start would get; Ben's are free.
    const annModel = (await call(url, ann, 'GET', '/api/accelerators')).body;
    const benModel = (await call(url, ben, 'GET', '/api/accelerators')).body;
    expectSchema('Accelerators', annModel);
    expectSchema('Accelerators', benModel);
    const refusedStart = await call(url, ann, 'POST', '/api/kernels', {
      name: 'python3',
      accelerator: { kind: 'gpu', model: 'H100', count: 1 }
    });
    expect(refusedStart.status).toBe(403);
    for (const choice of h100(annModel.choices)) {
      expect(choice.availability).toBe('unavailable');
      expect(choice.reason).toMatch(POOL_USED_UP);
    }
    expect(h100(annModel.choices)[0].reason).toBe(refusedStart.body.message);
    expect(annModel.choices[0]).toMatchObject({
      label: 'CPU',
      availability: 'free'
    });
    expect(h100(benModel.choices).map(c => c.availability)).toEqual([
      'free',
      'free'
    ]);

    // The stream: its snapshot and the update after it, each person's own.
    const [annStream, benStream] = await awaitNamed(
      "a snapshot and an update on Ann's and Ben's streams",
      Promise.all([streamed(url, ann, 2), streamed(url, ben, 2)])
    );
    expect(annStream.map(e => e.event)).toEqual(['snapshot', 'update']);
    expect(benStream.map(e => e.event)).toEqual(['snapshot', 'update']);
    for (const { data } of annStream) {
      for (const choice of h100(data.choices)) {
        expect(choice.availability).toBe('unavailable');
        expect(choice.reason).toMatch(POOL_USED_UP);
      }
    }
    for (const { data } of benStream) {
      expectSchema('AcceleratorsUpdate', data);
      expect(h100(data.choices).map(c => c.availability)).toEqual([
        'free',
        'free'
      ]);
    }

    // And the picker's question for a new kernel in an environment or none answers the same.
    const annChoices = (
      await call(url, ann, 'GET', '/api/accelerators/choices')
    ).body.choices as IChoice[];
    const benChoices = (
      await call(url, ben, 'GET', '/api/accelerators/choices')
    ).body.choices as IChoice[];
    expect(h100(annChoices).map(c => c.availability)).toEqual([
      'unavailable',
      'unavailable'
    ]);
    expect(h100(benChoices).map(c => c.availability)).toEqual(['free', 'free']);
  });
});
