/**
 * A Responses request's `tools` and `tool_choice` as chat.completions tools (./responses-request.ts).
 * Function tools -> chat tools, and the function tools a `namespace` tool groups (Codex's) each
 * under its own name; web search tools (run by OpenAI's servers, never by a chat model: Codex
 * offers one on every request) are left out while tool_choice does not require them;
 * tool_choice auto/none/required/{type:function,name}. Any other tool type is a 400 naming it.
 */
import { failParam, isRecord, type ChatTool, type ChatToolChoice } from "./chat";

/** Web search as OpenAI's servers run it: an offer a chat model can do without, so it is left out unless required. */
const WEB_SEARCH = new Set(["web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11"]);

export function translateTools(tools: unknown[], choice: unknown): ChatTool[] {
  const out: ChatTool[] = [];
  let searches = 0;
  tools.forEach((tool, i) => {
    const path = `tools[${i}]`;
    if (isRecord(tool) && tool.type === "namespace") {
      if (!Array.isArray(tool.tools)) failParam(`${path}.tools`, "must be an array of function tools");
      tool.tools.forEach((inner, j) => out.push(functionTool(inner, `${path}.tools[${j}]`)));
    } else if (isRecord(tool) && typeof tool.type === "string" && WEB_SEARCH.has(tool.type)) searches++;
    else out.push(functionTool(tool, path));
  });
  if (searches > 0 && out.length === 0 && choice === "required") failParam("tool_choice", '"required" offers only web search, which this model cannot run');
  return out;
}

function functionTool(tool: unknown, path: string): ChatTool {
  if (!isRecord(tool)) failParam(path, "must be an object");
  if (tool.type !== "function")
    failParam(
      `${path}.type`,
      `tool type ${JSON.stringify(tool.type)} cannot be translated for this model (function tools, namespaces of them, and web search, left out)`,
    );
  if (typeof tool.name !== "string" || tool.name === "") failParam(`${path}.name`, "a non-empty string is required");
  const fn: ChatTool["function"] = { name: tool.name };
  if (typeof tool.description === "string") fn.description = tool.description;
  if (tool.parameters !== undefined && tool.parameters !== null) fn.parameters = tool.parameters;
  if (typeof tool.strict === "boolean") fn.strict = tool.strict;
  return { type: "function", function: fn };
}

export function toolChoice(choice: unknown): ChatToolChoice {
  if (choice === "auto" || choice === "none" || choice === "required") return choice;
  if (isRecord(choice) && choice.type === "function" && typeof choice.name === "string") return { type: "function", function: { name: choice.name } };
  failParam("tool_choice", `${JSON.stringify(choice)} cannot be translated for this model (auto, none, required or a function)`);
}
