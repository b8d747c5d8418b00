/**
 * The Kubernetes Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards,
 * the `baseline` and `restricted` profiles of the latest version), applied to a pod spec as Pod
 * Security Admission would apply them. No API server runs in these tests: this is what stands in
 * for a namespace labelled `pod-security.kubernetes.io/enforce: restricted`.
 */
import type {
  V1Container,
  V1PodSpec,
  V1SecurityContext
} from '@kubernetes/client-node';

/** A Pod Security Standard profile. */
export type PodSecurityProfile = 'baseline' | 'restricted';

/**
 * What in `spec` (and the pod's annotations) breaks `profile`: one line per rule broken, naming the
 * field; empty when the pod would be admitted.
 */
export function podSecurityViolations(
  spec: V1PodSpec,
  profile: PodSecurityProfile,
  annotations: Record<string, string> = {}
): string[] {
  const found = Private.baseline(spec, annotations);
  if (profile === 'restricted') {
    found.push(...Private.restricted(spec));
  }
  return found;
}

namespace Private {
  /** Every container of the pod, with the path its fields are reported under. */
  function containers(spec: V1PodSpec): [string, V1Container][] {
    return [
      ...spec.containers.map((c, i) => [`containers[${i}]`, c] as const),
      ...(spec.initContainers ?? []).map(
        (c, i) => [`initContainers[${i}]`, c] as const
      ),
      ...(spec.ephemeralContainers ?? []).map(
        (c, i) => [`ephemeralContainers[${i}]`, c as V1Container] as const
      )
    ].map(([at, c]) => [`spec.${at}`, c]);
  }

  function context(c: V1Container): V1SecurityContext {
    return c.securityContext ?? {};
  }

  /** The capabilities `baseline` lets a container add (the container runtime's default set). */
  const BASELINE_CAPABILITIES = new Set([
    'AUDIT_WRITE',
    'CHOWN',
    'DAC_OVERRIDE',
    'FOWNER',
    'FSETID',
    'KILL',
    'MKNOD',
    'NET_BIND_SERVICE',
    'SETFCAP',
    'SETGID',
    'SETPCAP',
    'SETUID',
    'SYS_CHROOT'
  ]);

  const SAFE_SYSCTLS = new Set([
    'kernel.shm_rmid_forced',
    'net.ipv4.ip_local_port_range',
    'net.ipv4.ip_unprivileged_port_start',
    'net.ipv4.tcp_syncookies',
    'net.ipv4.ping_group_range',
    'net.ipv4.ip_local_reserved_ports',
    'net.ipv4.tcp_keepalive_time',
    'net.ipv4.tcp_fin_timeout',
    'net.ipv4.tcp_keepalive_intvl',
    'net.ipv4.tcp_keepalive_probes'
  ]);

  const SELINUX_TYPES = new Set([
    '',
    'container_t',
    'container_init_t',
    'container_kvm_t',
    'container_engine_t'
  ]);

  /** The volume types `restricted` allows. */
  const RESTRICTED_VOLUMES = new Set([
    'name',
    'configMap',
    'csi',
    'downwardAPI',
    'emptyDir',
    'ephemeral',
    'persistentVolumeClaim',
    'projected',
    'secret'
  ]);

