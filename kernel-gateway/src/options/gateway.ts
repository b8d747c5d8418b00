/**
 * One file, though long: it is one table, read top to bottom in the order `--help` lists it.
 *
 * Every option of `ferry gateway`, written once: its flag, default, help and the gateway setting it
 * becomes. The command line (cli/gateway.ts), the flags' type, the settings the command line gives
 * ({@link gatewaySettings}), the defaults of a gateway made in code ({@link DEFAULT_GATEWAY_OPTIONS})
 * and the reference page (docs/options.md) all come from this table.
 */
import { readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { DEFAULT_LIMITS, type ILimits } from '../auth';
import { DEFAULT_HUB, type IHubSettings } from '../auth/jupyterhub/settings';
import { DEFAULT_OIDC } from '../auth/oidc/settings';
import type { IOidcSettings } from '../auth/oidc/settings';
import type { IGatewayOptions } from '../config';
import type { IOidcProfile } from '../engines';
import { DEFAULT_ROOM_TIMINGS, type IRoomTimings } from '../rooms';
import type { takeSecretEnv } from '../secrets';
import { LOG_FORMAT, LOG_LEVEL } from './common';
import { kernelHostOptionTable } from './kernel-host';
import {
  defaultSettings,
  mergeSections,
  settingsFrom,
  type Flags,
  type IOptionSection,
  type IOptionSpec,
  type OptionTable,
  type SettingPath
} from './table';
import { parseDuration, parseIdleReturn } from '../kernels';
import {
  collect,
  Convert,
  duration,
  idleReturn,
  kernelspecAccelerators,
  kernelspecEnvironments,
  number,
  retention,
  retentionMs,
  uidRange
} from './values';

/** What `ferry gateway`'s options set: the gateway's options, and the rooms' timing. */
export type GatewaySettings = Partial<Omit<IGatewayOptions, 'limits'>> & {
  limits?: Partial<ILimits>;
  roomTimings?: Partial<IRoomTimings>;
};

type Spec = IOptionSpec<SettingPath<Required<GatewaySettings>>>;

/** `ferry gateway`'s options, section by section, in the order `--help` lists them. */
export const GATEWAY_OPTION_SECTIONS = [
  {
    title: 'Listening and signing in',
    options: {
      ip: {
        flag: '--ip <address>',
        help: 'address to listen on',
        default: '127.0.0.1'
      },
      port: {
        flag: '--port <port>',
        help: 'port to listen on (0 picks a free one)',
        parse: number,
        default: 8888
      },
      tokenFile: {
        flag: '--token-file <file>',
        help: 'a file holding the token clients must present (- reads one line from standard input); else FERRY_TOKEN, else random',
        env: 'FERRY_TOKEN',
        defaultText: 'random',
        notes:
          'every request and websocket carries the token: `Authorization: token T` or `?token=T`'
      },
      keepToken: {
        flag: '--no-keep-token',
        help: 'make a new random token at every start, rather than keep the first one in the state directory',
        notes:
          'kept (the default): a random token is written once to `token` in `--state-dir` (mode 0600) and used again at each start, so open lab tabs and printed links survive a restart; `--token-file` and `FERRY_TOKEN` still win. Start-up says which'
      },
      token: {
        flag: '--token <token>',
        help: 'refused: a token on a command line is readable by every user of the host (`ps`)',
        secret: { env: 'FERRY_TOKEN', file: '--token-file' }
      },
      auth: {
        flag: '--auth <mode>',
        help: 'how people sign in: token (the one owner, with the token), oidc (each person through an OpenID Connect provider) or jupyterhub (each Hub user, as a Hub service); oidc and jupyterhub give each a folder and uid of their own',
        choices: ['token', 'oidc', 'jupyterhub'],
        default: 'token',
        notes:
          'with `oidc` or `jupyterhub`, the token still works for API clients and acts as the owner; see [Many users](multi-user.md)',
        sets: 'auth',
        to: (mode: string | false) => mode !== false,
        negatedBy: {
          flag: '--no-auth',
          help: 'accept requests without a token (local use only)',
          notes: 'logged as a warning'
        }
      },
      rootDir: {
        flag: '--root-dir <dir>',
        help: 'directory notebooks live in',
        default: process.cwd(),
        defaultText: 'the current directory',
        sets: 'rootDir',
        to: Convert.absolute,
        notes:
          "a kernel starts in its notebook's directory (or the nearest existing one), never outside"
      },
      notebooksDir: {
        flag: '--notebooks-dir <dir>',
        help: "the root directory when --root-dir is not given: made on first start with Ferry's example notebooks (npm start passes ./notebooks)",
        defaultText: 'none (the current directory)',
        notes:
          'the examples (kernel-gateway/templates/notebooks) are copied only into a folder this makes, never over a file'
      },
      allowHidden: {
        flag: '--allow-hidden',
        help: 'list and serve dot files under the root directory',
        default: false,
        notes: 'through `/api/contents`',
        sets: 'allowHidden',
        commandLineDefault: true
      },
      labDir: {
        flag: '--lab-dir <dir>',
        help: 'the JupyterLab build served at /lab (default: the @ferry/lab-app build)',
        defaultText: '`@ferry/lab-app`',
        notes: 'a build holds `lab.json`, `static/`, `schemas/` and `themes/`',
        sets: 'labDir',
        to: Convert.absoluteIfGiven
      },
      labSettingsDir: {
        flag: '--lab-settings-dir <dir>',
        help: 'where JupyterLab user settings are kept; workspaces go beside it (default: ~/.ferry/lab/user-settings)',
        defaultText: '`~/.ferry/lab/user-settings`',
        sets: 'labSettingsDir',
        to: Convert.absoluteIfGiven
      },
      stateDir: {
        flag: '--state-dir <dir>',
        help: 'the embedded store of what survives a restart: collaboration rooms, file ids, share links',
        default: path.join(os.homedir(), '.ferry', 'state'),
        defaultText: '`~/.ferry/state`',
        sets: 'stateDir',
        to: Convert.absolute,
        // A gateway made in code without one keeps its state in a temporary directory.
        commandLineDefault: true,
        notes:
          "LMDB, jobs too; one gateway's at a time, locked (see [The state directory](operations.md#the-state-directory)); 0700"
      },
      logLevel: LOG_LEVEL,
      logFormat: LOG_FORMAT,
      allowOrigin: {
        flag: '--allow-origin <origin>',
        help: 'browser origin allowed to connect (repeatable; * admits any origin to requests that carry the token, never to the sign-in cookie)',
        parse: collect,
        default: [],
        defaultText: 'its own origin only',
        sets: 'allowOrigins'
      },
      envAllow: {
        flag: '--env-allow <name>',
        help: 'client kernel variable passed on besides KERNEL_* (repeatable)',
        parse: collect,
        default: [],
        sets: 'envAllow'
      }
    } as const satisfies Readonly<Record<string, Spec>>
  },
  {
    title: 'Many users: OpenID Connect sign-in',
    about:
      'With `--auth oidc`, people sign in through an OpenID Connect provider (Keycloak, Google, Entra ID, Dex); ' +
      'each gets an account, a folder under `--user-root` owned by a uid of their own (mode 0700), and a ' +
      "server-side browser session. See [Many users](multi-user.md) for providers' exact settings. " +
      'The same settings may be written in the profiles file (`oidc:`); a flag given wins over its field.',
    options: {
      oidcIssuer: {
        flag: '--oidc-issuer <url>',
        help: "the provider's issuer URL (its /.well-known/openid-configuration is read on first sign-in)",
        notes:
          'https; a plain http issuer is accepted only on a loopback address (tests, a provider on this host)',
        sets: 'oidc.issuer',
        combined: true
      },
      oidcClientId: {
        flag: '--oidc-client-id <id>',
        help: "the gateway's client id at the provider",
        sets: 'oidc.clientId',
        combined: true
      },
      oidcClientSecretFile: {
        flag: '--oidc-client-secret-file <file>',
        help: 'a file holding the client secret (never on a command line)',
        sets: 'oidc.clientSecret',
        combined: true
      },
      oidcScopes: {
        flag: '--oidc-scopes <scopes>',
        help: 'the scopes asked for, separated by spaces or commas',
        defaultText: `\`${DEFAULT_OIDC.scopes.join(' ')}\``,
        sets: 'oidc.scopes',
        combined: true
      },
      oidcUsernameClaim: {
        flag: '--oidc-username-claim <claim>',
        help: 'the claim that holds the user name (its folder and system account name derive from it)',
        defaultText: `\`${DEFAULT_OIDC.usernameClaim}\``,
        notes: 'Google: `email`',
        sets: 'oidc.usernameClaim',
        combined: true
      },
      oidcGroupsClaim: {
        flag: '--oidc-groups-claim <claim>',
        help: "the claim that holds the user's groups",
        defaultText: `\`${DEFAULT_OIDC.groupsClaim}\``,
        sets: 'oidc.groupsClaim',
        combined: true
      },
      oidcAdminUser: {
        flag: '--oidc-admin-user <name>',
        help: 'a user name that is an admin (repeatable)',
        parse: collect,
        default: [],
        sets: 'oidc.adminUsers',
        combined: true
      },
      oidcAdminGroup: {
        flag: '--oidc-admin-group <group>',
        help: 'a group whose members are admins (repeatable)',
        parse: collect,
        default: [],
        sets: 'oidc.adminGroups',
        combined: true
      },
      oidcTimeout: {
        flag: '--oidc-timeout <seconds>',
        help: 'how long the provider may take to answer (sign-in fails with a page that says so; signed-in people are not affected)',
        parse: number,
        defaultText: String(DEFAULT_OIDC.timeoutS),
        sets: 'oidc.timeoutMs',
        combined: true
      },
      oidcRedirectUrl: {
        flag: '--oidc-redirect-url <url>',
        help: "the callback URL registered at the provider (default: the request's own scheme and host, then /login/callback)",
        notes: 'set it behind a proxy that rewrites `Host`',
        sets: 'oidc.redirectUrl',
        combined: true
      },
      sessionIdleTimeout: {
        flag: '--session-idle-timeout <seconds>',
        help: 'a browser session unused this long ends',
        parse: number,
        default: DEFAULT_OIDC.sessionIdleS,
        sets: 'sessions.idleMs',
        to: Convert.seconds
      },
      sessionMaxAge: {
        flag: '--session-max-age <seconds>',
        help: 'a browser session ends this long after sign-in, used or not',
        parse: number,
        default: DEFAULT_OIDC.sessionMaxS,
        sets: 'sessions.maxMs',
        to: Convert.seconds
      },
      userRoot: {
        flag: '--user-root <dir>',
        help: "where users' folders are made, one per user (mode 0700, owned by the user's uid)",
        defaultText: '`--root-dir`',
        sets: 'userRoot',
        to: Convert.absoluteIfGiven
      },
      userUids: {
        flag: '--user-uids <first-last>',
        help: 'the uids given to users without a system account of their name, allocated once and remembered',
        defaultText: 'system accounts only',
        notes: 'such as `61000-61999`',
        parse: uidRange,
        sets: 'userUids'
      }
    } as const satisfies Readonly<Record<string, Spec>>
  },
  {
    title: 'Many users: JupyterHub sign-in',
    about:
      'With `--auth jupyterhub`, the gateway is a service of a JupyterHub and an OAuth client of it: ' +
      "the Hub's users sign in with their Hub account, and their groups and admin flag carry over. " +
      'Users need the scope `access:services!service=<name>`. The browser sessions, folders and uids ' +
      'are those of `--auth oidc` (the session and user options above apply). See ' +
      '[With JupyterHub](multi-user.md#with-jupyterhub) for the `jupyterhub_config.py`.',
    options: {
      hubApiUrl: {
        flag: '--hub-api-url <url>',
        help: "the Hub's API URL as this host reaches it (else JUPYTERHUB_API_URL)",
        env: 'JUPYTERHUB_API_URL',
        notes:
          'such as `http://127.0.0.1:8081/hub/api`; a Hub-launched service is given it',
        sets: 'jupyterhub.apiUrl',
        combined: true
      },
      hubServiceName: {
        flag: '--hub-service-name <name>',
        help: "the gateway's name in c.JupyterHub.services (else JUPYTERHUB_SERVICE_NAME); its OAuth client is `service-<name>`",
        env: 'JUPYTERHUB_SERVICE_NAME',
        defaultText: `\`${DEFAULT_HUB.serviceName}\``,
        sets: 'jupyterhub.serviceName',
        combined: true
      },
      hubApiTokenFile: {
        flag: '--hub-api-token-file <file>',
        help: "a file holding the service's api_token, also its OAuth client secret (else JUPYTERHUB_API_TOKEN)",
        env: 'JUPYTERHUB_API_TOKEN',
        notes:
          'never on a command line, never logged; taken out of the environment at start-up',
        sets: 'jupyterhub.apiToken',
        combined: true
      },
      hubApiToken: {
        flag: '--hub-api-token <token>',
        help: 'refused: a token on a command line is readable by every user of the host (`ps`)',
        secret: { env: 'JUPYTERHUB_API_TOKEN', file: '--hub-api-token-file' }
      },
      hubUrl: {
        flag: '--hub-url <url>',
        help: "the Hub's public URL, where browsers are sent to sign in",
        defaultText: 'the API URL without `/hub/api`',
        notes:
          'set it when the API URL is an internal address (`https://hub.example.org`)',
        sets: 'jupyterhub.url',
        combined: true
      },
      hubTimeout: {
        flag: '--hub-timeout <seconds>',
        help: 'how long the Hub may take to answer (sign-in fails with a page that says so; signed-in people are not affected)',
        parse: number,
        default: DEFAULT_HUB.timeoutS,
        sets: 'jupyterhub.timeoutMs',
        combined: true
      },
      hubRedirectUrl: {
        flag: '--hub-redirect-url <url>',
        help: "the service's oauth_redirect_uri (default: the request's own scheme and host, then /login/callback)",
        notes: 'set it behind a proxy that rewrites `Host`',
        sets: 'jupyterhub.redirectUrl',
        combined: true
      }
    } as const satisfies Readonly<Record<string, Spec>>
  },
  {
    title: 'Kernels, output and clients',
    options: {
      cullIdleTimeout: {
        flag: '--cull-idle-timeout <seconds>',
        help: 'shut down kernels idle this long (0: never)',
        parse: number,
        default: 0,
        sets: 'culling.idleTimeoutMs',
        to: Convert.seconds
      },
      cullInterval: {
        flag: '--cull-interval <seconds>',
        help: 'how often to look for idle kernels',
        parse: number,
        default: 300,
        sets: 'culling.intervalMs',
        to: (seconds: number) => Math.max(1, seconds) * 1000
      },
      cullConnected: {
        flag: '--cull-connected',
        help: 'also cull kernels with connected clients',
        default: false,
        sets: 'culling.cullConnected'
      },
      cullBusy: {
        flag: '--cull-busy',
        help: 'also cull busy kernels',
        default: false,
        sets: 'culling.cullBusy'
      },
      replayBufferMb: {
        flag: '--replay-buffer-mb <mb>',
        help: 'output kept per kernel for reconnecting clients',
        parse: number,
        default: 16,
        sets: 'replayBytes',
        to: Convert.mebibytes
      },
      clientBufferMb: {
        flag: '--client-buffer-mb <mb>',
        help: 'output waiting for one slow client, at most; past it its output is skipped (and it is told), and a client behind for a minute is closed',
        parse: number,
        default: 64,
        sets: 'clientBufferBytes',
        to: Convert.mebibytes
      },
      slowClientTimeout: {
        flag: '--slow-client-timeout <seconds>',
        help: 'a client whose output is skipped for longer is closed (1013)',
        parse: number,
        default: 60,
        sets: 'slowClientTimeoutMs',
        to: Convert.seconds,
        commandLineDefault: true
      },
      maxMessageMb: {
        flag: '--max-message-mb <mb>',
        help: 'largest websocket message accepted',
        parse: number,
        default: 64,
        sets: 'maxMessageBytes',
        to: Convert.mebibytes,
        notes: 'a larger one closes the socket with 1009'
      },
      iopubMsgRateLimit: {
        flag: '--iopub-msg-rate-limit <per-second>',
        help: 'iopub messages per second per kernel (off by default)',
        parse: number,
        defaultText: 'off',
        sets: 'rateLimits.messagesPerSecond',
        notes: 'clients are told when it bites'
      },
      iopubDataRateLimit: {
        flag: '--iopub-data-rate-limit <bytes-per-second>',
        help: 'iopub bytes per second per kernel (off by default)',
        parse: number,
        defaultText: 'off',
        sets: 'rateLimits.bytesPerSecond',
        notes: 'clients are told when it bites'
      }
    } as const satisfies Readonly<Record<string, Spec>>
  },
  {
    title: 'Limits',
    options: {
      maxKernels: {
        flag: '--max-kernels <n>',
        help: 'kernels this gateway runs at most (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.maxKernels,
        sets: 'limits.maxKernels',
        notes: '403 past it; see [Limits](operations.md#limits)'
      },
      maxKernelsPerUser: {
        flag: '--max-kernels-per-user <n>',
        help: 'kernels one user runs at most (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.maxKernelsPerUser,
        sets: 'limits.maxKernelsPerUser',
        notes: '403 past it; see [Limits](operations.md#limits)'
      },
      maxJobsPerUser: {
        flag: '--max-jobs-per-user <n>',
        help: 'jobs one user may have queued or running at once (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.maxJobsPerUser,
        sets: 'limits.maxJobsPerUser',
        notes: '429 past it; see [Jobs](jobs.md)'
      },
      maxTerminals: {
        flag: '--max-terminals <n>',
        help: 'terminals open at once at most (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.maxTerminals,
        sets: 'limits.maxTerminals',
        notes: '403 past it; see [Terminals](terminals.md)'
      },
      maxKernelStarts: {
        flag: '--max-kernel-starts <per-minute>',
        help: 'kernel starts one user may make in a minute (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.kernelStartsPerMinute,
        sets: 'limits.kernelStartsPerMinute',
        notes: '429 with `Retry-After` past it'
      },
      maxWsMessages: {
        flag: '--max-ws-messages <per-second>',
        help: 'messages a second one websocket may send, sustained; more close it with 1008 (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.wsMessagesPerSecond,
        sets: 'limits.wsMessagesPerSecond',
        notes: 'bursts of 5 s pass'
      },
      maxGuestWsMessages: {
        flag: '--max-guest-ws-messages <per-second>',
        help: 'messages a second one websocket opened through a share link may send; more close it with 1008 (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.guestWsMessagesPerSecond,
        sets: 'limits.guestWsMessagesPerSecond'
      },
      maxShareSockets: {
        flag: '--max-share-sockets <count>',
        help: 'websockets one share link may hold open at once; more get 429 (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.connectionsPerLink,
        sets: 'limits.connectionsPerLink'
      },
      maxShareLinks: {
        flag: '--max-share-links <count>',
        help: 'share links one notebook may have at once; more get 403 (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.linksPerNotebook,
        sets: 'limits.linksPerNotebook'
      },
      maxShareVisitors: {
        flag: '--max-share-visitors <count>',
        help: 'browsers one share link may admit as visitors over its life; more get 403 (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.visitorsPerLink,
        sets: 'limits.visitorsPerLink'
      },
      roomIdle: {
        flag: '--room-idle <seconds>',
        help: 'how long a collaboration room stays open after its last client left (saved and stored first)',
        parse: number,
        default: DEFAULT_ROOM_TIMINGS.freeAfterMs / 1000,
        sets: 'roomTimings.freeAfterMs',
        to: Convert.seconds,
        commandLineDefault: true
      },
      maxAuthFailures: {
        flag: '--max-auth-failures <per-minute>',
        help: 'wrong tokens one client address may present in a minute before it gets 429s (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.authFailuresPerMinute,
        sets: 'limits.authFailuresPerMinute',
        notes: 'the 429s last up to a minute'
      },
      headersTimeout: {
        flag: '--headers-timeout <seconds>',
        help: "how long a client may take to send a request's headers",
        parse: number,
        default: DEFAULT_LIMITS.headersTimeoutMs / 1000,
        sets: 'limits.headersTimeoutMs',
        to: Convert.seconds,
        notes: 'then 408'
      },
      maxPendingConnections: {
        flag: '--max-pending-connections <count>',
        help: 'connections not yet authenticated (idle, or without a valid token) from all addresses; past it the oldest is closed with 503 (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.pendingConnections,
        sets: 'limits.pendingConnections'
      },
      maxPendingPerAddress: {
        flag: '--max-pending-per-address <count>',
        help: 'connections not yet authenticated from one client address; past it its oldest is closed with 503 (0: no limit)',
        parse: number,
        default: DEFAULT_LIMITS.pendingConnectionsPerAddress,
        sets: 'limits.pendingConnectionsPerAddress'
      }
    } as const satisfies Readonly<Record<string, Spec>>
  },
  {
    title: 'Kernels on this host (the embedded worker)',
    about:
      "These set the embedded worker's settings (`createHostWorker`); `ferry worker` has the same.",
    options: kernelHostOptionTable('the embedded worker')
  },
  {
    title: 'Remote workers and placement',
    options: {
      workerPort: {
        flag: '--worker-port <port>',
        help: 'accept remote workers (ferry worker) on this gRPC port',
        notes: 'see [Remote workers](deployment.md#remote-workers)',
        parse: number,
        defaultText: 'none',
        sets: 'workerPort'
      },
      workerTokenFile: {
        flag: '--worker-token-file <file>',
        help: 'a file holding the token remote workers must present (- reads one line from standard input); else FERRY_WORKER_TOKEN, else random',
        env: 'FERRY_WORKER_TOKEN',
        defaultText: 'random'
      },
      workerToken: {
        flag: '--worker-token <token>',
        help: 'refused: a token on a command line is readable by every user of the host (`ps`)',
        secret: { env: 'FERRY_WORKER_TOKEN', file: '--worker-token-file' }
      },
      workerGrace: {
        flag: '--worker-grace <seconds>',
        help: 'how long a worker may be unreachable before its kernels are dead',
        parse: number,
        default: 30,
        sets: 'workerGraceMs',
        to: Convert.seconds
      },
      workerTlsCert: {
        flag: '--worker-tls-cert <file>',
        help: 'TLS certificate (PEM) for the worker port',
        notes: 'with `--worker-tls-key`; see [TLS](deployment.md#tls)',
        defaultText: 'plaintext',
        sets: 'workerCredentials',
        combined: true
      },
      workerTlsKey: {
        flag: '--worker-tls-key <file>',
        help: 'TLS private key (PEM) for the worker port',
        sets: 'workerCredentials',
        combined: true
      },
      placement: {
        flag: '--placement <policy>',
        help: 'fill workers one by one, or spread kernels across them',
        choices: ['pack', 'spread'],
        default: 'pack',
        sets: 'scheduling.policy'
      },
      shareDevices: {
        flag: '--share-devices <n>',
        help: 'kernels that may share one device',
        parse: number,
        default: 1,
        sets: 'scheduling.maxKernelsPerDevice',
        to: (n: number) => Math.max(1, n)
      },
      usageFlushInterval: {
        flag: '--usage-flush-interval <seconds>',
        help: 'how often the usage ledger writes the allocations still open: at most this much of them is lost to a kill -9',
        notes: 'see [Usage and quotas](usage-and-quotas.md)',
        parse: number,
        default: 5,
        sets: 'usageFlushIntervalMs',
        to: (seconds: number) => Math.max(0.1, seconds) * 1000
      },
      usageRetention: {
        flag: '--usage-retention <duration>',
        help: 'how long the usage ledger keeps an allocation after it ended (0: forever); never less than the longest quota period; what goes still counts in the all-time totals',
        notes: 'see [Usage and quotas](usage-and-quotas.md)',
        parse: retention,
        default: '400d',
        sets: 'usageRetentionMs',
        to: retentionMs
      },
      kernelspecAccelerators: {
        flag: '--kernelspec-accelerators <choices>',
        help: 'also list kernelspecs that run on an accelerator (python3.gpu-h100-x1, "Python 3 · GPU · H100 × 1"), for clients that can only pick a kernelspec: auto (each device model at each count one worker holds: 1, 2, 4 ... up to its most, and each offer), none, or a list such as gpu:H100:1,gpu:H100:2,tpu:v5e:4,offer:a100',
        parse: kernelspecAccelerators,
        default: 'auto',
        sets: 'kernelspecAccelerators'
      },
      kernelspecEnvironments: {
        flag: '--kernelspec-environments <choices>',
        help: 'also list the default kernelspec once per environment of the profiles file (python3.env-pytorch, "Python 3 · PyTorch"): auto (each one a connected worker has), all (those, and each crossed with the --kernelspec-accelerators choices: python3.env-pytorch.gpu-h100-x1), none, or a list such as pytorch+accelerators,jax',
        parse: kernelspecEnvironments,
        default: 'auto',
        sets: 'kernelspecEnvironments',
        commandLineDefault: true
      }
    } as const satisfies Readonly<Record<string, Spec>>
  },
  {
    title: 'Holding devices',
    options: {
      holdDevices: {
        flag: '--hold-devices <when>',
        help: 'when a kernel holds the devices the scheduler placed: when-used (from its first cell; it starts without them, and idle ones go back per --idle-return) or always (from its start to its end)',
        choices: ['when-used', 'always'],
        default: 'when-used',
        sets: 'holds.mode',
        commandLineDefault: true,
        notes:
          "a gateway made in code holds `always` unless told; offers an engine runs (Slurm, Kubernetes jobs) hold theirs for their job's life either way. See [Held only while used](accelerators.md#held-only-while-used)"
      },
      idleReturn: {
        flag: '--idle-return <timeouts>',
        help: 'per device class, how long a kernel may idle after its last cell before its devices go back to the pool (0: never), e.g. gpu=30m,tpu=20m',
        parse: idleReturn,
        default: 'gpu=30m,tpu=20m',
        sets: 'holds.idleReturnMs',
        to: parseIdleReturn
      },
      idleReturnWhen: {
        flag: '--idle-return-when <when>',
        help: 'waiting: return idle devices only while a queued request could use them; always',
        choices: ['waiting', 'always'],
        default: 'waiting',
        sets: 'holds.when'
      },
      idleReturnWarning: {
        flag: '--idle-return-warning <duration>',
        help: 'warn this long before idle devices go back (at most a quarter of the timeout)',
        parse: duration,
        default: '5m',
        sets: 'holds.warningMs',
        to: parseDuration
      },
      idleReturnStrategy: {
        flag: '--idle-return-strategy <strategy>',
        help: "restart: the kernel's process restarts without devices (its variables are lost); suspend: its device state is put aside and its process kept (where the worker's devices can checkpoint; else restart, saying so)",
        choices: ['restart', 'suspend'],
        default: 'restart',
        sets: 'holds.strategy'
      }
    } as const satisfies Readonly<Record<string, Spec>>
  },
  {
    title: 'Slurm and Kubernetes',
    options: {
      profiles: {
        flag: '--profiles <file>',
        help: 'accelerator offers that Slurm or Kubernetes start workers for, and environment templates (YAML or JSON)',
        defaultText: 'none',
        notes:
          'see [Slurm](slurm.md), [Kubernetes](kubernetes.md) and [Environments](environments.md)'
      },
      jobGatewayHost: {
        flag: '--job-gateway-host <host>',
        help: 'the address Slurm jobs and Kubernetes pods dial to reach the worker port (default: --ip)',
        defaultText: '`--ip`',
        sets: ['slurm.workerHost', 'kubernetes.workerHost'],
        combined: true
      },
      jobWorkerCommand: {
        flag: '--job-worker-command <command>',
        help: "how a Slurm job runs ferry on its node (default: this node and this ferry's path)",
        defaultText: 'this `ferry`',
        notes: 'such as `/opt/ferry/bin/ferry`',
        sets: 'slurm.workerCommand',
        to: (command: string) => command.split(/\s+/).filter(Boolean)
      },
      jobOutputDir: {
        flag: '--job-output-dir <dir>',
        help: 'where Slurm jobs write their output (default: discarded)',
        defaultText: 'discarded',
        sets: 'slurm.outputDir',
        to: Convert.absoluteIfGiven
      },
      slurmRestUrl: {
        flag: '--slurm-rest-url <url>',
        help: 'submit Slurm jobs through slurmrestd (unix:/path/to/socket or http://host:port) instead of sbatch; its token comes from SLURM_JWT or --slurm-jwt-file',
        sets: 'slurm.rest.url',
        combined: true
      },
      slurmRestUser: {
        flag: '--slurm-rest-user <user>',
        help: "the user slurmrestd runs the jobs as (X-SLURM-USER-NAME; default: the token's user)",
        sets: 'slurm.rest.user',
        combined: true
      },
      slurmJwtFile: {
        flag: '--slurm-jwt-file <file>',
        help: 'a file holding the slurmrestd token (as `scontrol token` prints it), read again for every request',
        env: 'SLURM_JWT',
        sets: 'slurm.rest.tokenFile',
        combined: true
      },
      kubeconfig: {
        flag: '--kubeconfig <file>',
        help: 'the kubeconfig for Kubernetes offers (default: KUBECONFIG, ~/.kube/config, or in-cluster)',
        notes: 'see [Kubernetes](kubernetes.md#starting-the-gateway)',
        sets: 'kubernetes.kubeconfig',
        to: Convert.absoluteIfGiven
      },
      kubeNamespace: {
        flag: '--kube-namespace <namespace>',
        help: "where Kubernetes offers' pods go unless an offer says (default: the kubeconfig context's)",
        sets: 'kubernetes.namespace'
      },
      kubeImage: {
        flag: '--kube-image <image>',
        help: 'the worker image of Kubernetes offers that name none (with ferry on its PATH)',
        defaultText: 'none',
        sets: 'kubernetes.image'
      },
      kubePodSecurity: {
        flag: '--kube-pod-security <level>',
        help: 'the Pod Security Standard worker pods pass; baseline relaxes it, only where truly needed (GPUs and TPUs need no privileges)',
        choices: ['restricted', 'baseline'],
        defaultText: '`restricted`',
        notes: 'see [Kubernetes](kubernetes.md#pod-security)',
        sets: 'kubernetes.podSecurity'
      }
    } as const satisfies Readonly<Record<string, Spec>>
  }
] as const satisfies readonly IOptionSection[];

/** Every option of `ferry gateway`, by the name of its value. */
export const GATEWAY_OPTIONS = mergeSections(GATEWAY_OPTION_SECTIONS);

/** What `ferry gateway`'s command line parses into. */
export type GatewayFlags = Flags<typeof GATEWAY_OPTIONS>;

/** The options that set the gateway's own settings (the embedded worker's apart). */
const OWN_OPTIONS: OptionTable = Object.fromEntries(
  Object.entries(GATEWAY_OPTIONS).filter(
    ([name]) => !(name in kernelHostOptionTable(''))
  )
);

/**
 * The gateway settings the flags give (tokens, offers and workers apart).
 *
 * @param secrets - The secrets taken from the environment at start-up (`SLURM_JWT`).
 * @param profiles - The profiles file's settings (`oidc`), which flags given override.
 */
export function gatewaySettings(
  flags: GatewayFlags,
  secrets: ReturnType<typeof takeSecretEnv>,
  profiles?: { oidc?: IOidcProfile }
): GatewaySettings {
  const settings = settingsFrom(OWN_OPTIONS, flags) as GatewaySettings & {
    slurm: NonNullable<GatewaySettings['slurm']>;
    kubernetes: NonNullable<GatewaySettings['kubernetes']>;
  };
  // The settings that options make together.
  settings.workerCredentials =
    flags.workerTlsCert && flags.workerTlsKey
      ? grpc.ServerCredentials.createSsl(null, [
          {
            cert_chain: readFileSync(flags.workerTlsCert),
            private_key: readFileSync(flags.workerTlsKey)
          }
        ])
      : undefined;
  settings.oidc =
    flags.auth === 'oidc' ? oidcSettings(flags, profiles?.oidc) : undefined;
  settings.jupyterhub =
    flags.auth === 'jupyterhub' ? hubSettings(flags, secrets) : undefined;
  settings.slurm.workerHost = settings.kubernetes.workerHost =
    flags.jobGatewayHost ?? flags.ip;
  settings.slurm.rest = flags.slurmRestUrl
    ? {
        url: flags.slurmRestUrl,
        user: flags.slurmRestUser,
        tokenFile: flags.slurmJwtFile && path.resolve(flags.slurmJwtFile),
        // Taken out of the environment at start-up: the file, if given, comes first.
        token: flags.slurmJwtFile ? undefined : secrets.SLURM_JWT
      }
    : undefined;
  return settings;
}

/**
 * The `--auth oidc` settings the flags give, else the profiles file's `oidc` section, else the
 * defaults (the admin lists of both add up).
 *
 * @throws Error naming a setting that is missing, or a secret file that cannot be read.
 */
function oidcSettings(
  flags: GatewayFlags,
  profile: IOidcProfile = {}
): IOidcSettings {
  const issuer = flags.oidcIssuer ?? profile.issuer;
  const clientId = flags.oidcClientId ?? profile.client_id;
  if (!issuer || !clientId) {
    throw new Error(
      "--auth oidc needs --oidc-issuer and --oidc-client-id (or issuer and client_id in the profiles file's oidc section)"
    );
  }
  const secretFile = flags.oidcClientSecretFile ?? profile.client_secret_file;
  let clientSecret: string | undefined;
  if (secretFile) {
    try {
      clientSecret = readFileSync(secretFile, 'utf8').trim();
    } catch (error) {
      throw new Error(`--oidc-client-secret-file: ${(error as Error).message}`);
    }
    if (!clientSecret) {
      throw new Error(`--oidc-client-secret-file: ${secretFile} is empty`);
    }
  }
  return {
    issuer,
    clientId,
    clientSecret,
    scopes:
      flags.oidcScopes?.split(/[\s,]+/).filter(Boolean) ??
      profile.scopes ??
      DEFAULT_OIDC.scopes,
    usernameClaim:
      flags.oidcUsernameClaim ??
      profile.username_claim ??
      DEFAULT_OIDC.usernameClaim,
    groupsClaim:
      flags.oidcGroupsClaim ?? profile.groups_claim ?? DEFAULT_OIDC.groupsClaim,
    adminUsers: [...flags.oidcAdminUser, ...(profile.admin_users ?? [])],
    adminGroups: [...flags.oidcAdminGroup, ...(profile.admin_groups ?? [])],
    timeoutMs:
      (flags.oidcTimeout ?? profile.timeout_seconds ?? DEFAULT_OIDC.timeoutS) *
      1000,
    redirectUrl: flags.oidcRedirectUrl ?? profile.redirect_url
  };
}

/**
 * The `--auth jupyterhub` settings the flags (else a Hub-launched service's environment) give.
 *
 * @throws Error naming what is missing, or a token file that cannot be read; never with the token.
 */
function hubSettings(
  flags: GatewayFlags,
  secrets: ReturnType<typeof takeSecretEnv>
): IHubSettings {
  const apiUrl = flags.hubApiUrl ?? process.env.JUPYTERHUB_API_URL;
  if (!apiUrl) {
    throw new Error(
      '--auth jupyterhub needs --hub-api-url (or JUPYTERHUB_API_URL, as the Hub gives the services it starts)'
    );
  }
  let apiToken = secrets.JUPYTERHUB_API_TOKEN;
  if (flags.hubApiTokenFile) {
    try {
      // `-`: the first line of standard input.
      apiToken =
        flags.hubApiTokenFile === '-'
          ? readFileSync(0, 'utf8').split('\n')[0].trim()
          : readFileSync(flags.hubApiTokenFile, 'utf8').trim();
    } catch (error) {
      throw new Error(
        `--hub-api-token-file: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}: ${flags.hubApiTokenFile}`
      );
    }
    if (!apiToken) {
      throw new Error(
        `--hub-api-token-file: ${flags.hubApiTokenFile} is empty`
      );
    }
  }
  if (!apiToken) {
    throw new Error(
      "--auth jupyterhub needs the service's api_token: --hub-api-token-file FILE, or JUPYTERHUB_API_TOKEN in the environment"
    );
  }
  return {
    apiUrl,
    serviceName:
      flags.hubServiceName ??
      process.env.JUPYTERHUB_SERVICE_NAME ??
      DEFAULT_HUB.serviceName,
    apiToken,
    url: flags.hubUrl,
    redirectUrl: flags.hubRedirectUrl,
    timeoutMs: flags.hubTimeout * 1000
  };
}

/** The defaults of a gateway made in code: the options' defaults, but the command line's own. */
export const DEFAULT_GATEWAY_OPTIONS: Omit<IGatewayOptions, 'token'> = (() => {
  const settings = defaultSettings(OWN_OPTIONS) as Omit<
    IGatewayOptions,
    'token' | 'limits'
  > & { limits: Partial<ILimits> };
  return {
    ...settings,
    // What no option's default sets: the iopub limits are off, and a request's whole time is bounded.
    rateLimits: { ...settings.rateLimits },
    limits: { ...DEFAULT_LIMITS, ...settings.limits }
  };
})();

/** Complete partial options with the defaults. */
export function resolveGatewayOptions(
  options: Partial<Omit<IGatewayOptions, 'limits'>> & {
    limits?: Partial<ILimits>;
  } = {}
): IGatewayOptions {
  return {
    ...DEFAULT_GATEWAY_OPTIONS,
    ...options,
    culling: { ...DEFAULT_GATEWAY_OPTIONS.culling, ...options.culling },
    limits: { ...DEFAULT_GATEWAY_OPTIONS.limits, ...options.limits },
    rateLimits: {
      ...DEFAULT_GATEWAY_OPTIONS.rateLimits,
      ...options.rateLimits
    },
    scheduling: { ...DEFAULT_GATEWAY_OPTIONS.scheduling, ...options.scheduling }
  };
}
