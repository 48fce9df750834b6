// Paperclip's run page parser (the package's ./ui-parser export): each line
// of the run's log as one stdout entry, until the CLI streams are parsed.
export function parseStdoutLine(line: string, ts: string) {
  return [{ kind: "stdout", ts, text: line }];
}
