/**
 * The CLI's tables: columns padded to their widest cell, two spaces apart. Cells hold text that
 * users and upstreams chose (key names, emails, error messages), so control characters and those
 * that show as nothing (format characters, variation selectors: default-ignorable code points) are
 * shown escaped (`\u001b`): a name cannot move the cursor, colour the terminal, start a line that
 * looks like another row, or pass for another name.
 */
export function formatTable(rows: string[][]): string[] {
  const cells = rows.map((row) => row.map(printable));
  const widths = cells[0].map((_, i) => Math.max(...cells.map((row) => row[i].length)));
  return cells.map((row) =>
    row
      .map((cell, i) => cell.padEnd(widths[i]))
      .join("  ")
      .trimEnd(),
  );
}

export function printable(text: string): string {
  return text.replace(/[\p{Cc}\p{Cf}\p{DI}]/gu, (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, "0")}`);
}
