/**
 * Where a sampled heap profile's bytes were allocated (`alloc-sampler.mjs` writes it), by
 * function (self) and by call path through the proxy's own code (the innermost frame of ours
 * that led to the allocation), each as bytes a call when told how many calls the profile covers.
 * Frames of the services' build are named by their TypeScript source and line (flame.ts).
 *
 *   node --import ./deploy/loader.mjs bench/load/alloc-table.ts <file.heapprofile> [calls] [top]
 */
import { readFileSync } from 'node:fs';
import { nameOf } from './flame';

interface SampledNode {
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber?: number };
  selfSize: number;
  children: SampledNode[];
}

const [file, callsText, topText] = process.argv.slice(2);
if (file === undefined) throw new Error('usage: alloc-table.ts <file.heapprofile> [calls] [top]');
const calls = Number(callsText ?? 0);
const top = Number(topText ?? 30);
const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: SampledNode };

const bySelf = new Map<string, number>();
const byOwnFrame = new Map<string, number>();
let total = 0;
/** Ours: the project's sources (named through the build's maps), not node_modules or Node's. */
const ours = (name: string) => /(proxy|control-plane|contracts|ingest|deploy)\/src\//.test(name);

/** `own` is the innermost frame of ours between the root and this node. */
function walk(node: SampledNode, own: string): void {
  const name = nameOf(node);
  const here = ours(name) ? name : own;
  if (node.selfSize > 0) {
    total += node.selfSize;
    bySelf.set(name, (bySelf.get(name) ?? 0) + node.selfSize);
    byOwnFrame.set(here, (byOwnFrame.get(here) ?? 0) + node.selfSize);
  }
  for (const child of node.children) walk(child, here);
}
walk(head, '(none of ours)');

const amount = (bytes: number) =>
  calls > 0 ? `${(bytes / calls).toFixed(0)} B/call` : `${(bytes / 1024).toFixed(0)} KiB`;
const table = (title: string, rows: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [name, bytes] of [...rows].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(
      `${amount(bytes).padStart(14)}  ${((100 * bytes) / total).toFixed(1).padStart(5)} %  ${name}`,
    );
};
console.log(`sampled ${amount(total)} in all${calls > 0 ? ` over ${calls} calls` : ''}`);
table('by function (self)', bySelf);
table('by the innermost frame of ours on the path', byOwnFrame);
