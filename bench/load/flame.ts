/**
 * A V8 CPU profile (`node --cpu-prof`) as a flame graph (SVG, one rect per call path, width by
 * busy time, hover for the name) and a table of where the busy time goes by function (self time);
 * idle samples are left out. Frames of a bundle with a source map beside it (the services' build)
 * are named by their TypeScript source and line.
 *
 *   node --import ./deploy/loader.mjs bench/load/flame.ts <profile.cpuprofile> <out.svg> [out.md]
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber?: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
}

const repository = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const maps = new Map<string, SourceMap | undefined>();

/** The source map written beside a bundled file, if there is one. */
function mapOf(path: string): SourceMap | undefined {
  if (!maps.has(path)) {
    const file = `${path}.map`;
    maps.set(path, existsSync(file) ? new SourceMap(JSON.parse(readFileSync(file, 'utf8'))) : undefined);
  }
  return maps.get(path);
}

/** Where a frame's code was written: the source file and line behind a bundle, else the file as run. */
function placeOf(frame: ProfileNode['callFrame']): string {
  if (frame.url === '') return '';
  const path = frame.url.startsWith('file://') ? fileURLToPath(frame.url) : frame.url;
  const found = path.startsWith('/')
    ? mapOf(path)?.findEntry(frame.lineNumber, frame.columnNumber ?? 0)
    : undefined;
  // An empty object when the map has no entry there.
  const entry = found as { originalSource?: string; originalLine: number } | undefined;
  if (entry?.originalSource !== undefined) {
    const source = entry.originalSource.startsWith('file://')
      ? fileURLToPath(entry.originalSource)
      : resolve(dirname(path), entry.originalSource);
    return `${relative(repository, source).replace(/^node_modules\//, '')}:${entry.originalLine + 1}`;
  }
  return `${path.replace(/^.*\/(node_modules|work\/[^/]+)\//, '')}:${frame.lineNumber + 1}`;
}

export const nameOf = (n: Pick<ProfileNode, 'callFrame'>) => {
  const place = placeOf(n.callFrame);
  const fn = n.callFrame.functionName || '(anonymous)';
  return place === '' ? fn : `${fn} ${place}`;
};

export function flame(profile: Profile, title: string): { svg: string; table: string } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  // Busy time only: samples of an idle event loop say nothing of what a call costs.
  const idle = new Set(profile.nodes.filter((n) => n.callFrame.functionName === '(idle)').map((n) => n.id));
  const self = new Map<number, number>();
  for (const id of profile.samples) if (!idle.has(id)) self.set(id, (self.get(id) ?? 0) + 1);
  const total = new Map<number, number>();
  const totalOf = (id: number): number => {
    const known = total.get(id);
    if (known !== undefined) return known;
    const node = byId.get(id);
    const sum = (self.get(id) ?? 0) + (node?.children ?? []).reduce((s, c) => s + totalOf(c), 0);
    total.set(id, sum);
    return sum;
  };
  const rootNode = profile.nodes[0] as ProfileNode;
  const all = totalOf(rootNode.id);
  const width = 1200;
  const rowH = 16;
  const boxes: Array<{ x: number; w: number; depth: number; name: string; share: string }> = [];
  const walk = (id: number, x: number, depth: number) => {
    const node = byId.get(id) as ProfileNode;
    const w = (totalOf(id) / all) * width;
    if (w < 0.3) return;
    boxes.push({ x, w, depth, name: nameOf(node), share: ((totalOf(id) / all) * 100).toFixed(1) });
    let cx = x;
    for (const child of node.children ?? []) {
      walk(child, cx, depth + 1);
      cx += (totalOf(child) / all) * width;
    }
  };
  walk(rootNode.id, 0, 0);
  const depthMax = Math.max(0, ...boxes.map((b) => b.depth));
  const top = 24;
  const height = top + (depthMax + 1) * rowH;
  // Roots at the bottom, callees above them, as flame graphs are read.
  const rects = boxes.map((b) => {
    const y = top + (depthMax - b.depth) * rowH;
    const hue =
      b.name.includes('node:') || !b.name.includes(' ') ? 30 : b.name.includes('node_modules') ? 200 : 10;
    const label =
      b.w > 60
        ? `<text x="${(b.x + 3).toFixed(2)}" y="${y + 12}" font-size="10">${escapeXml(b.name.slice(0, Math.floor(b.w / 6)))}</text>`
        : '';
    return `<g><title>${escapeXml(b.name)} (${b.share}%)</title><rect x="${b.x.toFixed(2)}" y="${y}" width="${b.w.toFixed(2)}" height="${rowH - 1}" fill="hsl(${hue},70%,${55 + (b.depth % 5) * 5}%)"/>${label}</g>`;
  });
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="monospace">
<text x="4" y="16" font-size="13" font-family="sans-serif">${escapeXml(title)}</text>
${rects.join('\n')}
</svg>
`;
  const selfByName = new Map<string, number>();
  for (const [id, hits] of self) {
    const name = nameOf(byId.get(id) as ProfileNode);
    selfByName.set(name, (selfByName.get(name) ?? 0) + hits);
  }
  const rows = [...selfByName]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 30)
    .map(([name, hits]) => `| ${((hits / all) * 100).toFixed(1)}% | \`${name.replaceAll('|', '\\|')}\` |`);
  // Inclusive: a function with everything it called, each sample counted once per name on its stack.
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const withCallees = new Map<string, number>();
  for (const [id, hits] of self) {
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const name = nameOf(byId.get(at) as ProfileNode);
      if (name === '(root)' || seen.has(name)) continue;
      seen.add(name);
      withCallees.set(name, (withCallees.get(name) ?? 0) + hits);
    }
  }
  const inclusive = [...withCallees]
    .filter(([name]) => !name.includes('node:') && name.includes(' '))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 20)
    .map(([name, hits]) => `| ${((hits / all) * 100).toFixed(1)}% | \`${name.replaceAll('|', '\\|')}\` |`);
  const table = `| self time | function |\n| ---: | --- |\n${rows.join('\n')}\n\nWith everything they called (the project's and its packages' functions), the top 20:\n\n| inclusive time | function |\n| ---: | --- |\n${inclusive.join('\n')}\n`;
  return { svg, table };
}

function escapeXml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

if (process.argv[1]?.endsWith('flame.ts')) {
  const [input, svgOut, mdOut] = process.argv.slice(2);
  if (input === undefined || svgOut === undefined) {
    console.error('usage: flame.ts <profile.cpuprofile> <out.svg> [out.md]');
    process.exit(2);
  }
  const { svg, table } = flame(JSON.parse(readFileSync(input, 'utf8')) as Profile, input);
  writeFileSync(svgOut, svg);
  if (mdOut !== undefined) writeFileSync(mdOut, table);
}
