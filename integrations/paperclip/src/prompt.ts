// The wake prompt, built the way Paperclip's built-in local adapters build it
// (claude_local, codex_local, …), so an agent run through pcsync reads the
// same text it would read when run by Paperclip itself.

import {
  DEFAULT_PAPERCLIP_AGENT_PROMPT_TEMPLATE,
  DEFAULT_PAPERCLIP_CONVERSATION_PROMPT_TEMPLATE,
  isPaperclipRecoveryWakePayload,
  joinPromptSections,
  readPaperclipIssueWorkModeFromContext,
  renderPaperclipWakePrompt,
  renderTemplate,
  selectPaperclipTaskMarkdown,
} from "@paperclipai/adapter-utils/server-utils";
import type { AdapterAgent } from "@paperclipai/adapter-utils";

/** PromptInput is what the prompt depends on. */
export interface PromptInput {
  runId: string;
  agent: AdapterAgent;
  context: Record<string, unknown>;
  /** resumed: the run continues a CLI session. */
  resumed: boolean;
  promptTemplate: string;
  bootstrapPromptTemplate: string;
}

/** Prompt is the prompt with the size of each of its sections. */
export interface Prompt {
  text: string;
  metrics: Record<string, number>;
}

/**
 * buildPrompt joins, in this order: the bootstrap template (new sessions
 * only), the wake prompt, the session hand-off note, the task's markdown, and
 * the heartbeat template (left out when a resumed session gets a wake delta,
 * or for a recovery wake).
 */
export function buildPrompt(p: PromptInput): Prompt {
  const { context } = p;
  const conversation = context.conversationMode === true;
  const template =
    p.promptTemplate.trim() !== ""
      ? p.promptTemplate
      : conversation
        ? DEFAULT_PAPERCLIP_CONVERSATION_PROMPT_TEMPLATE
        : DEFAULT_PAPERCLIP_AGENT_PROMPT_TEMPLATE;
  const data = {
    agentId: p.agent.id,
    companyId: p.agent.companyId,
    runId: p.runId,
    company: { id: p.agent.companyId },
    agent: p.agent,
    run: { id: p.runId, source: "on_demand" },
    context,
  };
  const bootstrap =
    !p.resumed && p.bootstrapPromptTemplate.trim() !== "" ? renderTemplate(p.bootstrapPromptTemplate, data).trim() : "";
  const taskNote = selectPaperclipTaskMarkdown(context, { resumedSession: p.resumed });
  const wake = renderPaperclipWakePrompt(context.paperclipWake, {
    resumedSession: p.resumed,
    conversationMode: conversation,
    suppressIssueDescription: taskNote.length > 0,
  });
  const heartbeat =
    (p.resumed && wake.length > 0) || isPaperclipRecoveryWakePayload(context.paperclipWake) ? "" : renderTemplate(template, data);
  const handoff = typeof context.paperclipSessionHandoffMarkdown === "string" ? context.paperclipSessionHandoffMarkdown.trim() : "";
  const text = joinPromptSections([bootstrap, wake, handoff, taskNote, heartbeat]);
  return {
    text,
    metrics: {
      promptChars: text.length,
      bootstrapPromptChars: bootstrap.length,
      wakePromptChars: wake.length,
      sessionHandoffChars: handoff.length,
      taskContextChars: taskNote.length,
      heartbeatPromptChars: heartbeat.length,
    },
  };
}

/** ContextValue is what pcsync accepts as a context value. */
export type ContextValue = string | number | boolean;

function nonEmpty(v: unknown): string | null {
  return typeof v === "string" && v.trim() !== "" ? v.trim() : null;
}

/**
 * requestContext picks the wake context the built-in adapters hand to the
 * agent as PAPERCLIP_* env (task, wake reason, comment, approval, linked
 * issues, work mode), as flat values for the request's `context`; pcsync
 * turns each key into PAPERCLIP_<UPPER_SNAKE>. The prompt carries the rest.
 */
export function requestContext(context: Record<string, unknown>): Record<string, ContextValue> {
  const out: Record<string, ContextValue> = {};
  const taskId = nonEmpty(context.taskId) ?? nonEmpty(context.issueId);
  if (taskId) out.taskId = taskId;
  const issueId = nonEmpty(context.issueId);
  if (issueId) out.issueId = issueId;
  const wakeReason = nonEmpty(context.wakeReason);
  if (wakeReason) out.wakeReason = wakeReason;
  const commentId = nonEmpty(context.wakeCommentId) ?? nonEmpty(context.commentId);
  if (commentId) out.wakeCommentId = commentId;
  const approvalId = nonEmpty(context.approvalId);
  if (approvalId) out.approvalId = approvalId;
  const approvalStatus = nonEmpty(context.approvalStatus);
  if (approvalStatus) out.approvalStatus = approvalStatus;
  if (Array.isArray(context.issueIds)) {
    const ids = context.issueIds.filter((v): v is string => typeof v === "string" && v.trim() !== "").map((v) => v.trim());
    if (ids.length > 0) out.linkedIssueIds = ids.join(",");
  }
  const workMode = nonEmpty(readPaperclipIssueWorkModeFromContext(context));
  if (workMode) out.issueWorkMode = workMode;
  return out;
}
