import { createHeader, type MessageParts } from './message';

/**
 * The output a reader too far behind may miss (it is told how much): streams and displays. Status,
 * replies, results, errors and comm messages always go, or clients and widgets would lose their way.
 */
const SKIPPABLE_OUTPUT = new Set([
  'stream',
  'display_data',
  'update_display_data'
]);

/** Whether a kernel's iopub message of type `msgType` is output that a reader too far behind may miss. */
export function isSkippableOutput(msgType: string): boolean {
  return SKIPPABLE_OUTPUT.has(msgType);
}

/**
 * The notice, on stderr under the cell whose output was skipped (`parent` is that output's
 * parent-header part), of `count` messages of `bytes` that did not reach `reader`.
 */
export function skippedOutputNotice(
  count: number,
  bytes: number,
  parent: Buffer,
  reader: string
): MessageParts {
  const text =
    `[Ferry] ${count} output message(s) (${(bytes / 2 ** 20).toFixed(1)} MiB) were not sent to ` +
    `${reader}: it could not keep up with the kernel.\n`;
  return [
    Buffer.from(JSON.stringify(createHeader('stream', 'ferry-gateway'))),
    parent,
    Buffer.from('{}'),
    Buffer.from(JSON.stringify({ name: 'stderr', text }))
  ];
}
