/**
 * Chat templates: the Jinja template in tokenizer_config.json's `chat_template` (or the
 * directory's chat_template.jinja), rendered with `@huggingface/jinja` the way transformers'
 * apply_chat_template renders it: variables `messages`, `add_generation_prompt`, `tools`,
 * `documents`, the special tokens by name (`bos_token`, `eos_token`...) and any extra kwargs;
 * `raise_exception` is built into the library. trim_blocks/lstrip_blocks are the library's
 * defaults, as transformers sets them (ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)).
 * Source: transformers utils/chat_template_utils.py (render_jinja_template, _compile_jinja_template).
 */
import { Template } from "@huggingface/jinja";
import { LoomFormatError, LoomValueError } from "../tensor/errors.ts";

/** One chat message, as HF chat templates read it. */
export interface ChatMessage {
  role: string;
  content: string | unknown;
  [key: string]: unknown;
}

/** The forms `chat_template` takes in tokenizer_config.json. */
export type ChatTemplateSetting = string | readonly { name: string; template: string }[] | Record<string, string> | null | undefined;

/**
 * Picks one template: `name` (a named template or a literal template string) or "default";
 * a single-template setting is used as is.
 * @throws LoomValueError if there is no template or no template by that name
 * @throws LoomFormatError if the setting has another shape
 */
export function select_chat_template(setting: ChatTemplateSetting, name: string | undefined, tag: string): string {
  if (setting === null || setting === undefined) {
    if (name !== undefined) return name; // a literal template passed by the caller
    throw new LoomValueError(`${tag} the tokenizer has no chat_template (tokenizer_config.json "chat_template" or chat_template.jinja); pass one with { chat_template }`);
  }
  let named: Record<string, string>;
  if (typeof setting === "string") named = { default: setting };
  else if (Array.isArray(setting)) named = Object.fromEntries(setting.map((t) => [t.name, t.template]));
  else if (typeof setting === "object") named = setting as Record<string, string>;
  else throw new LoomFormatError(`${tag} chat_template must be a string, a list of {name, template} or a dict, got ${typeof setting}`);
  if (name !== undefined) return named[name] ?? name;
  const one = Object.values(named);
  if (named.default !== undefined) return named.default;
  if (one.length === 1) return one[0]!;
  throw new LoomValueError(`${tag} the tokenizer has several chat templates (${Object.keys(named).join(", ")}) and none is "default"; pick one with { chat_template: name }`);
}

const compiled = new Map<string, Template>();

/**
 * Renders `template` over `messages` plus variables.
 * @throws LoomValueError for a template that does not parse, or one that raises (raise_exception)
 */
export function render_chat_template(template: string, variables: Record<string, unknown>, tag: string): string {
  let t = compiled.get(template);
  if (t === undefined) {
    try {
      t = new Template(template);
    } catch (e) {
      throw new LoomValueError(`${tag} the chat template does not parse: ${(e as Error).message}`);
    }
    if (compiled.size > 64) compiled.clear();
    compiled.set(template, t);
  }
  try {
    return t.render(variables);
  } catch (e) {
    throw new LoomValueError(`${tag} the chat template raised: ${(e as Error).message}`);
  }
}
