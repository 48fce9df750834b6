// The table of adapterConfig fields, rendered from configSchema
// (src/index.ts) so that each field is described once, in the hints
// Paperclip's agent form shows. agentConfigurationDoc (src/index.ts) holds
// it, and test/gen-config-doc.mjs writes it into docs/paperclip.md (make
// paperclip-adapter-doc); a test fails when the doc's is stale.

import type { AdapterConfigSchema, ConfigFieldSchema } from "@paperclipai/adapter-utils";

/** DEFAULT_SENTENCE is a hint's last sentence that names the field's default. */
const DEFAULT_SENTENCE = /\s*Default: (.+?)\.?$/;

/**
 * configTable renders the fields as a Markdown table, one row per field in
 * the schema's order:
 *
 *   - field: the key;
 *   - default: "required" for a required field, else the hint's last
 *     sentence "Default: …" (which then leaves the meaning), else the
 *     field's default value, else "none";
 *   - meaning: the hint, then a select's values.
 *
 * Hints are plain text (the form shows them as they are); words that look
 * like code (camelCase, --flags, ENV_VARS, snake_case, dotted.names,
 * <placeholders>, paths and URLs) are put in backticks. A field with both
 * a default value and a "Default:" sentence, or a required field with
 * either, is an error: the table would hide one of them.
 */
export function configTable(schema: AdapterConfigSchema): string {
  const rows = schema.fields.map((f) => {
    const { meaning, stated } = splitHint(f);
    return `| \`${f.key}\` | ${defaultCell(f, stated)} | ${meaningCell(f, meaning)} |`;
  });
  return ["| field | default | meaning |", "|---|---|---|", ...rows].join("\n") + "\n";
}

function splitHint(f: ConfigFieldSchema): { meaning: string; stated: string | null } {
  const hint = (f.hint ?? "").trim();
  const m = DEFAULT_SENTENCE.exec(hint);
  if (!m) return { meaning: hint, stated: null };
  return { meaning: hint.slice(0, m.index).trim(), stated: m[1]! };
}

function defaultCell(f: ConfigFieldSchema, stated: string | null): string {
  if (f.required) {
    if (stated !== null || f.default !== undefined) throw new Error(`configSchema field ${f.key}: required, yet it has a default`);
    return "required";
  }
  if (stated !== null) {
    if (f.default !== undefined) throw new Error(`configSchema field ${f.key}: both a default value and a "Default:" sentence in its hint`);
    return markdown(stated);
  }
  if (f.default !== undefined) return code(typeof f.default === "string" ? f.default : JSON.stringify(f.default));
  return "none";
}

function meaningCell(f: ConfigFieldSchema, meaning: string): string {
  let out = markdown(meaning);
  if (f.type === "select" && f.options?.length) {
    out += `${out === "" ? "" : " "}One of ${f.options.map((o) => code(o.value)).join(", ")}.`;
  }
  return out;
}

/** markdown puts the words of plain text that look like code in backticks. */
function markdown(text: string): string {
  return text
    .split(/(\s+)/)
    .map((word) => {
      const m = /^([("']*)(.*?)([)"',.;:!?]*)$/.exec(word)!;
      const [, lead, core, trail] = m as unknown as [string, string, string, string];
      return core !== "" && looksLikeCode(core) ? lead + code(core) + trail : escape(word);
    })
    .join("");
}

function looksLikeCode(w: string): boolean {
  return (
    /^[a-z]+[A-Z][A-Za-z0-9]*$/.test(w) || // camelCase: a field's key
    /^--[a-z]/.test(w) || // a flag
    w.includes("_") || // ENV_VAR, snake_case
    /[A-Za-z0-9]\.[A-Za-z]/.test(w) || // spec.id, status.json
    /<[^<>]+>/.test(w) || // <placeholder>
    w.startsWith("/") ||
    w.includes("://")
  );
}

function code(s: string): string {
  return "`" + s.replaceAll("|", "\\|") + "`";
}

function escape(s: string): string {
  return s.replaceAll("|", "\\|").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll("*", "\\*").replaceAll("`", "\\`");
}
