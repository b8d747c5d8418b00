/**
 * Kernel output as a notebook keeps it: the nbformat output an iopub message becomes. One
 * definition for the two writers of outputs, the gateway's rooms (server-side execution into a Y
 * doc) and a worker's notebook jobs (into the notebook's JSON).
 *
 * @packageDocumentation
 */

/** An nbformat 4 output (`output_type` and the fields of that type). */
export type NbformatOutput = Record<string, unknown> & {
  output_type: 'stream' | 'display_data' | 'execute_result' | 'error';
};

/**
 * The nbformat output of an iopub message of type `msgType` with `content`; undefined for messages
 * that are not output (status, clear_output, update_display_data...). Fields of the wrong type are
 * replaced by empty ones: a kernel's message never makes an invalid notebook.
 */
export function nbformatOutput(
  msgType: string,
  content: Record<string, unknown>
): NbformatOutput | undefined {
  switch (msgType) {
    case 'stream':
      return {
        output_type: 'stream',
        name: content.name === 'stderr' ? 'stderr' : 'stdout',
        text: typeof content.text === 'string' ? content.text : ''
      };
    case 'display_data':
      return {
        output_type: 'display_data',
        data: Private.record(content.data),
        metadata: Private.record(content.metadata)
      };
    case 'execute_result':
      return {
        output_type: 'execute_result',
        execution_count:
          typeof content.execution_count === 'number'
            ? content.execution_count
            : null,
        data: Private.record(content.data),
        metadata: Private.record(content.metadata)
      };
    case 'error':
      return {
        output_type: 'error',
        ename: String(content.ename ?? ''),
        evalue: String(content.evalue ?? ''),
        traceback: Array.isArray(content.traceback)
          ? content.traceback.map(String)
          : []
      };
    default:
      return undefined;
  }
}

namespace Private {
  /** `value` when it is a JSON object, else an empty one. */
  export function record(value: unknown): Record<string, unknown> {
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  }
}
