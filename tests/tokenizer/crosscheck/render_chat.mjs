// Renders a tokenizer_config.json chat template with @huggingface/jinja into DIR/chat.json.
import { Template } from "@huggingface/jinja";
import fs from "fs";
const [dir] = process.argv.slice(2);
const tc = JSON.parse(fs.readFileSync(dir + "/tokenizer_config.json", "utf8"));
const conv = [
  {role: "system", content: "You are a helpful assistant."},
  {role: "user", content: "Hello, who are you?"},
  {role: "assistant", content: "I am wisp."},
  {role: "user", content: "Tell me a joke."}];
const t = new Template(tc.chat_template);
const r = {conversation: conv,
  generation_prompt: t.render({messages: conv, bos_token: tc.bos_token, add_generation_prompt: true, enable_thinking: false})};
if (tc.chat_template.includes("enable_thinking")) r.generation_prompt_thinking = t.render({messages: conv, bos_token: tc.bos_token, add_generation_prompt: true, enable_thinking: true});
fs.writeFileSync(dir + "/chat.json", JSON.stringify(r, null, 2));
console.log(JSON.stringify(r.generation_prompt), JSON.stringify(r.generation_prompt_thinking));