  export function baseline(
    spec: V1PodSpec,
    annotations: Record<string, string>
  ): string[] {
    const found: string[] = [];
    const pod = spec.securityContext ?? {};
    if (pod.windowsOptions?.hostProcess) {
      found.push('spec.securityContext.windowsOptions.hostProcess');
    }
    for (const field of ['hostNetwork', 'hostPID', 'hostIPC'] as const) {
      if (spec[field]) {
        found.push(`spec.${field}`);
      }
    }
    for (const [i, volume] of (spec.volumes ?? []).entries()) {
      if (volume.hostPath) {
        found.push(`spec.volumes[${i}].hostPath`);
      }
    }
    const selinux = (
      at: string,
      options: V1SecurityContext['seLinuxOptions']
    ) => {
      if (
        options &&
        (!SELINUX_TYPES.has(options.type ?? '') || options.user || options.role)
      ) {
        found.push(`${at}.seLinuxOptions`);
      }
    };
    selinux('spec.securityContext', pod.seLinuxOptions);
    if (pod.seccompProfile?.type === 'Unconfined') {
      found.push('spec.securityContext.seccompProfile.type');
    }
    const apparmor = pod.appArmorProfile?.type;
    if (apparmor && apparmor !== 'RuntimeDefault' && apparmor !== 'Localhost') {
      found.push('spec.securityContext.appArmorProfile.type');
    }
    for (const [key, value] of Object.entries(annotations)) {
      if (
        key.startsWith('container.apparmor.security.beta.kubernetes.io/') &&
        value !== 'runtime/default' &&
        !value.startsWith('localhost/')
      ) {
        found.push(`metadata.annotations['${key}']`);
      }
    }
    for (const sysctl of pod.sysctls ?? []) {
      if (!SAFE_SYSCTLS.has(sysctl.name)) {
        found.push(`spec.securityContext.sysctls (${sysctl.name})`);
      }
    }
    for (const [at, container] of containers(spec)) {
      const sc = context(container);
      if (sc.windowsOptions?.hostProcess) {
        found.push(`${at}.securityContext.windowsOptions.hostProcess`);
      }
      if (sc.privileged) {
        found.push(`${at}.securityContext.privileged`);
      }
      for (const added of sc.capabilities?.add ?? []) {
        if (!BASELINE_CAPABILITIES.has(added)) {
          found.push(`${at}.securityContext.capabilities.add (${added})`);
        }
      }
      for (const [j, port] of (container.ports ?? []).entries()) {
        if (port.hostPort) {
          found.push(`${at}.ports[${j}].hostPort`);
        }
      }
      selinux(`${at}.securityContext`, sc.seLinuxOptions);
      if (sc.procMount && sc.procMount !== 'Default') {
        found.push(`${at}.securityContext.procMount`);
      }
      if (sc.seccompProfile?.type === 'Unconfined') {
        found.push(`${at}.securityContext.seccompProfile.type`);
      }
      const type = sc.appArmorProfile?.type;
      if (type && type !== 'RuntimeDefault' && type !== 'Localhost') {
        found.push(`${at}.securityContext.appArmorProfile.type`);
      }
    }
    return found;
  }

  export function restricted(spec: V1PodSpec): string[] {
    const found: string[] = [];
    const pod = spec.securityContext ?? {};
    for (const [i, volume] of (spec.volumes ?? []).entries()) {
      for (const type of Object.keys(volume)) {
        if (!RESTRICTED_VOLUMES.has(type)) {
          found.push(`spec.volumes[${i}].${type}`);
        }
      }
    }
    if (pod.runAsUser === 0) {
      found.push('spec.securityContext.runAsUser (0)');
    }
    const podSeccomp = pod.seccompProfile?.type;
    const podSeccompSet =
      podSeccomp === 'RuntimeDefault' || podSeccomp === 'Localhost';
    for (const [at, container] of containers(spec)) {
      const sc = context(container);
      if (sc.allowPrivilegeEscalation !== false) {
        found.push(
          `${at}.securityContext.allowPrivilegeEscalation must be false`
        );
      }
      // Set on the container, or left to the pod's `true`; never `false`.
      if (
        sc.runAsNonRoot === false ||
        (sc.runAsNonRoot === undefined && pod.runAsNonRoot !== true)
      ) {
        found.push(`${at}.securityContext.runAsNonRoot must be true`);
      }
      if (sc.runAsUser === 0) {
        found.push(`${at}.securityContext.runAsUser (0)`);
      }
      const seccomp = sc.seccompProfile?.type;
      if (
        seccomp === undefined
          ? !podSeccompSet
          : seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost'
      ) {
        found.push(
          `${at}.securityContext.seccompProfile.type must be RuntimeDefault or Localhost`
        );
      }
      if (!sc.capabilities?.drop?.includes('ALL')) {
        found.push(`${at}.securityContext.capabilities.drop must include ALL`);
      }
      for (const added of sc.capabilities?.add ?? []) {
        if (added !== 'NET_BIND_SERVICE') {
          found.push(`${at}.securityContext.capabilities.add (${added})`);
        }
      }
    }
    return found;
  }
}
