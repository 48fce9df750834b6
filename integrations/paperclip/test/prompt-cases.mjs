// The wake contexts of the prompt parity test (test/prompt.test.mjs) and of
// test/gen-prompt-goldens.mjs, which records the prompts Paperclip's
// built-in claude_local adapter builds for them.

export const agent = { id: "a9d1a7c2-6a57-4f0e-93c4-1c2d3e4f5a6b", companyId: "c1", name: "Coder", adapterType: "claude_local", adapterConfig: {} };
export const runId = "5b0c8d43-7f3e-4a51-9d57-2f8e1c0a6b19";
export const sessionId = "11111111-2222-4333-8444-555555555555";

export const contexts = {
  manual: { wakeReason: "manual" },
  assigned: {
    taskId: "i1",
    issueId: "i1",
    wakeReason: "issue_assigned",
    paperclipTaskMarkdown: "# Task\n\nFix the failing test in pkg/foo.",
    paperclipWake: {
      reason: "issue_assigned",
      issue: { id: "i1", identifier: "ACME-1", title: "Fix foo", description: "The test fails.", status: "todo", priority: "medium" },
      comments: [],
      commentIds: [],
      latestCommentId: null,
      fallbackFetchNeeded: false,
    },
  },
};

/** cases: every context, as a new session and as a resumed one. */
export const cases = Object.entries(contexts).flatMap(([label, context]) =>
  [false, true].map((resumed) => ({ name: `${label}-${resumed ? "resumed" : "new"}`, context, resumed })),
);
