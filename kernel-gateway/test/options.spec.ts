import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Command } from 'commander';
import { declareOptions } from '../src/cli/options';
import { loadProfilesFile } from '../src/engines';
import {
  DEFAULT_GATEWAY_OPTIONS,
  GATEWAY_OPTIONS,
  gatewaySettings,
  type GatewayFlags
} from '../src/options';

const repo = path.join(__dirname, '..', '..');

/** Parse `args` as `ferry gateway` does, without running a gateway. */
function parseGateway(args: string[]): GatewayFlags {
  let parsed: GatewayFlags | undefined;
  declareOptions(new Command('gateway'), GATEWAY_OPTIONS)
    .exitOverride()
    .action((flags: GatewayFlags) => {
      parsed = flags;
    })
    .parse(args, { from: 'user' });
  return parsed!;
}

describe('the option tables', () => {
  it('write docs/options.md as it is (run npm run docs:options after changing an option)', () => {
    const written = execFileSync(
      process.execPath,
      [path.join(repo, 'scripts', 'options-reference.mjs'), '--stdout'],
      { encoding: 'utf8' }
    );
    const page = readFileSync(path.join(repo, 'docs', 'options.md'), 'utf8');
    expect(page).toBe(written);
    expect(page).toContain('`--max-share-links <count>`');
  });

  it('turn a command line into the gateway settings it names, in their units', () => {
    const flags = parseGateway([
      '--root-dir',
      'notebooks',
      '--allow-origin',
      'https://a.example,https://b.example',
      '--allow-origin',
      'https://c.example',
      '--replay-buffer-mb',
      '2',
      '--slow-client-timeout',
      '3',
      '--iopub-msg-rate-limit',
      '5',
      '--max-share-links',
      '1',
      '--headers-timeout',
      '4',
      '--room-idle',
      '7',
      '--cull-interval',
      '0',
      '--share-devices',
      '0',
      '--placement',
      'spread',
      '--job-worker-command',
      '/opt/ferry/bin/ferry  --flag',
      '--slurm-rest-url',
      'unix:/run/slurmrestd.sock',
      '--kube-namespace',
      'gpu'
    ]);
    const settings = gatewaySettings(flags, { SLURM_JWT: 'from-env' });
    expect(settings).toMatchObject({
      rootDir: path.resolve('notebooks'),
      allowOrigins: [
        'https://a.example',
        'https://b.example',
        'https://c.example'
      ],
      replayBytes: 2 * 2 ** 20,
      slowClientTimeoutMs: 3000,
      rateLimits: { messagesPerSecond: 5, bytesPerSecond: undefined },
      roomTimings: { freeAfterMs: 7000 },
      culling: { intervalMs: 1000, idleTimeoutMs: 0 },
      scheduling: { policy: 'spread', maxKernelsPerDevice: 1 },
      slurm: {
        workerHost: '127.0.0.1',
        workerCommand: ['/opt/ferry/bin/ferry', '--flag'],
        rest: { url: 'unix:/run/slurmrestd.sock', token: 'from-env' }
      },
      kubernetes: { namespace: 'gpu', workerHost: '127.0.0.1' },
      workerCredentials: undefined
    });
    expect(settings.limits).toMatchObject({
      linksPerNotebook: 1,
      headersTimeoutMs: 4000,
      maxKernels: 64
    });
  });

  it('take --auth <mode> and --no-auth into one value, and build --auth oidc from its flags', () => {
    expect(parseGateway([]).auth).toBe('token');
    expect(parseGateway(['--no-auth']).auth).toBe(false);
    expect(gatewaySettings(parseGateway(['--no-auth']), {}).auth).toBe(false);
    expect(gatewaySettings(parseGateway([]), {})).toMatchObject({
      auth: true,
      oidc: undefined
    });
    expect(() => parseGateway(['--auth', 'magic'])).toThrow();
    expect(() => gatewaySettings(parseGateway(['--auth', 'oidc']), {})).toThrow(
      '--auth oidc needs --oidc-issuer and --oidc-client-id'
    );
    const dir = mkdtempSync(path.join(tmpdir(), 'ferry-options-'));
    const secretFile = path.join(dir, 'secret');
    writeFileSync(secretFile, 'the-secret\n');
    try {
      const flags = parseGateway([
        '--auth',
        'oidc',
        '--oidc-issuer',
        'https://id.example.org/realms/lab',
        '--oidc-client-id',
        'ferry',
        '--oidc-client-secret-file',
        secretFile,
        '--oidc-scopes',
        'openid,profile groups',
        '--oidc-admin-group',
        'admins,staff',
        '--session-idle-timeout',
        '60',
        '--user-uids',
        '61000-61999'
      ]);
      expect(gatewaySettings(flags, {})).toMatchObject({
        auth: true,
        oidc: {
          issuer: 'https://id.example.org/realms/lab',
          clientId: 'ferry',
          clientSecret: 'the-secret',
          scopes: ['openid', 'profile', 'groups'],
          usernameClaim: 'preferred_username',
          groupsClaim: 'groups',
          adminUsers: [],
          adminGroups: ['admins', 'staff'],
          timeoutMs: 10_000
        },
        sessions: { idleMs: 60_000 },
        userUids: { first: 61000, last: 61999 }
      });
      expect(() => parseGateway(['--user-uids', '0-10'])).toThrow();
      writeFileSync(secretFile, '\n');
      expect(() => gatewaySettings(flags, {})).toThrow('is empty');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("build --auth jupyterhub from its flags or a Hub-launched service's environment, never a token on the command line", () => {
    const saved = {
      url: process.env.JUPYTERHUB_API_URL,
      name: process.env.JUPYTERHUB_SERVICE_NAME
    };
    delete process.env.JUPYTERHUB_API_URL;
    delete process.env.JUPYTERHUB_SERVICE_NAME;
    const dir = mkdtempSync(path.join(tmpdir(), 'ferry-options-'));
    try {
      const bare = parseGateway(['--auth', 'jupyterhub']);
      expect(() => gatewaySettings(bare, {})).toThrow(
        '--auth jupyterhub needs --hub-api-url'
      );
      expect(() =>
        parseGateway(['--auth', 'jupyterhub', '--hub-api-token', 'secret'])
      ).toThrow();
      const tokenFile = path.join(dir, 'token');
      writeFileSync(tokenFile, 'from-the-file\n');
      expect(
        gatewaySettings(
          parseGateway([
            '--auth',
            'jupyterhub',
            '--hub-api-url',
            'http://10.0.0.2:8081/hub/api',
            '--hub-url',
            'https://hub.example.org',
            '--hub-service-name',
            'gpus',
            '--hub-api-token-file',
            tokenFile
          ]),
          { JUPYTERHUB_API_TOKEN: 'from-the-environment' }
        )
      ).toMatchObject({
        oidc: undefined,
        jupyterhub: {
          apiUrl: 'http://10.0.0.2:8081/hub/api',
          url: 'https://hub.example.org',
          serviceName: 'gpus',
          apiToken: 'from-the-file'
        }
      });
      // As the Hub starts a managed service: everything from its environment.
      process.env.JUPYTERHUB_API_URL = 'http://127.0.0.1:8081/hub/api';
      process.env.JUPYTERHUB_SERVICE_NAME = 'ferry-lab';
      expect(
        gatewaySettings(bare, { JUPYTERHUB_API_TOKEN: 'from-the-environment' })
          .jupyterhub
      ).toMatchObject({
        apiUrl: 'http://127.0.0.1:8081/hub/api',
        serviceName: 'ferry-lab',
        apiToken: 'from-the-environment'
      });
      expect(() => gatewaySettings(bare, {})).toThrow(
        "needs the service's api_token"
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
      for (const [name, value] of [
        ['JUPYTERHUB_API_URL', saved.url],
        ['JUPYTERHUB_SERVICE_NAME', saved.name]
      ] as const) {
        if (value === undefined) {
          delete process.env[name];
        } else {
          process.env[name] = value;
        }
      }
    }
  });

  it("take --auth oidc's settings from the profiles file, a flag given winning over its field", () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ferry-options-'));
    try {
      writeFileSync(path.join(dir, 'oidc-secret'), 'from-the-file\n');
      const file = path.join(dir, 'profiles.yaml');
      writeFileSync(
        file,
        [
          'oidc:',
          '  issuer: https://keycloak.example.org/realms/lab',
          '  client_id: ferry',
          '  client_secret_file: oidc-secret',
          '  scopes: [openid, profile, groups]',
          '  admin_groups: [ferry-admins]',
          '  timeout_seconds: 5',
          ''
        ].join('\n')
      );
      const profiles = loadProfilesFile(file);
      expect(profiles.oidc?.client_secret_file).toBe(
        path.join(dir, 'oidc-secret')
      );
      expect(
        gatewaySettings(
          parseGateway([
            '--auth',
            'oidc',
            '--oidc-client-id',
            'ferry-lab',
            '--oidc-admin-group',
            'staff'
          ]),
          {},
          profiles
        ).oidc
      ).toEqual({
        issuer: 'https://keycloak.example.org/realms/lab',
        clientId: 'ferry-lab',
        clientSecret: 'from-the-file',
        scopes: ['openid', 'profile', 'groups'],
        usernameClaim: 'preferred_username',
        groupsClaim: 'groups',
        adminUsers: [],
        adminGroups: ['staff', 'ferry-admins'],
        timeoutMs: 5000,
        redirectUrl: undefined
      });
      // A secret written into the file itself is refused, naming the field.
      writeFileSync(file, 'oidc:\n  client_secret: s3cret\n');
      expect(() => loadProfilesFile(file)).toThrow(/oidc/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("give a gateway made in code the command line's defaults, but the state directory", () => {
    expect(DEFAULT_GATEWAY_OPTIONS).toEqual({
      auth: true,
      rootDir: process.cwd(),
      allowOrigins: [],
      envAllow: [],
      replayBytes: 16 * 2 ** 20,
      clientBufferBytes: 64 * 2 ** 20,
      maxMessageBytes: 64 * 2 ** 20,
      rateLimits: {},
      limits: {
        maxKernels: 64,
        maxKernelsPerUser: 64,
        maxTerminals: 16,
        kernelStartsPerMinute: 30,
        maxJobsPerUser: 32,
        wsMessagesPerSecond: 1000,
        guestWsMessagesPerSecond: 100,
        connectionsPerLink: 64,
        linksPerNotebook: 20,
        visitorsPerLink: 500,
        authFailuresPerMinute: 20,
        pendingConnectionsPerAddress: 128,
        pendingConnections: 1024,
        headersTimeoutMs: 20_000,
        requestTimeoutMs: 300_000
      },
      culling: {
        idleTimeoutMs: 0,
        intervalMs: 300_000,
        cullConnected: false,
        cullBusy: false
      },
      workerGraceMs: 30_000,
      usageFlushIntervalMs: 5_000,
      usageRetentionMs: 400 * 24 * 3600 * 1000,
      sessions: { idleMs: 24 * 3600_000, maxMs: 14 * 24 * 3600_000 },
      kernelspecAccelerators: 'auto',
      scheduling: { policy: 'pack', maxKernelsPerDevice: 1 },
      // Not `holds.mode`: a gateway made in code holds devices from start to end.
      holds: {
        idleReturnMs: { gpu: 30 * 60_000, tpu: 20 * 60_000 },
        when: 'waiting',
        warningMs: 5 * 60_000,
        strategy: 'restart'
      }
    });
    // Left out, a gateway keeps its state in a temporary directory, not in ~/.ferry/state.
    expect('stateDir' in DEFAULT_GATEWAY_OPTIONS).toBe(false);
  });

  it('refuse a table whose name is not where commander puts the value', () => {
    expect(() =>
      declareOptions(new Command('x'), {
        tokenFil: { flag: '--token-file <file>', help: 'a file' }
      })
    ).toThrow('option --token-file <file> lands in tokenFile, not tokenFil');
  });
});
