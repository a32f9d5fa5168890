import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { root } from './processes';

/** One command of a document's shell blocks: where it is written, and its text as written. */
export interface Step {
  where: string;
  text: string;
}

/**
 * The commands of the `sh` blocks of `file` (relative to the repository) that talk to the
 * service (`curl` and `npm run admin`), continuation lines joined, comments left to the shell.
 * `after` skips the blocks before the first line containing it.
 */
export function stepsOf(file: string, options: { after?: string } = {}): Step[] {
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  const start =
    options.after === undefined ? 0 : lines.findIndex((line) => line.includes(options.after ?? ''));
  if (start < 0) throw new Error(`${file}: no line with ${options.after}`);
  const steps: Step[] = [];
  let inShell = false;
  for (let i = start; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line.startsWith('```')) {
      inShell = !inShell && /^```(sh|bash)\s*$/.test(line);
      continue;
    }
    if (!inShell || !/^(curl|npm run admin)\b/.test(line)) continue;
    let text = line;
    let at = i;
    while (text.endsWith('\\') && at + 1 < lines.length) text = `${text}\n${lines[++at]}`;
    // A quoted body may go on over lines too (a JSON document broken for reading).
    while ((text.match(/'/g)?.length ?? 0) % 2 === 1 && at + 1 < lines.length)
      text = `${text}\n${lines[++at]}`;
    steps.push({ where: `${file}:${i + 1}`, text });
    i = at;
  }
  return steps;
}

/** The code block (```ts) that follows the first line of `file` containing `after`. */
export function codeBlockOf(file: string, after: string): Step {
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  const heading = lines.findIndex((line) => line.includes(after));
  const open = lines.findIndex((line, i) => i > heading && /^```ts\s*$/.test(line));
  const close = lines.findIndex((line, i) => i > open && line.startsWith('```'));
  if (heading < 0 || open < 0 || close < 0) throw new Error(`${file}: no ts block after ${after}`);
  return { where: `${file}:${open + 2}`, text: lines.slice(open + 1, close).join('\n') };
}

/** What the placeholders of the documents stand for, filled from the run. */
export interface Filling {
  /** The service's address, for `localhost:8080`. */
  host: string;
  sandboxKey?: string;
  liveKey?: string;
  /** A Stripe key the Stripe the service talks to takes (stripe-mock's). */
  stripeKey: string;
  /** Where `https://example.com` (RFC 2606's example domain) is served in the run. */
  example: string;
  /** Everything the commands before answered, newest first: an id placeholder takes the last id of its kind. */
  answers: string[];
}

/**
 * The command as a reader runs it: `localhost:8080` is the service; `sk_test_…` and `sk_live_…`
 * the provider's keys, except a Stripe `secretKey` (the Stripe account's); `whsec_…` a Stripe
 * webhook signing secret; any other `<prefix>_…` (`pln_…`, `pur_…`, `inv_…`, `prv_…`) the last id
 * of that kind an earlier command answered. A placeholder nothing answered fails the step.
 */
export function fill(step: Step, filling: Filling): string {
  return step.text
    .replaceAll('localhost:8080', filling.host)
    .replaceAll('127.0.0.1:8080', filling.host)
    .replaceAll('https://example.com', filling.example)
    .replace(/("secretKey":")?\b([a-z]+(?:_[a-z]+)?)_…(\([^)]*\))?/g, (_whole, stripe, prefix: string) => {
      if (stripe !== undefined) return `${stripe}${filling.stripeKey}`;
      if (prefix === 'sk_test') return need(filling.sandboxKey, 'sk_test_…', step);
      if (prefix === 'sk_live') return need(filling.liveKey, 'sk_live_…', step);
      if (prefix === 'whsec') return 'whsec_quickstartSigningSecret0';
      const pattern = new RegExp(`\\b${prefix}_[0-9a-z]{26}\\b`);
      for (const answer of filling.answers) {
        const id = answer.match(pattern)?.[0];
        if (id !== undefined) return id;
      }
      throw new Error(`${step.where}: no earlier command answered a ${prefix}_ id for ${prefix}_…`);
    });
}

const need = (value: string | undefined, what: string, step: Step) => {
  if (value === undefined) throw new Error(`${step.where}: ${what} is used before any command made it`);
  return value;
};
