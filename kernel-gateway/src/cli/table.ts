/** Tables for a terminal, as `ferry jobs` and `ferry kernels` print them. */

/** `rows` (the first the headings) in columns as wide as their widest cell, two spaces apart. */
export function textTable(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map(r => r[i].length)));
  return (
    rows
      .map(r =>
        r
          .map((c, i) => c.padEnd(widths[i]))
          .join('  ')
          .trimEnd()
      )
      .join('\n') + '\n'
  );
}
