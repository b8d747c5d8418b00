/**
 * `npm run lint` checks that imports go one way: no import cycles in the gateway, the packages or
 * the bench; the agent (`ferry worker`) imports nothing of the gateway's but `protocol/`, what both
 * sides share; and `protocol/` imports neither side. Type-only imports count: a cycle of types still
 * ties two rooms together.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'An import cycle: modules that need each other cannot be read, tested or moved apart. Types generated from a .proto may refer to each other as its messages do.',
      from: { pathNot: '/generated/' },
      to: { circular: true }
    },
    {
      name: 'agent-imports-only-protocol',
      severity: 'error',
      comment:
        'The agent (ferry worker) shares only protocol/ with the gateway: anything else it needs lives in agent/ or protocol/.',
      from: { path: '^kernel-gateway/src/agent/' },
      to: {
        path: '^kernel-gateway/src/',
        pathNot: '^kernel-gateway/src/(agent|protocol)/'
      }
    },
    {
      name: 'protocol-imports-only-protocol',
      severity: 'error',
      comment:
        'protocol/ is what the gateway and the agent share: it depends on neither of them.',
      from: { path: '^kernel-gateway/src/protocol/' },
      to: {
        path: '^kernel-gateway/src/',
        pathNot: '^kernel-gateway/src/protocol/'
      }
    }
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(lib|node_modules|test)/' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
      extensions: ['.ts', '.tsx', '.js', '.d.ts']
    }
  }
};
