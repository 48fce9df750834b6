// docs/paperclip.md's table of adapterConfig fields is rendered from
// configSchema (test/gen-config-doc.mjs), and how it is rendered.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { configTable } from "../dist/config-doc.js";
import { DOC, table, withTable } from "./gen-config-doc.mjs";

test("docs/paperclip.md's adapterConfig table is configSchema's", () => {
  const doc = readFileSync(DOC, "utf8");
  assert.equal(
    table(doc),
    table(withTable(doc)),
    "docs/paperclip.md's adapterConfig table is not what configSchema in src/index.ts says: run `make paperclip-adapter-doc`",
  );
});

test("the table: required, a hint's Default: sentence, a default value, none; a select's values; code in backticks", () => {
  const table = configTable({
    fields: [
      { key: "spoolDir", label: "", type: "text", required: true, hint: "Path of the spool (its --spool)." },
      { key: "stateDir", label: "", type: "text", hint: "Where status.json is. Default: <spoolDir>/.pcsync." },
      { key: "timeoutSec", label: "", type: "number", default: 0, hint: "0: the PAPERCLIP_X or jobs.activeDeadlineSeconds." },
      { key: "mode", label: "", type: "select", default: "a", options: [{ label: "A", value: "a" }, { label: "B", value: "b|c" }], hint: "A mode." },
      { key: "note", label: "", type: "textarea" },
    ],
  });
  assert.equal(
    table,
    [
      "| field | default | meaning |",
      "|---|---|---|",
      "| `spoolDir` | required | Path of the spool (its `--spool`). |",
      "| `stateDir` | `<spoolDir>/.pcsync` | Where `status.json` is. |",
      "| `timeoutSec` | `0` | 0: the `PAPERCLIP_X` or `jobs.activeDeadlineSeconds`. |",
      "| `mode` | `a` | A mode. One of `a`, `b\\|c`. |",
      "| `note` | none |  |",
      "",
    ].join("\n"),
  );
});

test("a default said twice, or a required field with a default, is an error", () => {
  assert.throws(
    () => configTable({ fields: [{ key: "k", label: "", type: "number", default: 1, hint: "A k. Default: 2." }] }),
    /k: both a default value and a "Default:" sentence/,
  );
  assert.throws(() => configTable({ fields: [{ key: "k", label: "", type: "text", required: true, hint: "Default: x." }] }), /k: required, yet it has a default/);
});
